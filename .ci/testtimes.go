//go:build ignore

// testtimes reads `go test -json` output (mixed with any other lines, such
// as make's and go vet's) on stdin and writes what a plain `go test` would
// have printed: each package's closing line ("ok  pkg  12.3s", "FAIL pkg"),
// build errors, and the full output of every test that failed (its
// "--- FAIL" line and its logs), or of every test still running when its
// package failed (a panic, a timeout). Lines that are not test events pass
// through unchanged. At the end it prints each package's time and the
// slowest tests, so a run says where its minutes went.
//
//	make test GOTESTFLAGS=-json 2>&1 | go run .ci/testtimes.go
//
// It exits 0 whatever the tests did: the caller judges the run by go test's
// exit status (bash: set -o pipefail), as the lines say.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	Elapsed    float64
	ImportPath string
}

type result struct {
	name    string
	action  string
	elapsed float64
}

func main() {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var (
		buffered = map[string][]string{} // package + " " + test -> its output lines
		pkgs     []result
		tests    []result
		started  = time.Now()
	)
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadString('\n')
		if line != "" {
			var e event
			if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil || e.Action == "" {
				out.WriteString(line)
				if !strings.HasSuffix(line, "\n") {
					out.WriteString("\n")
				}
			} else {
				handle(out, e, buffered, &pkgs, &tests)
			}
			out.Flush()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Fprintln(out, "testtimes: read:", err)
			break
		}
	}
	report(out, pkgs, tests, time.Since(started))
}

func handle(out io.StringWriter, e event, buffered map[string][]string, pkgs, tests *[]result) {
	key := e.Package + " " + e.Test
	switch {
	case e.Action == "build-output":
		out.WriteString(e.Output)
	case e.Test == "" && e.Action == "output":
		// The package's own lines: "ok ...", "FAIL ...", a panic outside
		// any test, a coverage line. go test prints a passing package's
		// "PASS" only with -v.
		if e.Output != "PASS\n" {
			out.WriteString(e.Output)
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		*pkgs = append(*pkgs, result{e.Package, e.Action, e.Elapsed})
		if e.Action == "fail" {
			// Tests that never finished (a panic, the -timeout): their
			// output says why the package failed.
			var left []string
			for k := range buffered {
				if strings.HasPrefix(k, e.Package+" ") {
					left = append(left, k)
				}
			}
			slices.Sort(left)
			for _, k := range left {
				for _, l := range buffered[k] {
					out.WriteString(l)
				}
				delete(buffered, k)
			}
		}
	case e.Test != "" && e.Action == "output":
		if isFraming(e.Output) {
			return
		}
		buffered[key] = append(buffered[key], e.Output)
	case e.Test != "" && e.Action == "fail":
		for _, l := range buffered[key] {
			out.WriteString(l)
		}
		delete(buffered, key)
		*tests = append(*tests, result{e.Package + " " + e.Test, e.Action, e.Elapsed})
	case e.Test != "" && (e.Action == "pass" || e.Action == "skip"):
		delete(buffered, key)
		if !strings.Contains(e.Test, "/") {
			*tests = append(*tests, result{e.Package + " " + e.Test, e.Action, e.Elapsed})
		}
	}
}

// isFraming reports the lines go test -v adds around each test, which a
// plain go test does not print.
func isFraming(s string) bool {
	t := strings.TrimLeft(s, " ")
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// report prints the slowest tests, then every package's closing line again,
// slowest first, in go test's own format ("ok  \tpkg\t12.3s", "FAIL\tpkg\t...")
// so that the run still ends with go test's lines.
func report(out io.Writer, pkgs, tests []result, wall time.Duration) {
	if len(pkgs) == 0 {
		return
	}
	slices.SortStableFunc(tests, func(a, b result) int { return cmp.Compare(b.elapsed, a.elapsed) })
	fmt.Fprintf(out, "\n== the slowest tests\n")
	for i, t := range tests {
		if i == 15 {
			break
		}
		fmt.Fprintf(out, "%8.1fs  %-4s  %s\n", t.elapsed, t.action, t.name)
	}
	slices.SortStableFunc(pkgs, func(a, b result) int { return cmp.Compare(b.elapsed, a.elapsed) })
	sum := 0.0
	for _, p := range pkgs {
		sum += p.elapsed
	}
	fmt.Fprintf(out, "== time per package, slowest first: %.1fs in all, %.1fs of wall time (packages run side by side)\n", sum, wall.Seconds())
	for _, p := range pkgs {
		switch p.action {
		case "pass":
			fmt.Fprintf(out, "ok  \t%s\t%.3fs\n", p.name, p.elapsed)
		case "fail":
			fmt.Fprintf(out, "FAIL\t%s\t%.3fs\n", p.name, p.elapsed)
		default:
			if p.elapsed >= 0.05 { // a package without test files is not listed
				fmt.Fprintf(out, "?   \t%s\t%.3fs (%s)\n", p.name, p.elapsed, p.action)
			}
		}
	}
}
