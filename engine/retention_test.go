package engine_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

func sweep(h *enginetest.Harness) engine.SweepResult {
	h.T.Helper()
	return h.Sweep()
}

func popTxns(h *enginetest.Harness, cmd engine.PopCmd) []string {
	h.T.Helper()
	var out []string
	for _, m := range h.Pop(cmd).Messages {
		out = append(out, m.TransactionID)
	}
	return out
}

// docs/semantics.md §16.40: retention deletes an unconsumed message while its DLQ row
// stays listed.
func TestSweep_RetentionSecondsKeepsDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptRetentionEnabled: 1, engine.OptRetentionSeconds: 2, engine.OptRetryLimit: 0})
	h.PushOne("q", "", "dead", `{}`)
	res := h.Pop(engine.PopCmd{Queue: "q", Batch: 1})
	h.Ack(enginetest.AckMessages(res, "failed")...)
	h.PushOne("q", "", "live", `{}`)
	if got := sweep(h); got.Segments != 0 {
		t.Fatalf("sweep inside the window deleted %d segments", got.Segments)
	}
	h.Advance(3 * time.Second)
	got := sweep(h)
	if got.Segments != 2 || got.Messages != 2 {
		t.Fatalf("sweep = %+v, want both segments gone", got)
	}
	if txns := popTxns(h, engine.PopCmd{Queue: "q", Batch: 10}); len(txns) != 0 {
		t.Fatalf("pop after retention = %v, want nothing", txns)
	}
	rows, total, err := h.ListDLQ(engine.DLQFilter{Queue: "q"})
	if err != nil || total != 1 || rows[0].TransactionID != "dead" || string(rows[0].Payload) != `{}` {
		t.Fatalf("DLQ after retention = %+v %d %v", rows, total, err)
	}
}

func TestSweep_RetentionNeedsEnabled(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptRetentionSeconds: 1})
	h.PushOne("q", "", "a", `{}`)
	h.Advance(time.Hour)
	if got := sweep(h); got.Segments != 0 {
		t.Fatalf("retentionSeconds without retentionEnabled deleted %d segments", got.Segments)
	}
}

func TestSweep_CompletedRetentionKeepsWhatALaggingGroupNeeds(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptRetentionEnabled: 1, engine.OptCompletedRetentionSeconds: 10})
	for i := 0; i < 4; i++ {
		h.PushOne("q", "", fmt.Sprintf("m%d", i), `{}`)
	}
	// Fast consumes everything; slow consumes m0 only.
	fast := h.Pop(engine.PopCmd{Queue: "q", Group: "fast", Batch: 10})
	h.Ack(enginetest.AckMessages(fast, "completed")...)
	slow := h.Pop(engine.PopCmd{Queue: "q", Group: "slow", Batch: 1})
	h.Ack(enginetest.AckMessages(slow, "completed")...)
	h.Advance(11 * time.Second)
	got := sweep(h)
	if got.Messages != 1 {
		t.Fatalf("sweep deleted %d messages, want only m0 (below every cursor)", got.Messages)
	}
	if txns := popTxns(h, engine.PopCmd{Queue: "q", Group: "slow", Batch: 10}); fmt.Sprint(txns) != "[m1 m2 m3]" {
		t.Fatalf("lagging group gets %v, want [m1 m2 m3]", txns)
	}
}

func TestSweep_CompletedRetentionWithoutCursorsKeepsEverything(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptRetentionEnabled: 1, engine.OptCompletedRetentionSeconds: 1})
	h.PushOne("q", "", "m", `{}`)
	h.Advance(time.Hour)
	if got := sweep(h); got.Segments != 0 {
		t.Fatalf("completed retention without cursors deleted %d segments", got.Segments)
	}
}

// docs/decisions.md C11: eviction deletes, leased or not, and never dead-letters.
func TestSweep_EvictionDeletesWithoutDeadLettering(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptMaxWaitTimeSeconds: 5})
	h.PushOne("q", "", "old", `{}`)
	leased := h.Pop(engine.PopCmd{Queue: "q", Batch: 1})
	h.Advance(3 * time.Second)
	h.PushOne("q", "", "young", `{}`)
	h.Advance(3 * time.Second)
	got := sweep(h)
	if got.Messages != 1 || got.Evicted != 1 {
		t.Fatalf("sweep = %+v, want the old message evicted", got)
	}
	if _, total, _ := h.ListDLQ(engine.DLQFilter{}); total != 0 {
		t.Fatalf("eviction dead-lettered %d rows", total)
	}
	// The holder of the evicted batch acks it: the ack still resolves (the
	// index outlives the segment) and the young message is next.
	acks := h.Ack(enginetest.AckMessages(leased, "completed")...)
	if !acks[0].Success {
		t.Fatalf("ack of an evicted message = %+v", acks[0])
	}
	if txns := popTxns(h, engine.PopCmd{Queue: "q", Batch: 10}); fmt.Sprint(txns) != "[young]" {
		t.Fatalf("pop after eviction = %v, want [young]", txns)
	}
}

// A cursor left below the oldest retained offset resumes at the next one.
func TestSweep_CursorBehindResumes(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptRetentionEnabled: 1, engine.OptRetentionSeconds: 10})
	h.PushOne("q", "", "a", `{}`)
	first := h.Pop(engine.PopCmd{Queue: "q", Batch: 1})
	h.Ack(enginetest.AckMessages(first, "retry")...)
	h.Advance(6 * time.Second)
	h.PushOne("q", "", "b", `{}`)
	h.Advance(6 * time.Second)
	sweep(h)
	if txns := popTxns(h, engine.PopCmd{Queue: "q", Batch: 10}); fmt.Sprint(txns) != "[b]" {
		t.Fatalf("pop after retention = %v, want [b]", txns)
	}
}

func TestSweep_PurgesTxnIndexAfterWindow(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptDedupWindowSeconds: 60})
	pushed := h.PushOne("q", "", "t1", `{}`)
	h.Advance(10 * time.Minute) // past the window, inside the 900 s floor
	if got := sweep(h); got.TxnPurged != 0 {
		t.Fatalf("purged %d entries before the 900 s floor", got.TxnPurged)
	}
	h.Advance(6 * time.Minute)
	if got := sweep(h); got.TxnPurged != 1 {
		t.Fatalf("purged %d entries, want 1", got.TxnPurged)
	}
	// The message is still retained, but its address no longer resolves.
	if _, err := h.MessageAt(pushed.PartitionID, "t1"); !errors.Is(err, engine.ErrMessageNotFound) {
		t.Fatalf("MessageAt after purge: %v", err)
	}
	if txns := popTxns(h, engine.PopCmd{Queue: "q", Batch: 10}); fmt.Sprint(txns) != "[t1]" {
		t.Fatalf("pop after purge = %v, want [t1]", txns)
	}
	// And the transaction id may be pushed again as a new message.
	if res := h.PushOne("q", "", "t1", `{}`); res.MessageID == pushed.MessageID {
		t.Fatal("re-push after purge was deduplicated")
	}
}

// TestSweep_PurgeKeepsARepushedTxn pushes ids out of key order, pushes one
// of them again once its window has passed (two txn-expiry entries then list
// it, and its index entry names the second message), and checks that the
// purge of the first push leaves that entry and the second purges it.
func TestSweep_PurgeKeepsARepushedTxn(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", map[engine.Option]int64{engine.OptDedupWindowSeconds: 60})
	item := func(txn string) engine.PushItem {
		return engine.PushItem{Queue: "q", TransactionID: txn, Payload: []byte(`{}`)}
	}
	h.Push(item("t3"), item("t1"), item("t2"))
	h.Advance(2 * time.Minute) // past the window: t1 is new again
	again := h.Push(item("t1"), item("t0"))
	if again[0].Status != engine.Queued {
		t.Fatalf("re-push of t1 past its window: status %d", again[0].Status)
	}
	h.Advance(14 * time.Minute) // the first push past the 900 s floor, the second not
	if got := sweep(h); got.TxnPurged != 2 {
		t.Fatalf("first sweep purged %d entries, want 2 (t2, t3)", got.TxnPurged)
	}
	m, err := h.MessageAt(again[0].PartitionID, "t1")
	if err != nil || m.ID != again[0].MessageID {
		t.Fatalf("t1 after the first sweep: %v, %v; want the second push's message", m.ID, err)
	}
	h.Advance(2 * time.Minute)
	if got := sweep(h); got.TxnPurged != 2 {
		t.Fatalf("second sweep purged %d entries, want 2 (t0, t1)", got.TxnPurged)
	}
	for _, txn := range []string{"t0", "t1", "t2", "t3"} {
		if _, err := h.MessageAt(again[0].PartitionID, txn); !errors.Is(err, engine.ErrMessageNotFound) {
			t.Fatalf("%s after both sweeps: %v", txn, err)
		}
	}
}
