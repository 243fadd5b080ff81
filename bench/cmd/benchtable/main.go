// Command benchtable turns the output of the project's Go benchmarks into one
// table in which every throughput is also a ratio to the limit measured in the
// same run: BenchmarkPebbleSyncedLimit, raw synced Pebble writes of the same
// bytes. It reads `go test -bench -json` (or plain `go test -bench`) output
// on stdin:
//
//	go test ./bench -run '^$' -bench . -benchmem -count 1 -json | go run ./bench/cmd/benchtable
//
// Pairing: a row is compared with the limit of the same batch, read from its
// name (batch=N, frames=N, a trailing -N such as completed-100, or 1 when the
// name has none). Its rate is the msgs/s it reports, else its entries/s,
// else ops/s. The exit status is 1 when a benchmark or
// the test binary failed, or when no benchmark ran.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
)

// limitName is the benchmark every row is compared with.
const limitName = "PebbleSyncedLimit"

type result struct {
	name    string // without "Benchmark" and the -GOMAXPROCS suffix
	n       int64
	metrics map[string]float64
}

func main() {
	text, failed, err := readOutput(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	results, header := parse(text)
	if len(results) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no benchmark results in the input")
		os.Exit(1)
	}
	write(os.Stdout, results, header)
	if failed {
		fmt.Fprintln(os.Stderr, "benchtable: a benchmark failed (see its output above)")
		os.Exit(1)
	}
}

// readOutput returns the text of the run: test2json events' Output, or the
// lines themselves when they are not JSON. Lines that report failures are
// echoed to stderr as they come.
func readOutput(r io.Reader) (string, bool, error) {
	var b strings.Builder
	failed := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var ev struct {
			Action, Output string
		}
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &ev) == nil && ev.Action != "" {
			if ev.Action == "fail" {
				failed = true
			}
			line = ev.Output
		} else {
			line += "\n"
		}
		if strings.Contains(line, "--- FAIL") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "panic:") {
			failed = true
		}
		if failed && !strings.HasPrefix(line, "Benchmark") {
			fmt.Fprint(os.Stderr, line)
		}
		b.WriteString(line)
	}
	return b.String(), failed, sc.Err()
}

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// parse reads benchmark result lines. A name line without results (the
// benchmark logged while it ran) is joined with the next result line.
func parse(text string) ([]result, []string) {
	var out []result
	var header []string
	pending := ""
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "cpu:") || strings.HasPrefix(line, "goos:") || strings.HasPrefix(line, "goarch:") {
			header = append(header, line)
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if strings.HasPrefix(fields[0], "Benchmark") {
			if !strings.Contains(line, "ns/op") {
				pending = fields[0]
				continue
			}
		} else if pending != "" && strings.Contains(line, "ns/op") {
			fields = append([]string{pending}, fields...)
		} else {
			continue
		}
		pending = ""
		n, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		r := result{name: strings.TrimPrefix(fields[0], "Benchmark"), n: n, metrics: map[string]float64{}}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				break
			}
			unit := fields[i+1]
			r.metrics[unit] = v
		}
		out = append(out, r)
	}
	// go test appends -GOMAXPROCS to every name when it is not 1: strip
	// it only when every name carries the same suffix.
	suffix := ""
	for i, r := range out {
		m := procsSuffix.FindString(r.name)
		if i == 0 {
			suffix = m
		} else if m != suffix {
			suffix = ""
			break
		}
	}
	if suffix != "" {
		for i := range out {
			out[i].name = strings.TrimSuffix(out[i].name, suffix)
		}
	}
	return out, header
}

var batchPattern = regexp.MustCompile(`(?:batch|frames)=(\d+)|-(\d+)(?:/|$)`)

// batchOf reads the messages per op from a benchmark name.
func batchOf(name string) int {
	for _, m := range batchPattern.FindAllStringSubmatch(name, -1) {
		s := m[1]
		if s == "" {
			s = m[2]
		}
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// rateUnits are the rate metrics a row may report, in order of preference.
var rateUnits = []string{"msgs/s", "entries/s"}

// rate is a row's throughput: msgs/s or entries/s when it reports one, else
// ops/s.
func (r result) rate() (float64, string) {
	for _, u := range rateUnits {
		if v, ok := r.metrics[u]; ok {
			return v, u
		}
	}
	if ns := r.metrics["ns/op"]; ns > 0 {
		return 1e9 / ns, "ops/s"
	}
	return 0, ""
}

func write(w io.Writer, results []result, header []string) {
	limits := map[int]result{}
	for _, r := range results {
		if strings.HasPrefix(r.name, limitName+"/") || r.name == limitName {
			limits[batchOf(r.name)] = r
		}
	}
	for _, h := range header {
		fmt.Fprintln(w, h)
	}
	fmt.Fprintf(w, "\nlimit (%s, measured in this run):", limitName)
	if len(limits) == 0 {
		fmt.Fprint(w, " not measured; ratios omitted")
	}
	for _, r := range results {
		if l, ok := limits[batchOf(r.name)]; ok && l.name == r.name {
			rate, unit := r.rate()
			fmt.Fprintf(w, "\n  batch=%d: %s fsyncs/s, %s %s, %s MB/s", batchOf(r.name), human(1e9/r.metrics["ns/op"]),
				human(rate), unit, num(r.metrics, "MB/s"))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "x limit = rate / limit rate at the same batch (I/O paths: efficiency, >1 only by group commit; CPU-only paths: headroom over the disk)")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "benchmark\tns/op\tMB/s\trate\tunit\tx limit\tlimit\tB/op\tallocs/op\t")
	for _, r := range results {
		rate, unit := r.rate()
		ratio, against := "-", "-"
		if l, ok := limits[batchOf(r.name)]; ok {
			if lr, _ := l.rate(); lr > 0 {
				ratio = ratioString(rate / lr)
				against = fmt.Sprintf("batch=%d", batchOf(r.name))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.name, num(r.metrics, "ns/op"), num(r.metrics, "MB/s"),
			human(rate), unit, ratio, against, num(r.metrics, "B/op"), num(r.metrics, "allocs/op"))
	}
	tw.Flush()
}

// num formats a metric, or "-" when the row lacks it.
func num(m map[string]float64, unit string) string {
	v, ok := m[unit]
	if !ok {
		return "-"
	}
	if v >= 100 || v == float64(int64(v)) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// human writes a rate with three significant digits and a k/M suffix.
func human(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// ratioString keeps three significant digits for small ratios and drops the
// decimals of large ones (CPU-only headroom).
func ratioString(x float64) string {
	switch {
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
