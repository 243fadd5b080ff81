package engine_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/enginetest"
)

// Helpers shared by the conformance tests (semantics_test.go,
// conformance_test.go, model_test.go). Each one runs one command through the
// harness, which fails the test on a storage error.

// popPart pops from one partition (the single-partition route).
func popPart(h *enginetest.Harness, queue, part, group string, batch int) engine.PopResult {
	h.T.Helper()
	return h.Pop(engine.PopCmd{Queue: queue, Partition: part, Group: group, Batch: batch})
}

// popQueue pops from any partition of a queue (the wildcard route).
func popQueue(h *enginetest.Harness, queue, group string, batch int) engine.PopResult {
	h.T.Helper()
	return h.Pop(engine.PopCmd{Queue: queue, Group: group, Batch: batch})
}

// txns lists the transaction ids of a pop, in delivery order.
func txns(res engine.PopResult) []string {
	out := make([]string, 0, len(res.Messages))
	for _, m := range res.Messages {
		out = append(out, m.TransactionID)
	}
	return out
}

// wantTxns fails unless the pop delivered exactly these transaction ids, in
// order, under a lease (or under none when nothing was delivered).
func wantTxns(t testing.TB, what string, res engine.PopResult, want ...string) {
	t.Helper()
	if got := txns(res); !slices.Equal(got, want) {
		t.Fatalf("%s: delivered %q, want %q", what, got, want)
	}
	if len(want) == 0 && res.LeaseID != (engine.ID{}) {
		t.Fatalf("%s: empty pop carries lease %s", what, engine.FormatID(res.LeaseID))
	}
}

// wantNothing fails unless the pop delivered nothing (HTTP 204).
func wantNothing(t testing.TB, what string, res engine.PopResult) {
	t.Helper()
	wantTxns(t, what, res)
}

// item builds an ack item for the message of res with transaction id txn,
// under res's lease.
func item(t testing.TB, res engine.PopResult, txn, status, errText string) engine.AckItem {
	t.Helper()
	for _, m := range res.Messages {
		if m.TransactionID == txn {
			return engine.AckItem{TransactionID: txn, PartitionID: m.PartitionID, Group: res.Group,
				Status: cursor.ParseStatus(status), Lease: res.LeaseID, Error: errText}
		}
	}
	t.Fatalf("pop holds no message %q (has %q)", txn, txns(res))
	return engine.AckItem{}
}

// leaseless returns it without its lease (docs/decisions.md C10).
func leaseless(it engine.AckItem) engine.AckItem {
	it.Lease = engine.ID{}
	return it
}

// pushN pushes n messages to queue/part in one request, with transaction
// ids prefix0..prefix<n-1>, and fails unless all are queued.
func pushN(h *enginetest.Harness, queue, part, prefix string, n int) []engine.PushResult {
	h.T.Helper()
	items := make([]engine.PushItem, n)
	for i := range items {
		items[i] = engine.PushItem{Queue: queue, Partition: part, TransactionID: fmt.Sprintf("%s%d", prefix, i),
			Payload: fmt.Appendf(nil, `{"n":%d,"p":%q}`, i, part)}
	}
	res := h.Push(items...)
	for i, r := range res {
		if r.Status != engine.Queued {
			h.T.Fatalf("push %s/%s item %d: status %d, err %v", queue, part, i, r.Status, r.Err)
		}
	}
	return res
}

// names returns prefix0..prefix<n-1> for indexes from..to inclusive.
func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// cursorOf returns the group's cursor row on queue/part; ok is false when
// the group has no row there.
func cursorOf(h *enginetest.Harness, queue, part, group string) (engine.CursorInfo, bool) {
	h.T.Helper()
	cs, err := h.Cursors(h.Now, group)
	if err != nil {
		h.T.Fatalf("cursors: %v", err)
	}
	for _, c := range cs {
		if c.Queue == queue && c.Partition == part && c.Group == group {
			return c, true
		}
	}
	return engine.CursorInfo{}, false
}

// mustCursor is cursorOf that fails when there is no row.
func mustCursor(h *enginetest.Harness, queue, part, group string) engine.CursorInfo {
	h.T.Helper()
	c, ok := cursorOf(h, queue, part, group)
	if !ok {
		h.T.Fatalf("no cursor for %s on %s/%s", group, queue, part)
	}
	return c
}

// wantCursor checks a cursor's committed offset, retry counter and whether
// it holds a live lease.
func wantCursor(h *enginetest.Harness, what, queue, part, group string, committed int64, retry uint32, live bool) engine.CursorInfo {
	h.T.Helper()
	c := mustCursor(h, queue, part, group)
	if c.Committed != committed || c.RetryCount != retry || c.LeaseLive != live {
		h.T.Fatalf("%s: cursor %s on %s/%s = committed %d, retryCount %d, leaseLive %v; want %d, %d, %v",
			what, group, queue, part, c.Committed, c.RetryCount, c.LeaseLive, committed, retry, live)
	}
	return c
}

// dlq lists dead letters with a filter and fails on error.
func dlq(h *enginetest.Harness, f engine.DLQFilter) ([]engine.DeadLetter, int) {
	h.T.Helper()
	rows, total, err := h.ListDLQ(f)
	if err != nil {
		h.T.Fatalf("list dlq: %v", err)
	}
	return rows, total
}

// partID returns the id of queue/part.
func partID(h *enginetest.Harness, queue, part string) engine.ID {
	h.T.Helper()
	info, err := h.Queue(queue)
	if err != nil {
		h.T.Fatalf("queue %s: %v", queue, err)
	}
	for _, p := range info.Partitions {
		if p.Name == part {
			return p.ID
		}
	}
	h.T.Fatalf("queue %s has no partition %s", queue, part)
	return engine.ID{}
}

// sec is a duration of n seconds.
func sec(n int) time.Duration { return time.Duration(n) * time.Second }

// us converts a duration to the engine's microseconds.
func us(d time.Duration) int64 { return d.Microseconds() }
