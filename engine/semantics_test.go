package engine_test

// Conformance of the engine to its delivery semantics: every worked example
// of docs/semantics.md §6.4 (TestSemantics64_NN_...) and every statement of §16
// that does not need the HTTP layer (TestSemantics16_NN_...), each named after
// its statement.
// The HTTP status codes a statement mentions map to engine results: 201
// "queued" is PushResult.Status == Queued, 204 is a pop that delivers nothing
// and carries no lease, an ack item's JSON flags are AckResult's fields.
//
// docs/semantics.md §16 statements not covered here, and why:
//   - 8, second half (`{}` answers 400): request validation happens in the
//     HTTP decoder; the engine never sees a body without items. The first half
//     (an empty push writes nothing) is covered.
//   - 10, 11 (long polling: a parked pop woken by a push, a 204 after the
//     deadline): waiting and waking live in server/, not in the engine, which
//     answers every pop at once.
//   - 37 (encryption at rest): AES-GCM envelopes are applied by the edge with
//     QUEEN_ENCRYPTION_KEY; the engine stores payload bytes as given.
//   - 40, second half (push maintenance answers 201 "buffered", pop
//     maintenance 204): both switches and the spool live in server/. The first
//     half (retention deletes the message, the DLQ row stays) is covered, with
//     the retention interval played by an explicit Sweep command.
//   - 22 and 23 are covered with the engine's equivalents: the "different
//     leaseId" and "success:false" of an old-lease ack, and Renewed/ExpiresAt
//     of an extend (the HTTP route reports renewed and newExpiresAt from them).

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/enginetest"
)

// O is a set of queue options for Harness.Set.
type O = map[engine.Option]int64

// ---------------------------------------------------------------------------
// docs/semantics.md §6.4 worked examples: one partition P (Default), group G, retryLimit 3 and
// DLQ enabled unless the example says otherwise.

// docs/semantics.md §6.4.1: retryLimit=3, the 4th failed ack dead-letters; m is delivered
// retryLimit+1 times; pop 5 gets the next message.
func TestSemantics64_01_RetryLimit3FourthFailedDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", nil)
	h.PushOne("q", "", "m", `{"m":1}`)
	h.PushOne("q", "", "n", `{"n":1}`)
	deliveries := 0
	for i := 1; i <= 4; i++ {
		res := popPart(h, "q", "Default", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		deliveries++
		if got, want := res.Messages[0].RetryCount, uint32(i-1); got != want {
			t.Fatalf("pop %d: message retryCount %d, want %d", i, got, want)
		}
		r := h.Ack(item(t, res, "m", "failed", fmt.Sprintf("boom %d", i)))[0]
		if !r.Success || !r.LeaseReleased || r.Dropped {
			t.Fatalf("ack %d = %+v", i, r)
		}
		if i < 4 {
			if r.DLQ {
				t.Fatalf("ack %d dead-lettered with budget left", i)
			}
			wantCursor(h, fmt.Sprintf("after ack %d", i), "q", "Default", "G", -1, uint32(i), false)
			continue
		}
		if !r.DLQ {
			t.Fatalf("4th failed ack: dlq=false, want true")
		}
		wantCursor(h, "after dead letter", "q", "Default", "G", 0, 0, false)
	}
	rows, total := dlq(h, engine.DLQFilter{Queue: "q"})
	if total != 1 || len(rows) != 1 {
		t.Fatalf("dlq has %d rows (total %d), want 1", len(rows), total)
	}
	d := rows[0]
	if d.TransactionID != "m" || d.RetryCount != 3 || d.Error != "boom 4" || d.Offset != 0 || d.Group != "G" || string(d.Payload) != `{"m":1}` {
		t.Fatalf("dlq row = %+v", d)
	}
	wantTxns(t, "pop 5", popPart(h, "q", "Default", "G", 1), "n")
	if deliveries != 4 {
		t.Fatalf("m delivered %d times, want retryLimit+1 = 4", deliveries)
	}
}

// docs/semantics.md §6.4.2: retryLimit=0, the first failed ack dead-letters with retryCount 0.
func TestSemantics64_02_RetryLimit0FirstFailedDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 0})
	h.PushOne("q", "", "m", `{}`)
	res := popPart(h, "q", "Default", "G", 1)
	r := h.Ack(item(t, res, "m", "failed", "nope"))[0]
	if !r.Success || !r.DLQ {
		t.Fatalf("ack = %+v, want dlq", r)
	}
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 1 || rows[0].RetryCount != 0 || rows[0].Error != "nope" {
		t.Fatalf("dlq rows = %+v", rows)
	}
	wantNothing(t, "pop after dead letter", popPart(h, "q", "Default", "G", 1))
}

// docs/semantics.md §6.4.3: DLQ disabled, retryLimit=3: the 4th failed gives dropped:true, no
// DLQ row, and m is never seen again.
func TestSemantics64_03_DLQDisabledFourthFailedDrops(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptDeadLetterQueue: 0, engine.OptDLQAfterMaxRetries: 0})
	h.PushOne("q", "", "m", `{}`)
	for i := 1; i <= 4; i++ {
		res := popPart(h, "q", "Default", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		r := h.Ack(item(t, res, "m", "failed", ""))[0]
		if !r.Success || r.DLQ || r.Dropped != (i == 4) {
			t.Fatalf("ack %d = %+v", i, r)
		}
	}
	wantCursor(h, "after drop", "q", "Default", "G", 0, 0, false)
	if _, total := dlq(h, engine.DLQFilter{}); total != 0 {
		t.Fatalf("dlq has %d rows, want 0", total)
	}
	h.Advance(time.Hour)
	wantNothing(t, "pop after drop", popPart(h, "q", "Default", "G", 1))
}

// docs/semantics.md §6.4.4: retry ten times with retryLimit=1: the counter stays 0 and m
// redelivers ten times, never dead-lettered.
func TestSemantics64_04_RetryTenTimesNeverDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 1})
	h.PushOne("q", "", "m", `{}`)
	for i := 1; i <= 10; i++ {
		res := popPart(h, "q", "Default", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		r := h.Ack(item(t, res, "m", "retry", ""))[0]
		if !r.Success || r.DLQ || r.Dropped || !r.LeaseReleased {
			t.Fatalf("retry %d = %+v", i, r)
		}
		wantCursor(h, fmt.Sprintf("after retry %d", i), "q", "Default", "G", -1, 0, false)
	}
	wantTxns(t, "pop 11", popPart(h, "q", "Default", "G", 1), "m")
	if _, total := dlq(h, engine.DLQFilter{}); total != 0 {
		t.Fatalf("dlq has %d rows, want 0", total)
	}
}

// docs/semantics.md §6.4.5: ten lease expiries then one failed, retryLimit=1: counter 0 < 1,
// so m redelivers; a second failed dead-letters it.
func TestSemantics64_05_LeaseExpiryNeverChargesBudget(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 1, engine.OptLeaseTime: 5})
	h.PushOne("q", "", "m", `{}`)
	var last engine.PopResult
	for i := 1; i <= 10; i++ {
		res := popPart(h, "q", "Default", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		if res.LeaseID == last.LeaseID {
			t.Fatalf("pop %d reused lease %s", i, engine.FormatID(res.LeaseID))
		}
		if res.Messages[0].Attempt != uint32(i) || res.Messages[0].RetryCount != 0 {
			t.Fatalf("pop %d: attempt %d, retryCount %d", i, res.Messages[0].Attempt, res.Messages[0].RetryCount)
		}
		last = res
		h.Advance(sec(6))
		wantCursor(h, fmt.Sprintf("after expiry %d", i), "q", "Default", "G", -1, 0, false)
	}
	res := popPart(h, "q", "Default", "G", 1)
	if r := h.Ack(item(t, res, "m", "failed", "first"))[0]; !r.Success || r.DLQ {
		t.Fatalf("first failed = %+v, want a redelivery", r)
	}
	res = popPart(h, "q", "Default", "G", 1)
	wantTxns(t, "after first failed", res, "m")
	if r := h.Ack(item(t, res, "m", "failed", "second"))[0]; !r.Success || !r.DLQ {
		t.Fatalf("second failed = %+v, want dlq", r)
	}
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 1 || rows[0].RetryCount != 1 {
		t.Fatalf("dlq rows = %+v", rows)
	}
}

// ackBatch acks the messages of res named by offsets (transaction ids
// prefix<offset>) with the given statuses, in one call under res's lease.
func ackBatch(t *testing.T, h *enginetest.Harness, res engine.PopResult, prefix string, statuses map[int]string) []engine.AckResult {
	t.Helper()
	offs := make([]int, 0, len(statuses))
	for off := range statuses {
		offs = append(offs, off)
	}
	slices.Sort(offs)
	items := make([]engine.AckItem, 0, len(offs))
	for _, off := range offs {
		items = append(items, item(t, res, fmt.Sprintf("%s%d", prefix, off), statuses[off], ""))
	}
	return h.Ack(items...)
}

func statusRange(m map[int]string, from, to int, status string) map[int]string {
	if m == nil {
		m = map[int]string{}
	}
	for i := from; i <= to; i++ {
		m[i] = status
	}
	return m
}

// docs/semantics.md §6.4.6: batch 0..9, one call with 0..4 completed, 5 failed, 6..9
// completed: cursor 4, counter +1, lease released, next pop starts at 5.
func TestSemantics64_06_MixedBatchClampsAtFailure(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popPart(h, "q", "Default", "G", 10)
	wantTxns(t, "pop", res, names("m", 0, 9)...)
	st := statusRange(nil, 0, 4, "completed")
	st[5] = "failed"
	statusRange(st, 6, 9, "completed")
	for i, r := range ackBatch(t, h, res, "m", st) {
		if !r.Success || !r.LeaseReleased {
			t.Fatalf("item %d = %+v", i, r)
		}
	}
	wantCursor(h, "after ack", "q", "Default", "G", 4, 1, false)
	wantTxns(t, "redelivery", popPart(h, "q", "Default", "G", 10), names("m", 5, 9)...)
}

// docs/semantics.md §6.4.7: only 5 failed and 9 completed, cursor at -1: no completed offset
// lies below 5, so the cursor stays and 0..9 all redeliver.
func TestSemantics64_07_LaterSuccessNeverSkipsFailure(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popPart(h, "q", "Default", "G", 10)
	ackBatch(t, h, res, "m", map[int]string{5: "failed", 9: "completed"})
	wantCursor(h, "after ack", "q", "Default", "G", -1, 1, false)
	wantTxns(t, "redelivery", popPart(h, "q", "Default", "G", 10), names("m", 0, 9)...)
}

// docs/semantics.md §6.4.8: ack only offset 9 completed: cursor 9, batch complete, lease
// released, counter reset.
func TestSemantics64_08_AckLastCompletesBatchAndResetsCounter(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popPart(h, "q", "Default", "G", 10)
	ackBatch(t, h, res, "m", map[int]string{0: "failed"})
	wantCursor(h, "after failed", "q", "Default", "G", -1, 1, false)
	res = popPart(h, "q", "Default", "G", 10)
	r := ackBatch(t, h, res, "m", map[int]string{9: "completed"})[0]
	if !r.Success || !r.LeaseReleased {
		t.Fatalf("ack = %+v", r)
	}
	wantCursor(h, "after completing 9", "q", "Default", "G", 9, 0, false)
	wantNothing(t, "pop after completion", popPart(h, "q", "Default", "G", 10))
}

// docs/semantics.md §6.4.9: partial ack of 0..4 keeps the lease (another worker gets 204);
// acking 5..9 later completes the batch and releases it.
func TestSemantics64_09_PartialAckKeepsLease(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popPart(h, "q", "Default", "G", 10)
	for i, r := range ackBatch(t, h, res, "m", statusRange(nil, 0, 4, "completed")) {
		if !r.Success || r.LeaseReleased {
			t.Fatalf("partial item %d = %+v", i, r)
		}
	}
	wantCursor(h, "after partial", "q", "Default", "G", 4, 0, true)
	wantNothing(t, "other worker, partition route", popPart(h, "q", "Default", "G", 10))
	wantNothing(t, "other worker, wildcard route", popQueue(h, "q", "G", 10))
	for i, r := range ackBatch(t, h, res, "m", statusRange(nil, 5, 9, "completed")) {
		if !r.Success || !r.LeaseReleased {
			t.Fatalf("completing item %d = %+v", i, r)
		}
	}
	wantCursor(h, "after completion", "q", "Default", "G", 9, 0, false)
}

// docs/semantics.md §6.4.10: 0..2 completed and 3 dlq: cursor 2, offset 3 filed with the
// current counter, cursor 3, lease released, 4..9 redeliver.
func TestSemantics64_10_ForcedDLQInBatch(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popPart(h, "q", "Default", "G", 10)
	st := statusRange(nil, 0, 2, "completed")
	st[3] = "dlq"
	got := ackBatch(t, h, res, "m", st)
	for i, r := range got {
		if !r.Success || !r.LeaseReleased || r.DLQ != (i == 3) {
			t.Fatalf("item %d = %+v", i, r)
		}
	}
	wantCursor(h, "after dlq", "q", "Default", "G", 3, 0, false)
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q", Group: "G"})
	if len(rows) != 1 || rows[0].Offset != 3 || rows[0].TransactionID != "m3" || rows[0].RetryCount != 0 {
		t.Fatalf("dlq rows = %+v", rows)
	}
	wantTxns(t, "next pop", popPart(h, "q", "Default", "G", 10), names("m", 4, 9)...)
}

// docs/semantics.md §6.4.11: the counter is shared across messages: offset 5 is dead-lettered
// after only two failures of its own.
func TestSemantics64_11_CounterSharedAcrossMessages(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popPart(h, "q", "Default", "G", 10)
	ackBatch(t, h, res, "m", map[int]string{0: "completed", 1: "completed", 2: "failed"})
	wantCursor(h, "offset 2 fails", "q", "Default", "G", 1, 1, false)

	res = popPart(h, "q", "Default", "G", 10)
	wantTxns(t, "redelivery from 2", res, names("m", 2, 9)...)
	ackBatch(t, h, res, "m", map[int]string{2: "failed"})
	wantCursor(h, "offset 2 fails again", "q", "Default", "G", 1, 2, false)

	res = popPart(h, "q", "Default", "G", 10)
	st := statusRange(nil, 2, 4, "completed")
	st[5] = "failed"
	ackBatch(t, h, res, "m", st)
	wantCursor(h, "2..4 complete, 5 fails", "q", "Default", "G", 4, 3, false)

	res = popPart(h, "q", "Default", "G", 10)
	wantTxns(t, "redelivery from 5", res, names("m", 5, 9)...)
	r := ackBatch(t, h, res, "m", map[int]string{5: "failed"})[0]
	if !r.DLQ {
		t.Fatalf("offset 5's second failure = %+v, want dlq (budget exhausted by offset 2)", r)
	}
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 1 || rows[0].Offset != 5 || rows[0].RetryCount != 3 {
		t.Fatalf("dlq rows = %+v", rows)
	}
	wantCursor(h, "after dead letter", "q", "Default", "G", 5, 0, false)
}

// docs/semantics.md §6.4.12: after the cursor passed offset 4, re-acking 4 completed is
// success+noop and re-acking it failed is success:false ("already
// committed"); neither moves anything.
func TestSemantics64_12_StaleAcks(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	first := popPart(h, "q", "Default", "G", 5)
	h.Ack(enginetest.AckMessages(first, "completed")...)
	second := popPart(h, "q", "Default", "G", 5)
	wantTxns(t, "second batch", second, names("m", 5, 9)...)
	before := wantCursor(h, "before stale acks", "q", "Default", "G", 4, 0, true)

	stale := item(t, first, "m4", "completed", "")
	for _, c := range []struct {
		name string
		it   engine.AckItem
	}{
		{"lease-less", leaseless(stale)},
		{"under the live lease", engine.AckItem{TransactionID: "m4", PartitionID: stale.PartitionID, Group: "G", Lease: second.LeaseID}},
	} {
		it := c.it
		it.Status = cursor.Completed
		if r := h.Ack(it)[0]; !r.Success || !r.Noop || r.LeaseReleased {
			t.Fatalf("%s completed re-ack = %+v, want success noop", c.name, r)
		}
		it.Status = cursor.Failed
		r := h.Ack(it)[0]
		if r.Success || r.Error != "already committed: the cursor moved past this message before this ack" || r.LeaseReleased {
			t.Fatalf("%s failed re-ack = %+v, want already committed", c.name, r)
		}
	}
	after := mustCursor(h, "q", "Default", "G")
	if after.CursorRecord != before.CursorRecord {
		t.Fatalf("stale acks changed the cursor: %+v -> %+v", before.CursorRecord, after.CursorRecord)
	}
}

// docs/semantics.md §6.4.13: a wrong leaseId gives success:false, "invalid or expired lease",
// and nothing changes.
func TestSemantics64_13_WrongLeaseRejected(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	res := popPart(h, "q", "Default", "G", 3)
	other := popPart(h, "q", "Default", "G2", 3) // a live lease of another group
	before := mustCursor(h, "q", "Default", "G")
	for _, lease := range []engine.ID{other.LeaseID, h.Stamp().Seed} {
		for _, status := range []string{"completed", "failed", "dlq"} {
			it := item(t, res, "m2", status, "")
			it.Lease = lease
			r := h.Ack(it)[0]
			if r.Success || r.Error != "invalid or expired lease" || r.DLQ || r.LeaseReleased {
				t.Fatalf("%s ack with a foreign lease = %+v", status, r)
			}
		}
	}
	if after := mustCursor(h, "q", "Default", "G"); after.CursorRecord != before.CursorRecord {
		t.Fatalf("rejected acks changed the cursor: %+v -> %+v", before.CursorRecord, after.CursorRecord)
	}
	if _, total := dlq(h, engine.DLQFilter{}); total != 0 {
		t.Fatalf("rejected dlq ack filed %d rows", total)
	}
}

// ---------------------------------------------------------------------------
// docs/semantics.md §16 conformance statements.

// docs/semantics.md §16.1: a push with no partition to an unknown queue is queued, and a pop
// on partition Default returns it with partition "Default".
func TestSemantics16_01_PushWithoutPartitionGoesToDefault(t *testing.T) {
	h := enginetest.MustOpen(t)
	r := h.Push(engine.PushItem{Queue: "q", Payload: []byte(`{"a":1}`)})[0]
	if r.Status != engine.Queued || r.Partition != "Default" || r.Queue != "q" {
		t.Fatalf("push = %+v", r)
	}
	res := popPart(h, "q", "Default", "", 1)
	if len(res.Messages) != 1 || res.Messages[0].Partition != "Default" || string(res.Messages[0].Payload) != `{"a":1}` {
		t.Fatalf("pop = %+v", res)
	}
	cfg, _ := h.QueueConfig("q")
	if got := cfg.Get(engine.OptLeaseTime); got != 60 {
		t.Fatalf("implicitly created queue leaseTime = %d, want 60 (§5)", got)
	}
}

// docs/semantics.md §16.2: an item pushed without a transactionId pops with a non-empty one
// equal to the push result's.
func TestSemantics16_02_MintedTransactionID(t *testing.T) {
	h := enginetest.MustOpen(t)
	r := h.Push(engine.PushItem{Queue: "q", Payload: []byte(`{}`)})[0]
	if r.TransactionID == "" || r.TransactionID != engine.FormatID(r.MessageID) {
		t.Fatalf("push = %+v, want transaction id = message id", r)
	}
	res := popPart(h, "q", "Default", "", 1)
	if len(res.Messages) != 1 || res.Messages[0].TransactionID != r.TransactionID || res.Messages[0].ID != r.MessageID {
		t.Fatalf("pop = %+v, push = %+v", res.Messages, r)
	}
}

// docs/semantics.md §16.3: T pushed to q/p1 again is a duplicate carrying the original's
// message id, and a pop with batch=10 returns exactly one message.
func TestSemantics16_03_DuplicateAcrossRequests(t *testing.T) {
	h := enginetest.MustOpen(t)
	orig := h.PushOne("q", "p1", "T", `{"v":1}`)
	h.Advance(sec(1))
	dup := h.Push(engine.PushItem{Queue: "q", Partition: "p1", TransactionID: "T", Payload: []byte(`{"v":2}`)})[0]
	if dup.Status != engine.Duplicate || dup.MessageID != orig.MessageID {
		t.Fatalf("second push = %+v, want duplicate of %s", dup, engine.FormatID(orig.MessageID))
	}
	res := popPart(h, "q", "p1", "", 10)
	wantTxns(t, "pop", res, "T")
	if string(res.Messages[0].Payload) != `{"v":1}` {
		t.Fatalf("payload = %s, want the original", res.Messages[0].Payload)
	}
}

// docs/semantics.md §16.4: dedup is partition-scoped (and queue-scoped).
func TestSemantics16_04_DedupIsPartitionScoped(t *testing.T) {
	h := enginetest.MustOpen(t)
	a := h.PushOne("q", "p1", "T", `{}`)
	b := h.PushOne("q", "p2", "T", `{}`)
	c := h.PushOne("q2", "p1", "T", `{}`)
	if a.MessageID == b.MessageID || a.MessageID == c.MessageID || a.PartitionID == b.PartitionID {
		t.Fatalf("pushes share ids: %+v %+v %+v", a, b, c)
	}
}

// docs/semantics.md §16.5: T twice in one request: item 0 queued, item 1 duplicate with the
// same message id, one message stored.
func TestSemantics16_05_DuplicateWithinRequest(t *testing.T) {
	h := enginetest.MustOpen(t)
	res := h.Push(
		engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`{"v":1}`)},
		engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`{"v":2}`)},
	)
	if res[0].Status != engine.Queued || res[1].Status != engine.Duplicate || res[1].MessageID != res[0].MessageID {
		t.Fatalf("push = %+v", res)
	}
	info, _ := h.Queue("q")
	if next := info.Partitions[0].Next; next != 1 {
		t.Fatalf("partition holds %d messages, want 1", next)
	}
	wantTxns(t, "pop", popPart(h, "q", "Default", "", 10), "T")
}

// docs/semantics.md §16.6: dedupWindowSeconds:0, T pushed in two requests: both queued, two
// messages delivered.
func TestSemantics16_06_DedupWindowZeroDisablesProbe(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptDedupWindowSeconds: 0})
	a := h.PushOne("q", "", "T", `{"v":1}`)
	b := h.PushOne("q", "", "T", `{"v":2}`)
	if a.MessageID == b.MessageID {
		t.Fatalf("both pushes got message id %s", engine.FormatID(a.MessageID))
	}
	res := popPart(h, "q", "Default", "", 10)
	wantTxns(t, "pop", res, "T", "T")
	if res.Messages[0].ID != a.MessageID || res.Messages[1].ID != b.MessageID {
		t.Fatalf("delivered %v", res.Messages)
	}
}

// docs/semantics.md §16.7: A, B, C pushed in one request pop in order.
func TestSemantics16_07_OrderWithinRequest(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Push(
		engine.PushItem{Queue: "q", TransactionID: "A", Payload: []byte(`1`)},
		engine.PushItem{Queue: "q", TransactionID: "B", Payload: []byte(`2`)},
		engine.PushItem{Queue: "q", TransactionID: "C", Payload: []byte(`3`)},
	)
	wantTxns(t, "pop", popPart(h, "q", "Default", "", 10), "A", "B", "C")
}

// docs/semantics.md §16.8 (first half): an empty push answers nothing and writes nothing.
func TestSemantics16_08_EmptyPushWritesNothing(t *testing.T) {
	h := enginetest.MustOpen(t)
	before := h.Dump()
	if res := h.Push(); len(res) != 0 {
		t.Fatalf("empty push answered %+v", res)
	}
	if diff := enginetest.DiffDumps(before, h.Dump()); diff != "" {
		t.Fatalf("empty push changed the store: %s", diff)
	}
}

// docs/semantics.md §16.9: a pop on an empty queue (or an unknown one, or an unknown
// partition) delivers nothing.
func TestSemantics16_09_EmptyQueuePopsNothing(t *testing.T) {
	h := enginetest.MustOpen(t)
	wantNothing(t, "unknown queue", popQueue(h, "nope", "", 10))
	wantNothing(t, "unknown queue, partition route", popPart(h, "nope", "Default", "", 10))
	h.Set("q", nil)
	wantNothing(t, "empty queue", popQueue(h, "q", "", 10))
	wantNothing(t, "empty queue, named group", popQueue(h, "q", "G", 10))
	wantNothing(t, "unknown partition", popPart(h, "q", "nope", "", 10))
}

// docs/semantics.md §16.12: one partition with 5 messages leased by C1
// (batch=2): C2's pop on the same group gets nothing, by either route.
func TestSemantics16_12_LeasedPartitionBlocksOtherConsumer(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 5)
	c1 := popPart(h, "q", "Default", "G", 2)
	wantTxns(t, "C1", c1, "m0", "m1")
	wantNothing(t, "C2 partition route", popPart(h, "q", "Default", "G", 2))
	wantNothing(t, "C2 wildcard route", popQueue(h, "q", "G", 2))
	// Other groups are unaffected (docs/semantics.md §4.3).
	wantTxns(t, "other group", popPart(h, "q", "Default", "G2", 2), "m0", "m1")
}

// docs/semantics.md §16.13: two groups with default subscriptions both receive one message.
func TestSemantics16_13_FanOut(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m", `{}`)
	wantTxns(t, "G1", popQueue(h, "q", "G1", 10), "m")
	wantTxns(t, "G2", popQueue(h, "q", "G2", 10), "m")
}

// docs/semantics.md §16.14: a group joining with subscriptionMode=new gets nothing of the
// backlog, and a message pushed afterwards is delivered.
func TestSemantics16_14_SubscriptionNewSkipsBacklog(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "old", 3)
	h.Advance(sec(1))
	wantNothing(t, "join", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}))
	h.Advance(sec(1))
	h.PushOne("q", "", "new", `{}`)
	wantTxns(t, "after push", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}), "new")
}

// docs/semantics.md §16.15: queue mode ignores subscriptionMode=new.
func TestSemantics16_15_QueueModeIgnoresNew(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	wantTxns(t, "wildcard", h.Pop(engine.PopCmd{Queue: "q", Batch: 10, SubscriptionMode: engine.SubNew}), "m0", "m1", "m2")
	h2 := enginetest.MustOpen(t)
	pushN(h2, "q", "", "m", 3)
	wantTxns(t, "partition route", h2.Pop(engine.PopCmd{Queue: "q", Partition: "Default", Batch: 10, SubscriptionMode: engine.SubNew}), "m0", "m1", "m2")
}

// docs/semantics.md §16.16: subscriptionFrom=ts with m1 before ts and m2 after: a new group
// receives only m2.
func TestSemantics16_16_SubscriptionFromTimestamp(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m1", `{}`)
	h.Advance(sec(10))
	ts := h.Now
	h.Advance(sec(10))
	h.PushOne("q", "", "m2", `{}`)
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubFrom, SubscriptionFrom: ts})
	wantTxns(t, "pop", res, "m2")
}

// docs/semantics.md §16.17: 10 messages, batch=3 returns the first 3 in push order.
func TestSemantics16_17_BatchReturnsHeadInOrder(t *testing.T) {
	h := enginetest.MustOpen(t)
	for i := range 10 {
		h.PushOne("q", "", fmt.Sprintf("m%d", i), `{}`)
	}
	wantTxns(t, "pop", popQueue(h, "q", "G", 3), "m0", "m1", "m2")
}

// docs/semantics.md §16.18: 5 partitions each with 1 message, partitions=3 batch=10: up to 3
// messages from distinct partitions, one leaseId, at most 3 claims.
func TestSemantics16_18_MultiPartitionPopSharesLease(t *testing.T) {
	h := enginetest.MustOpen(t)
	for i := range 5 {
		h.PushOne("q", fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i), `{}`)
	}
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 3})
	if len(res.Messages) != 3 || len(res.Claims) != 3 {
		t.Fatalf("pop delivered %d messages over %d claims, want 3 and 3", len(res.Messages), len(res.Claims))
	}
	seen := map[engine.ID]bool{}
	for _, m := range res.Messages {
		if seen[m.PartitionID] {
			t.Fatalf("two messages from partition %s", m.Partition)
		}
		seen[m.PartitionID] = true
	}
	for _, c := range res.Claims {
		cur := mustCursor(h, "q", c.Partition, "G")
		if cur.Lease != res.LeaseID || !cur.LeaseLive {
			t.Fatalf("claimed partition %s holds lease %s, want %s", c.Partition, engine.FormatID(cur.Lease), engine.FormatID(res.LeaseID))
		}
	}
	// The other two partitions are still free for another worker.
	rest := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 3})
	if len(rest.Messages) != 2 || rest.LeaseID == res.LeaseID {
		t.Fatalf("second pop = %d messages under lease %s", len(rest.Messages), engine.FormatID(rest.LeaseID))
	}
}

// docs/semantics.md §16.19: autoAck: leaseId "", and an immediate second pop does not return
// the same messages.
func TestSemantics16_19_AutoAck(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 2, AutoAck: true})
	wantTxns(t, "autoAck pop", res, "m0", "m1")
	if res.LeaseID != (engine.ID{}) || res.Claims[0].LeaseExpiresAt != 0 {
		t.Fatalf("autoAck pop carries lease %s, expiry %d", engine.FormatID(res.LeaseID), res.Claims[0].LeaseExpiresAt)
	}
	wantTxns(t, "second autoAck pop", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 2, AutoAck: true}), "m2")
	h.Advance(time.Hour)
	wantNothing(t, "pop after an hour", popQueue(h, "q", "G", 10))
	wantCursor(h, "after autoAck", "q", "Default", "G", 2, 0, false)
}

// docs/semantics.md §16.20: a leased batch of 3 whose last message is acked completed is done:
// an immediate pop gets nothing, or newer messages, never those 3.
func TestSemantics16_20_AckLastCompletesBatch(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	res := popQueue(h, "q", "G", 3)
	if r := h.Ack(item(t, res, "m2", "completed", ""))[0]; !r.Success || !r.LeaseReleased {
		t.Fatalf("ack = %+v", r)
	}
	wantNothing(t, "pop after ack", popQueue(h, "q", "G", 3))
	h.PushOne("q", "", "newer", `{}`)
	wantTxns(t, "pop after push", popQueue(h, "q", "G", 3), "newer")
}

// docs/semantics.md §16.21: a leased batch of 4 with only message 1 acked: another consumer
// gets nothing (lease kept); after expiry messages 2..4 redeliver.
func TestSemantics16_21_PartialAckThenExpiryRedeliversTail(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 4)
	res := popQueue(h, "q", "G", 4)
	if r := h.Ack(item(t, res, "m0", "completed", ""))[0]; !r.Success || r.LeaseReleased {
		t.Fatalf("ack = %+v", r)
	}
	wantNothing(t, "other consumer", popQueue(h, "q", "G", 4))
	h.Advance(sec(61)) // implicit queue: leaseTime 60
	again := popQueue(h, "q", "G", 4)
	wantTxns(t, "after expiry", again, "m1", "m2", "m3")
	if again.LeaseID == res.LeaseID {
		t.Fatalf("redelivery reused the expired lease")
	}
}

// docs/semantics.md §16.22: leaseSeconds=2, no ack, pop again after 3 s: the same messages
// under a different leaseId; an ack with the old leaseId fails.
func TestSemantics16_22_LeaseExpiryRedeliversUnderNewLease(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 2)
	first := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, LeaseSeconds: 2})
	h.Advance(sec(3))
	second := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, LeaseSeconds: 2})
	wantTxns(t, "redelivery", second, txns(first)...)
	if second.LeaseID == first.LeaseID || second.LeaseID == (engine.ID{}) {
		t.Fatalf("redelivery lease %s, first %s", engine.FormatID(second.LeaseID), engine.FormatID(first.LeaseID))
	}
	if r := h.Ack(item(t, first, "m1", "completed", ""))[0]; r.Success || r.Error != "invalid or expired lease" {
		t.Fatalf("ack with the old lease = %+v", r)
	}
	wantCursor(h, "after old-lease ack", "q", "Default", "G", -1, 0, true)
}

// docs/semantics.md §16.23: extending a live lease succeeds with a later expiry; the same call
// after expiry renews nothing.
func TestSemantics16_23_ExtendLease(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m", `{}`)
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 1, LeaseSeconds: 10})
	old := res.Claims[0].LeaseExpiresAt
	h.Advance(sec(5))
	ext := h.Extend(res.LeaseID, 30)
	if ext.Renewed != 1 || ext.ExpiresAt != h.Now+us(sec(30)) || ext.ExpiresAt <= old {
		t.Fatalf("extend = %+v, old expiry %d, now %d", ext, old, h.Now)
	}
	h.Advance(sec(31))
	if ext := h.Extend(res.LeaseID, 30); ext.Renewed != 0 || ext.ExpiresAt != 0 {
		t.Fatalf("extend after expiry = %+v, want renewed 0", ext)
	}
	wantTxns(t, "pop after expiry", popQueue(h, "q", "G", 1), "m")
}

// docs/semantics.md §16.24: retryLimit=3, four failed acks: the 4th item has dlq:true, the DLQ
// of q lists it with retryCount 3 and the nack's error, and the next pop
// gets nothing.
func TestSemantics16_24_FourthFailedDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 3})
	h.PushOne("q", "", "m", `{"x":1}`)
	for i := 1; i <= 4; i++ {
		res := popQueue(h, "q", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		if r := h.Ack(item(t, res, "m", "failed", "handler threw"))[0]; r.DLQ != (i == 4) || !r.Success {
			t.Fatalf("ack %d = %+v", i, r)
		}
	}
	rows, total := dlq(h, engine.DLQFilter{Queue: "q"})
	if total != 1 || rows[0].TransactionID != "m" || rows[0].RetryCount != 3 || rows[0].Error != "handler threw" {
		t.Fatalf("dlq = %+v (total %d)", rows, total)
	}
	wantNothing(t, "next pop", popQueue(h, "q", "G", 1))
}

// docs/semantics.md §16.25: retryLimit=1, five retry acks: redelivered each time, DLQ empty.
func TestSemantics16_25_RetryNeverChargesBudget(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 1})
	h.PushOne("q", "", "m", `{}`)
	for i := 1; i <= 5; i++ {
		res := popQueue(h, "q", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		if r := h.Ack(item(t, res, "m", "retry", ""))[0]; !r.Success || r.DLQ {
			t.Fatalf("retry %d = %+v", i, r)
		}
	}
	wantTxns(t, "pop 6", popQueue(h, "q", "G", 1), "m")
	if _, total := dlq(h, engine.DLQFilter{}); total != 0 {
		t.Fatalf("dlq has %d rows", total)
	}
}

// docs/semantics.md §16.26: a dlq ack with error "bad" dead-letters at once with retryCount 0,
// and the next message is delivered.
func TestSemantics16_26_DLQAckDeadLettersAtOnce(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 2)
	res := popQueue(h, "q", "G", 1)
	if r := h.Ack(item(t, res, "m0", "dlq", "bad"))[0]; !r.Success || !r.DLQ {
		t.Fatalf("dlq ack = %+v", r)
	}
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 1 || rows[0].RetryCount != 0 || rows[0].Error != "bad" || rows[0].TransactionID != "m0" {
		t.Fatalf("dlq = %+v", rows)
	}
	wantTxns(t, "next pop", popQueue(h, "q", "G", 1), "m1")
}

// docs/semantics.md §16.27: deadLetterQueue:false, dlqAfterMaxRetries:false, retryLimit:1: the
// second failed ack has dropped:true, the DLQ is empty, and the message is
// never redelivered.
func TestSemantics16_27_DropWhenDLQDisabled(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptDeadLetterQueue: 0, engine.OptDLQAfterMaxRetries: 0, engine.OptRetryLimit: 1})
	h.PushOne("q", "", "m", `{}`)
	for i := 1; i <= 2; i++ {
		res := popQueue(h, "q", "G", 1)
		wantTxns(t, fmt.Sprintf("pop %d", i), res, "m")
		if r := h.Ack(item(t, res, "m", "failed", ""))[0]; r.Dropped != (i == 2) || r.DLQ {
			t.Fatalf("ack %d = %+v", i, r)
		}
	}
	if _, total := dlq(h, engine.DLQFilter{}); total != 0 {
		t.Fatalf("dlq has %d rows", total)
	}
	h.Advance(time.Hour)
	wantNothing(t, "pop after drop", popQueue(h, "q", "G", 1))
}

// docs/semantics.md §16.28: batch 0..9 acked 0–4 completed, 5 failed, 6–9 completed in one
// call: the next pop starts with 5, and 0–4 are never redelivered.
func TestSemantics16_28_BatchAckClampsAtFailure(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 10)
	res := popQueue(h, "q", "G", 10)
	st := statusRange(nil, 0, 4, "completed")
	st[5] = "failed"
	statusRange(st, 6, 9, "completed")
	ackBatch(t, h, res, "m", st)
	next := popQueue(h, "q", "G", 10)
	wantTxns(t, "next pop", next, names("m", 5, 9)...)
	h.Advance(time.Hour) // let that lease expire too
	wantTxns(t, "after expiry", popQueue(h, "q", "G", 10), names("m", 5, 9)...)
}

// docs/semantics.md §16.29: an unknown status counts as failed: with retryLimit=1 the first
// "bogus" redelivers and the second dead-letters.
func TestSemantics16_29_UnknownStatusIsFailed(t *testing.T) {
	if got := cursor.ParseStatus("bogus"); got != cursor.Failed {
		t.Fatalf("ParseStatus(bogus) = %v, want failed", got)
	}
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 1})
	h.PushOne("q", "", "m", `{}`)
	res := popQueue(h, "q", "G", 1)
	if r := h.Ack(item(t, res, "m", "bogus", ""))[0]; r.DLQ || !r.Success {
		t.Fatalf("first bogus = %+v", r)
	}
	res = popQueue(h, "q", "G", 1)
	wantTxns(t, "redelivery", res, "m")
	if r := h.Ack(item(t, res, "m", "bogus", ""))[0]; !r.DLQ {
		t.Fatalf("second bogus = %+v, want dlq", r)
	}
}

// docs/semantics.md §16.30: retryLimit=1, a lease left to expire three times, then one failed
// ack: redelivered, not dead-lettered.
func TestSemantics16_30_ExpiryNeverChargesBudget(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryLimit: 1})
	h.PushOne("q", "", "m", `{}`)
	for range 3 {
		wantTxns(t, "pop", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 1, LeaseSeconds: 2}), "m")
		h.Advance(sec(3))
	}
	res := popQueue(h, "q", "G", 1)
	if r := h.Ack(item(t, res, "m", "failed", ""))[0]; r.DLQ || !r.Success {
		t.Fatalf("failed after expiries = %+v", r)
	}
	wantTxns(t, "redelivery", popQueue(h, "q", "G", 1), "m")
}

// docs/semantics.md §16.31: re-acking a committed message completed is success+noop; failed
// is success:false.
func TestSemantics16_31_ReackCommitted(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m", `{}`)
	res := popQueue(h, "q", "G", 1)
	h.Ack(item(t, res, "m", "completed", ""))
	it := leaseless(item(t, res, "m", "completed", ""))
	if r := h.Ack(it)[0]; !r.Success || !r.Noop {
		t.Fatalf("completed re-ack = %+v", r)
	}
	it.Status = cursor.Failed
	if r := h.Ack(it)[0]; r.Success || r.Noop {
		t.Fatalf("failed re-ack = %+v", r)
	}
}

// docs/semantics.md §16.32: an ack carrying another live lease on the same partition fails
// and the cursor does not move.
func TestSemantics16_32_ForeignLeaseRejected(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m", `{}`)
	mine := popQueue(h, "q", "G", 1)
	theirs := popQueue(h, "q", "G2", 1)
	it := item(t, mine, "m", "completed", "")
	it.Lease = theirs.LeaseID
	if r := h.Ack(it)[0]; r.Success || r.Error == "" {
		t.Fatalf("ack = %+v", r)
	}
	wantCursor(h, "after rejected ack", "q", "Default", "G", -1, 0, true)
}

// docs/semantics.md §16.33: seek toEnd makes the next pop empty; seek to a timestamp before
// m1 redelivers m1 onward.
func TestSemantics16_33_Seek(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Advance(sec(1))
	before := h.Now - 1
	h.PushOne("q", "", "m1", `{}`)
	h.Advance(sec(1))
	h.PushOne("q", "", "m2", `{}`)
	if n, err := h.Seek(engine.SeekCmd{Group: "G", Queue: "q", ToEnd: true}); err != nil || n != 1 {
		t.Fatalf("seek toEnd = %d, %v", n, err)
	}
	wantNothing(t, "after toEnd", popQueue(h, "q", "G", 10))
	if _, err := h.Seek(engine.SeekCmd{Group: "G", Queue: "q", Timestamp: before}); err != nil {
		t.Fatal(err)
	}
	wantTxns(t, "after timestamp seek", popQueue(h, "q", "G", 10), "m1", "m2")
}

// docs/semantics.md §16.34: deleting a group that consumed everything makes its next pop
// (default mode) redeliver the backlog from the start.
func TestSemantics16_34_DeleteGroupReconsumes(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	res := popQueue(h, "q", "G", 10)
	h.Ack(enginetest.AckMessages(res, "completed")...)
	wantNothing(t, "consumed", popQueue(h, "q", "G", 10))
	if n, meta := h.DeleteGroup("G", "", true); n != 1 || !meta {
		t.Fatalf("delete group = %d rows, metadata %v", n, meta)
	}
	wantTxns(t, "after delete", popQueue(h, "q", "G", 10), "m0", "m1", "m2")
}

// docs/semantics.md §16.35: a transaction acking an input leased from q1 and pushing out to
// q2 succeeds; the input is never redelivered and out can be popped.
func TestSemantics16_35_TransactionAckAndPush(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q1", "", "in", `{}`)
	res := popQueue(h, "q1", "G", 1)
	ack := item(t, res, "in", "completed", "")
	tx := h.Transaction([]engine.TxOp{
		{Ack: &ack},
		{Push: &engine.PushItem{Queue: "q2", TransactionID: "out", Payload: []byte(`{"out":1}`)}},
	})
	if !tx.Success || len(tx.Acks) != 1 || !tx.Acks[0].Success || len(tx.Pushes) != 1 || tx.Pushes[0].Status != engine.Queued {
		t.Fatalf("transaction = %+v", tx)
	}
	h.Advance(time.Hour)
	wantNothing(t, "input after expiry", popQueue(h, "q1", "G", 1))
	wantTxns(t, "output", popQueue(h, "q2", "G", 1), "out")
}

// docs/semantics.md §16.36: a transaction pushing an existing transaction id T to q2 and
// acking a leased input fails; nothing is pushed and the input redelivers
// after lease expiry.
func TestSemantics16_36_TransactionDuplicatePushRollsBack(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q2", "", "T", `{"orig":1}`)
	h.PushOne("q1", "", "in", `{}`)
	res := popQueue(h, "q1", "G", 1)
	ack := item(t, res, "in", "completed", "")
	before := h.Dump()
	tx := h.Transaction([]engine.TxOp{
		{Push: &engine.PushItem{Queue: "q2", TransactionID: "fresh", Payload: []byte(`{}`)}},
		{Push: &engine.PushItem{Queue: "q2", TransactionID: "T", Payload: []byte(`{}`)}},
		{Ack: &ack},
	})
	if tx.Success || tx.Error == "" || len(tx.Pushes) != 0 || len(tx.Acks) != 0 {
		t.Fatalf("transaction = %+v, want failure with no results", tx)
	}
	if diff := enginetest.DiffDumps(before, h.Dump()); diff != "" {
		t.Fatalf("failed transaction wrote: %s", diff)
	}
	wantTxns(t, "q2", popQueue(h, "q2", "G", 10), "T")
	h.Advance(sec(61))
	wantTxns(t, "input after expiry", popQueue(h, "q1", "G", 1), "in")
}

// docs/semantics.md §16.38: replaying a dead-lettered message pushes it under a fresh
// transaction id, removes the row, makes it poppable, and a repeat fails.
func TestSemantics16_38_ReplayDeadLetter(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m", `{"p":1}`)
	res := popQueue(h, "q", "G", 1)
	h.Ack(item(t, res, "m", "dlq", "bad"))
	pid := res.Messages[0].PartitionID
	rep, err := h.Replay(engine.ReplayCmd{PartitionID: pid, TransactionID: "m"})
	if err != nil || rep.Push.Status != engine.Queued || rep.Push.TransactionID == "m" || rep.RowsRemoved != 1 {
		t.Fatalf("replay = %+v, %v", rep, err)
	}
	if rows, _ := h.DeadLettersAt(pid, "m"); len(rows) != 0 {
		t.Fatalf("row still there: %+v", rows)
	}
	again := popQueue(h, "q", "G", 1)
	wantTxns(t, "replayed", again, rep.Push.TransactionID)
	if string(again.Messages[0].Payload) != `{"p":1}` {
		t.Fatalf("replayed payload %s", again.Messages[0].Payload)
	}
	if _, err := h.Replay(engine.ReplayCmd{PartitionID: pid, TransactionID: "m"}); !errors.Is(err, engine.ErrNoDeadLetter) {
		t.Fatalf("second replay: %v, want ErrNoDeadLetter", err)
	}
}

// docs/semantics.md §16.39: delete and replay of a live (not dead-lettered) message both fail
// with "no dead-letter row".
func TestSemantics16_39_LiveMessageHasNoDeadLetter(t *testing.T) {
	h := enginetest.MustOpen(t)
	r := h.PushOne("q", "", "m", `{}`)
	before := h.Dump()
	if _, err := h.DeleteDLQ(r.PartitionID, "m", ""); !errors.Is(err, engine.ErrNoDeadLetter) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := h.Replay(engine.ReplayCmd{PartitionID: r.PartitionID, TransactionID: "m"}); !errors.Is(err, engine.ErrNoDeadLetter) {
		t.Fatalf("replay: %v", err)
	}
	if diff := enginetest.DiffDumps(before, h.Dump()); diff != "" {
		t.Fatalf("rejected delete/replay wrote: %s", diff)
	}
	wantTxns(t, "message still live", popQueue(h, "q", "", 1), "m")
}

// docs/semantics.md §16.40 (first half): retentionEnabled, retentionSeconds:2, one unconsumed
// message and one DLQ row: after 2 s plus one retention interval (5 s) and a
// sweep, a pop gets nothing and the DLQ row is still listed.
func TestSemantics16_40_RetentionKeepsDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetentionEnabled: 1, engine.OptRetentionSeconds: 2})
	h.PushOne("q", "", "dead", `{"d":1}`)
	res := popQueue(h, "q", "G", 1)
	h.Ack(item(t, res, "dead", "dlq", "bad"))
	h.PushOne("q", "", "unconsumed", `{}`)
	if got := h.Sweep(); got.Messages != 0 {
		t.Fatalf("sweep inside the window = %+v", got)
	}
	h.Advance(sec(2) + sec(5))
	if got := h.Sweep(); got.Messages != 2 {
		t.Fatalf("sweep = %+v, want both messages deleted", got)
	}
	wantNothing(t, "G after retention", popQueue(h, "q", "G", 10))
	wantNothing(t, "queue mode after retention", popQueue(h, "q", "", 10))
	rows, total := dlq(h, engine.DLQFilter{Queue: "q"})
	if total != 1 || rows[0].TransactionID != "dead" || string(rows[0].Payload) != `{"d":1}` || rows[0].Error != "bad" {
		t.Fatalf("dlq after retention = %+v (total %d)", rows, total)
	}
	// The row can still be replayed: its snapshot does not need the segment.
	rep, err := h.Replay(engine.ReplayCmd{PartitionID: rows[0].PartitionID, TransactionID: "dead"})
	if err != nil {
		t.Fatal(err)
	}
	wantTxns(t, "replayed after retention", popQueue(h, "q", "G", 10), rep.Push.TransactionID)
}
