package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured. Its JSON form is what `queen bench --json`
// prints.
type Report struct {
	Workload   Workload `json:"workload"`
	URLs       []string `json:"urls"`
	Conns      int      `json:"conns"`
	Batch      int      `json:"batch"`
	Size       int      `json:"size"`
	Queues     int      `json:"queues"`
	Partitions int      `json:"partitions"`
	Groups     int      `json:"groups"`
	// Seconds is the time the rates are over: the run's wall time, except
	// that a drained run ends at its last reply that did work (the Idle
	// spent finding the queues empty is not counted).
	Seconds float64 `json:"seconds"`
	// WallSeconds is the run's wall time, start to the last reply.
	WallSeconds float64 `json:"wall_seconds"`
	// Stop says what ended the run: duration, messages, drained (popack:
	// nothing left to pop for Idle) or cancelled.
	Stop string `json:"stop"`
	// Pushed counts messages the broker queued; Popped messages delivered
	// by pops; Acked messages acked successfully (over all groups).
	Pushed int64 `json:"pushed"`
	Popped int64 `json:"popped"`
	Acked  int64 `json:"acked"`
	// Ops has one entry per operation the workload ran: push, pop, ack;
	// read (its Messages are the successful reads).
	Ops map[string]OpReport `json:"ops"`
	// Errors counts failures by "operation/class": a transport class
	// (timeout, conn_closed, no_free_conns, transport), http_<status>,
	// decode (unreadable reply), item_failed (an item the broker refused),
	// duplicate (a push the broker deduplicated).
	Errors map[string]int64 `json:"errors"`
}

// OpReport is one operation's throughput and latency.
type OpReport struct {
	// Requests is the number of requests sent, failed ones included.
	Requests int64 `json:"requests"`
	// Empty counts pops that delivered nothing (not in the latencies).
	Empty int64 `json:"empty,omitempty"`
	// Messages is the messages pushed, delivered or acked.
	Messages int64 `json:"messages"`
	// MsgsPerSec and MBPerSec are Messages, and their payload bytes in
	// units of 10^6, over the run's Seconds.
	MsgsPerSec float64 `json:"msgs_per_s"`
	MBPerSec   float64 `json:"mb_per_s"`
	// Latency is the successful requests' latency in milliseconds.
	Latency Latency `json:"latency_ms"`
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99.9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func latencyOf(h *Histogram) Latency {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // µs precision
	return Latency{P50: ms(h.Percentile(50)), P90: ms(h.Percentile(90)), P99: ms(h.Percentile(99)),
		P999: ms(h.Percentile(99.9)), Max: ms(h.Max()), Mean: ms(h.Mean())}
}

// report gathers the workers' counters once they have all returned.
func (r *run) report(workers []*worker, elapsed time.Duration) Report {
	o := r.opts
	rep := Report{Workload: o.Workload, URLs: o.URLs, Conns: o.Conns, Batch: o.Batch, Size: o.Size,
		Queues: o.Queues, Partitions: o.Partitions, Groups: o.Groups, Seconds: elapsed.Seconds(),
		WallSeconds: elapsed.Seconds(), Pushed: r.pushed.Load(), Popped: r.popped.Load(), Acked: r.acked.Load(),
		Ops: map[string]OpReport{}, Errors: map[string]int64{}}
	done := rep.Pushed
	if o.Workload == PopAck {
		done = rep.Acked
	}
	switch {
	case r.ctx.Err() != nil:
		rep.Stop = "cancelled"
	case o.Messages > 0 && done >= o.Messages:
		rep.Stop = "messages"
	case !time.Now().Before(r.deadline):
		rep.Stop = "duration"
	default:
		rep.Stop = "drained"
		// The last Idle was spent finding the queues empty: rates count
		// the time until the last reply that did work.
		if last := r.lastDone.Load(); last > r.start.UnixNano() {
			rep.Seconds = time.Duration(last - r.start.UnixNano()).Seconds()
		}
	}
	var push, pop, ack, read Histogram
	var pushReqs, popReqs, ackReqs, empty, readReqs, readsOK int64
	for _, w := range workers {
		if w.pushLat != nil {
			push.Merge(w.pushLat)
		}
		if w.popLat != nil {
			pop.Merge(w.popLat)
			ack.Merge(w.ackLat)
		}
		if w.readLat != nil {
			read.Merge(w.readLat)
		}
		readReqs += w.readReqs
		readsOK += w.readsOK
		pushReqs += w.pushReqs
		popReqs += w.popReqs
		ackReqs += w.ackReqs
		empty += w.emptyPops
		for k, v := range w.errs {
			rep.Errors[k] += v
		}
	}
	op := func(reqs, msgs int64, h *Histogram) OpReport {
		rate := float64(msgs) / rep.Seconds
		return OpReport{Requests: reqs, Messages: msgs, MsgsPerSec: math.Round(rate),
			MBPerSec: math.Round(rate*float64(o.Size)/1e4) / 100, Latency: latencyOf(h)}
	}
	if o.pushConns() > 0 {
		rep.Ops["push"] = op(pushReqs, rep.Pushed, &push)
	}
	if o.Workload == Read {
		rep.Ops["read"] = op(readReqs, readsOK, &read) // Messages: successful reads
	}
	if o.popConns() > 0 {
		p := op(popReqs, rep.Popped, &pop)
		p.Empty = empty
		rep.Ops["pop"] = p
		rep.Ops["ack"] = op(ackReqs, rep.Acked, &ack)
	}
	return rep
}

// WriteText writes the report as a short table.
func (rep Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "queen bench %s: %s, %d conns, batch %d, %d B, %d queue(s) x %d partition(s)",
		rep.Workload, strings.Join(rep.URLs, ","), rep.Conns, rep.Batch, rep.Size, rep.Queues, rep.Partitions)
	if rep.Workload == PopAck || rep.Workload == Mixed {
		if rep.Groups > 0 {
			fmt.Fprintf(&b, ", %d group(s)", rep.Groups)
		} else {
			b.WriteString(", queue mode")
		}
	}
	fmt.Fprintf(&b, "\n%.2f s, stopped by %s; pushed %d, popped %d, acked %d\n\n", rep.Seconds, rep.Stop, rep.Pushed, rep.Popped, rep.Acked)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\trequests\tmessages\tmsgs/s\tMB/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	for _, name := range []string{"push", "pop", "ack", "read"} {
		op, ok := rep.Ops[name]
		if !ok {
			continue
		}
		l := op.Latency
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", name, op.Requests, op.Messages,
			op.MsgsPerSec, op.MBPerSec, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	tw.Flush()
	if op, ok := rep.Ops["pop"]; ok && op.Empty > 0 {
		fmt.Fprintf(&b, "empty pops: %d\n", op.Empty)
	}
	if len(rep.Errors) == 0 {
		b.WriteString("errors: none\n")
	} else {
		keys := make([]string, 0, len(rep.Errors))
		for k := range rep.Errors {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("errors:")
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%d", k, rep.Errors[k])
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}
