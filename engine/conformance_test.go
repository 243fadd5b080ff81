package engine_test

// Conformance of the engine to the parts of docs/semantics.md and
// docs/decisions.md that docs/semantics.md §6.4 and §16 do not spell out:
// dedup windows (docs/semantics.md §3.4), claiming and subscriptions
// (docs/semantics.md §4.3-§4.6), visibility (docs/semantics.md §4.5),
// autoAck (docs/semantics.md §4.8), leases (docs/semantics.md §5,
// docs/decisions.md C10), per-item ack flags (docs/decisions.md C7),
// transactions (docs/semantics.md §13), the DLQ (docs/semantics.md §9,
// docs/decisions.md B1, C4, B3), maxDeliveries (docs/decisions.md B5),
// retryDelay (docs/decisions.md B6), group management (docs/semantics.md §14),
// queue deletion, determinism and restart.

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

// ---------------------------------------------------------------------------
// docs/semantics.md §3.4 deduplication.

func TestConformance_Dedup_WithinRequestFirstWins(t *testing.T) {
	h := enginetest.MustOpen(t)
	res := h.Push(
		engine.PushItem{Queue: "q", Partition: "p", TransactionID: "T", Payload: []byte(`1`)},
		engine.PushItem{Queue: "q", Partition: "p", TransactionID: "U", Payload: []byte(`2`)},
		engine.PushItem{Queue: "q", Partition: "other", TransactionID: "T", Payload: []byte(`3`)},
		engine.PushItem{Queue: "q", Partition: "p", TransactionID: "T", Payload: []byte(`4`)},
	)
	want := []engine.PushStatus{engine.Queued, engine.Queued, engine.Queued, engine.Duplicate}
	for i, r := range res {
		if r.Status != want[i] {
			t.Fatalf("item %d status %d, want %d (%+v)", i, r.Status, want[i], res)
		}
	}
	if res[3].MessageID != res[0].MessageID {
		t.Fatalf("duplicate carries %s, want the leader's %s", engine.FormatID(res[3].MessageID), engine.FormatID(res[0].MessageID))
	}
	got := popPart(h, "q", "p", "", 10)
	wantTxns(t, "p", got, "T", "U")
	if string(got.Messages[0].Payload) != `1` {
		t.Fatalf("first wins: payload %s", got.Messages[0].Payload)
	}
	wantTxns(t, "other", popPart(h, "q", "other", "", 10), "T")
}

// Two push commands in one batch (one Raft entry group): the second sees the
// first's index writes, whether it is prepared or not, and a txn id that is
// a prefix of another is not mistaken for it.
func TestConformance_Dedup_AcrossCommandsInOneBatch(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "p", "AB", `0`)
	var first, second, third []engine.PushResult
	st := h.Stamp()
	pp, err := engine.PushCmd{Items: []engine.PushItem{
		{Queue: "q", Partition: "p", TransactionID: "A", Payload: []byte(`2`)},
		{Queue: "q", Partition: "p", TransactionID: "AB", Payload: []byte(`3`)},
		{Queue: "q", Partition: "p", TransactionID: "ABC", Payload: []byte(`4`)},
	}}.Prepare(engine.ID{7, 7, 7, 7, 7, 7, 0x70, 7, 0x80})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	h.Do(func(b *engine.Batch) {
		first = b.Apply(st, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", Partition: "p", TransactionID: "A", Payload: []byte(`1`)}}}).Value.([]engine.PushResult)
		second = b.Apply(st, pp).Value.([]engine.PushResult)
		third = b.Apply(st, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", Partition: "p", TransactionID: "ABC", Payload: []byte(`5`)}}}).Value.([]engine.PushResult)
	})
	got := []engine.PushStatus{first[0].Status, second[0].Status, second[1].Status, second[2].Status, third[0].Status}
	want := []engine.PushStatus{engine.Queued, engine.Duplicate, engine.Duplicate, engine.Queued, engine.Duplicate}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
	if second[0].MessageID != first[0].MessageID || third[0].MessageID != second[2].MessageID {
		t.Fatalf("duplicates carry the wrong message ids")
	}
	wantTxns(t, "p", popPart(h, "q", "p", "", 10), "AB", "A", "ABC")
}

// A repeat inside the window is a duplicate, one pushed more than the window
// after the original is a new message, and within-request dedup applies even
// with the window off.
func TestConformance_Dedup_Window(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptDedupWindowSeconds: 10})
	orig := h.PushOne("q", "", "T", `1`)
	h.Advance(sec(10)) // exactly the window: still inside
	if r := h.Push(engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`2`)})[0]; r.Status != engine.Duplicate || r.MessageID != orig.MessageID {
		t.Fatalf("push at the window edge = %+v, want duplicate", r)
	}
	h.Advance(time.Microsecond)
	again := h.Push(engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`3`)})[0]
	if again.Status != engine.Queued || again.MessageID == orig.MessageID {
		t.Fatalf("push after the window = %+v, want queued as a new message", again)
	}
	// The window restarts from the accepted repeat.
	h.Advance(sec(5))
	if r := h.Push(engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`4`)})[0]; r.Status != engine.Duplicate || r.MessageID != again.MessageID {
		t.Fatalf("push inside the new window = %+v, want duplicate of the repeat", r)
	}
	wantTxns(t, "pop", popPart(h, "q", "Default", "", 10), "T", "T")

	h.Set("q0", O{engine.OptDedupWindowSeconds: 0})
	res := h.Push(
		engine.PushItem{Queue: "q0", TransactionID: "T", Payload: []byte(`1`)},
		engine.PushItem{Queue: "q0", TransactionID: "T", Payload: []byte(`2`)},
	)
	if res[0].Status != engine.Queued || res[1].Status != engine.Duplicate {
		t.Fatalf("window 0, same request = %+v, want first-wins", res)
	}
	if r := h.Push(engine.PushItem{Queue: "q0", TransactionID: "T", Payload: []byte(`3`)})[0]; r.Status != engine.Queued {
		t.Fatalf("window 0, next request = %+v, want queued", r)
	}
}

// The default window is 3600 s (docs/semantics.md §3.4, §10).
func TestConformance_Dedup_DefaultWindowOneHour(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "T", `1`)
	h.Advance(time.Hour - time.Second)
	if r := h.Push(engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`2`)})[0]; r.Status != engine.Duplicate {
		t.Fatalf("after 59m59s: %+v, want duplicate", r)
	}
	h.Advance(2 * time.Second)
	if r := h.Push(engine.PushItem{Queue: "q", TransactionID: "T", Payload: []byte(`3`)})[0]; r.Status != engine.Queued {
		t.Fatalf("after 1h01s: %+v, want queued", r)
	}
}

// ---------------------------------------------------------------------------
// docs/semantics.md §4.3-§4.6 claiming and subscriptions.

// A wildcard pop with partitions>1 takes one contiguous span per partition,
// from each partition's head, under one lease, and batch caps the total.
func TestConformance_Pop_WildcardGlobalBatchCap(t *testing.T) {
	h := enginetest.MustOpen(t)
	for _, p := range []string{"a", "b", "c"} {
		pushN(h, "q", p, p, 5)
	}
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 7, Partitions: 3})
	if len(res.Messages) != 7 {
		t.Fatalf("delivered %d messages, want the batch cap 7", len(res.Messages))
	}
	if len(res.Claims) < 2 || len(res.Claims) > 3 {
		t.Fatalf("%d claims", len(res.Claims))
	}
	byPart := map[string][]string{}
	var order []string
	for _, m := range res.Messages {
		if _, ok := byPart[m.Partition]; !ok {
			order = append(order, m.Partition)
		}
		byPart[m.Partition] = append(byPart[m.Partition], m.TransactionID)
	}
	if len(order) != len(res.Claims) {
		t.Fatalf("messages from %d partitions, %d claims", len(order), len(res.Claims))
	}
	for i, p := range order {
		if res.Claims[i].Partition != p {
			t.Fatalf("claim %d is %s, messages come from %s", i, res.Claims[i].Partition, p)
		}
		got := byPart[p]
		if want := names(p, 0, len(got)-1); !slices.Equal(got, want) {
			t.Fatalf("partition %s delivered %q, want a contiguous head span %q", p, got, want)
		}
		c := mustCursor(h, "q", p, "G")
		if c.Lease != res.LeaseID || c.BatchEnd != int64(len(got)-1) {
			t.Fatalf("partition %s cursor lease %s batch end %d", p, engine.FormatID(c.Lease), c.BatchEnd)
		}
	}
	// Partitions=1 claims only one.
	h2 := enginetest.MustOpen(t)
	for _, p := range []string{"a", "b"} {
		pushN(h2, "q", p, p, 2)
	}
	if r := h2.Pop(engine.PopCmd{Queue: "q", Batch: 10}); len(r.Claims) != 1 || len(r.Messages) != 2 {
		t.Fatalf("default partitions: %d claims, %d messages", len(r.Claims), len(r.Messages))
	}
}

// When every partition is leased a wildcard pop delivers nothing; an ack
// that releases a lease makes its partition claimable again (docs/semantics.md §4.9).
func TestConformance_Pop_AllPartitionsLeased(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "a", "a", 2)
	pushN(h, "q", "b", "b", 2)
	first := popQueue(h, "q", "G", 1)
	second := popQueue(h, "q", "G", 1)
	if len(first.Messages) != 1 || len(second.Messages) != 1 || first.Messages[0].Partition == second.Messages[0].Partition {
		t.Fatalf("two pops took %q and %q", txns(first), txns(second))
	}
	wantNothing(t, "all leased", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 2}))
	m := first.Messages[0]
	h.Ack(item(t, first, m.TransactionID, "completed", ""))
	wantTxns(t, "after release", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 2}), m.Partition+"1")
}

// The subscription is stored on first contact and later pops passing a
// different mode are ignored (docs/semantics.md §4.6, first registration wins).
func TestConformance_Subscription_FirstRegistrationWins(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "old", 2)
	h.Advance(sec(1))
	wantNothing(t, "join new", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}))
	joined := h.Now
	h.Advance(sec(1))
	wantNothing(t, "later pop with all", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubAll}))
	subs, err := h.Subscriptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || subs[0].Group != "G" || subs[0].Queue != "q" || subs[0].Mode != engine.SubNew || subs[0].Timestamp != joined {
		t.Fatalf("subscriptions = %+v", subs)
	}
	h.PushOne("q", "", "new", `{}`)
	wantTxns(t, "after push", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubAll}), "new")
}

// A wildcard pop by a named group on a queue that does not exist yet creates
// the queue and records the subscription before any push (docs/semantics.md §1.1).
func TestConformance_Subscription_RegisteredBeforeFirstPush(t *testing.T) {
	h := enginetest.MustOpen(t)
	wantNothing(t, "join", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}))
	if _, err := h.Queue("q"); err != nil {
		t.Fatalf("queue not created by the named group's pop: %v", err)
	}
	h.Advance(sec(1))
	h.PushOne("q", "p", "m", `{}`)
	wantTxns(t, "after push", popQueue(h, "q", "G", 10), "m")
	// Queue mode does not create queues.
	wantNothing(t, "queue mode", popQueue(h, "q2", "", 10))
	if _, err := h.Queue("q2"); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("queue-mode pop created q2: %v", err)
	}
}

// A partition created after a `new` group joined is seeded from the stored
// join time: the group sees everything pushed there after the join.
func TestConformance_Subscription_NewGroupSeesLaterPartition(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "p1", "old", 2)
	h.Advance(sec(1))
	wantNothing(t, "join", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}))
	h.Advance(sec(1))
	pushN(h, "q", "p2", "born", 3)
	h.PushOne("q", "p1", "p1new", `{}`)
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 2})
	got := txns(res)
	slices.Sort(got)
	if want := []string{"born0", "born1", "born2", "p1new"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}

// A group that only used the single-partition route has no durable record;
// each partition is seeded from that pop's own parameters (docs/semantics.md §4.6).
func TestConformance_Subscription_PartitionRouteRecordsNothing(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "p1", "a", 2)
	pushN(h, "q", "p2", "b", 2)
	wantNothing(t, "p1 with new", h.Pop(engine.PopCmd{Queue: "q", Partition: "p1", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}))
	if subs, _ := h.Subscriptions(); len(subs) != 0 {
		t.Fatalf("partition route recorded %+v", subs)
	}
	wantTxns(t, "p2 with all", h.Pop(engine.PopCmd{Queue: "q", Partition: "p2", Group: "G", Batch: 10}), "b0", "b1")
}

// docs/semantics.md §4.5 delayedProcessing: a message becomes visible only D seconds after it
// was created; the invisible tail is not skipped.
func TestConformance_Visibility_DelayedProcessing(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptDelayedProcessing: 10})
	t0 := h.Now
	h.PushOne("q", "", "m1", `{}`)
	h.Now = t0 + us(sec(6))
	h.PushOne("q", "", "m2", `{}`)
	h.Now = t0 + us(sec(9))
	wantNothing(t, "at 9 s", popQueue(h, "q", "G", 10))
	h.Now = t0 + us(sec(10))
	res := popQueue(h, "q", "G", 10)
	wantTxns(t, "at 10 s", res, "m1")
	h.Ack(enginetest.AckMessages(res, "completed")...)
	h.Now = t0 + us(sec(15))
	wantNothing(t, "at 15 s", popQueue(h, "q", "G", 10))
	h.Now = t0 + us(sec(16))
	wantTxns(t, "at 16 s", popPart(h, "q", "Default", "G", 10), "m2")
}

// docs/semantics.md §4.5 windowBuffer: a partition written less than W seconds ago delivers
// nothing at all; once quiet for W seconds the whole span is deliverable.
func TestConformance_Visibility_WindowBuffer(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptWindowBuffer: 5})
	pushN(h, "q", "quiet", "x", 1)
	t0 := h.Now
	h.Advance(sec(5))
	h.PushOne("q", "", "m1", `{}`)
	h.Now = t0 + us(sec(7))
	wantNothing(t, "2 s after m1", popPart(h, "q", "Default", "G", 10))
	h.PushOne("q", "", "m2", `{}`)
	h.Now = t0 + us(sec(11))
	wantNothing(t, "4 s after m2", popPart(h, "q", "Default", "G", 10))
	// Another partition that has been quiet long enough still delivers.
	wantTxns(t, "quiet partition", popPart(h, "q", "quiet", "G", 10), "x0")
	h.Now = t0 + us(sec(12))
	wantTxns(t, "5 s after m2", popQueue(h, "q", "G", 10), "m1", "m2")
}

// docs/semantics.md §4.8 autoAck: the cursor moves in the same command, no lease, the budget
// and attempt state untouched, never redelivered.
func TestConformance_AutoAck(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	// A failed ack first charges the counter to 1.
	res := popQueue(h, "q", "G", 1)
	h.Ack(item(t, res, "m0", "failed", ""))
	auto := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, AutoAck: true})
	wantTxns(t, "autoAck", auto, "m0", "m1", "m2")
	if auto.LeaseID != (engine.ID{}) {
		t.Fatalf("autoAck lease %s", engine.FormatID(auto.LeaseID))
	}
	c := wantCursor(h, "after autoAck", "q", "Default", "G", 2, 1, false)
	if c.Lease != (engine.ID{}) || c.BatchEnd != -1 {
		t.Fatalf("autoAck left lease %s, batch end %d", engine.FormatID(c.Lease), c.BatchEnd)
	}
	h.Advance(time.Hour)
	wantNothing(t, "later", popQueue(h, "q", "G", 10))
}

// ---------------------------------------------------------------------------
// docs/semantics.md §5 leases.

// An expired lease redelivers the unacked tail in order under a new lease id,
// never charging the budget; attempt counts the redeliveries.
func TestConformance_Lease_ExpiryRedelivers(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 4)
	first := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 4, LeaseSeconds: 5})
	h.Ack(item(t, first, "m0", "completed", ""))
	h.Advance(sec(4))
	wantNothing(t, "before expiry", popQueue(h, "q", "G", 4))
	h.Advance(sec(1)) // expiry is exclusive: at the expiry instant the lease is gone
	second := popQueue(h, "q", "G", 4)
	wantTxns(t, "after expiry", second, "m1", "m2", "m3")
	if second.LeaseID == first.LeaseID {
		t.Fatal("redelivery reused the lease id")
	}
	if m := second.Messages[0]; m.RetryCount != 0 || m.Attempt != 1 {
		t.Fatalf("attempt %d retryCount %d: a new start offset restarts the attempt count", m.Attempt, m.RetryCount)
	}
	h.Advance(sec(61))
	third := popQueue(h, "q", "G", 4)
	if m := third.Messages[0]; m.RetryCount != 0 || m.Attempt != 2 {
		t.Fatalf("third delivery: attempt %d retryCount %d, want 2 and 0", m.Attempt, m.RetryCount)
	}
	wantCursor(h, "after expiries", "q", "Default", "G", 0, 0, true)
}

// Extend never shortens a lease, cannot revive an expired one, and renews
// every partition of a multi-partition pop, reporting the earliest expiry.
func TestConformance_Lease_Extend(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("ns.a", O{engine.OptLeaseTime: 100})
	h.Set("ns.b", O{engine.OptLeaseTime: 200})
	h.PushOne("ns.a", "", "a", `{}`)
	h.PushOne("ns.b", "", "b", `{}`)
	h.PushOne("ns.b", "p2", "b2", `{}`)
	t0 := h.Now
	res := h.Pop(engine.PopCmd{Namespace: "ns", Group: "G", Batch: 10, Partitions: 3})
	if len(res.Claims) != 3 {
		t.Fatalf("discovery pop claimed %d partitions, want 3", len(res.Claims))
	}
	ext := h.Extend(res.LeaseID, 150)
	if ext.Renewed != 3 || ext.ExpiresAt != t0+us(sec(150)) {
		t.Fatalf("extend 150 = %+v, want 3 renewed, earliest expiry +150 s", ext)
	}
	if c := mustCursor(h, "ns.b", "Default", "G"); c.LeaseExpiresAt != t0+us(sec(200)) {
		t.Fatalf("extend shortened ns.b's lease to %d", c.LeaseExpiresAt-t0)
	}
	if ext := h.Extend(res.LeaseID, 1); ext.Renewed != 3 || ext.ExpiresAt != t0+us(sec(150)) {
		t.Fatalf("extend 1 = %+v, want nothing shortened", ext)
	}
	// Expire ns.a's lease only: a later extend renews the other two.
	h.Now = t0 + us(sec(150))
	if ext := h.Extend(res.LeaseID, 100); ext.Renewed != 2 || ext.ExpiresAt != t0+us(sec(250)) {
		t.Fatalf("extend after one expiry = %+v, want 2 renewed", ext)
	}
	if c := mustCursor(h, "ns.a", "Default", "G"); c.LeaseLive {
		t.Fatalf("extend revived an expired lease: %+v", c)
	}
	if ext := h.Extend(h.Stamp().Seed, 100); ext.Renewed != 0 {
		t.Fatalf("unknown lease renewed %d", ext.Renewed)
	}
	if ext := h.Extend(res.LeaseID, 0); ext.Renewed != 2 || ext.ExpiresAt != t0+us(sec(250)) {
		t.Fatalf("extend with the default 60 s = %+v", ext)
	}
}

// docs/decisions.md C10: an ack with no lease is accepted and moves the cursor even after the
// lease expired and even while another worker holds the lease.
func TestConformance_Lease_LeaselessAck(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 4)
	first := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 2, LeaseSeconds: 5})
	h.Advance(sec(10))
	r := h.Ack(leaseless(item(t, first, "m0", "completed", "")))[0]
	if !r.Success {
		t.Fatalf("lease-less ack after expiry = %+v", r)
	}
	wantCursor(h, "after lease-less ack", "q", "Default", "G", 0, 0, false)

	second := popQueue(h, "q", "G", 2)
	wantTxns(t, "second worker", second, "m1", "m2")
	if r := h.Ack(leaseless(item(t, first, "m1", "completed", "")))[0]; !r.Success {
		t.Fatalf("lease-less ack while another worker holds the lease = %+v", r)
	}
	if c := mustCursor(h, "q", "Default", "G"); c.Committed != 1 {
		t.Fatalf("committed %d, want 1", c.Committed)
	}
	// A lease-less ack may name any stored message past the cursor.
	if r := h.Ack(engine.AckItem{TransactionID: "m3", PartitionID: first.Messages[0].PartitionID, Group: "G"})[0]; !r.Success {
		t.Fatalf("lease-less ack of the head = %+v", r)
	}
	wantCursor(h, "after acking the head", "q", "Default", "G", 3, 0, false)
	h.Advance(time.Hour)
	wantNothing(t, "all consumed", popQueue(h, "q", "G", 10))
}

// docs/decisions.md C7: dlq:true and dropped:true only on the poison item; leaseReleased on
// every item of a (partition, lease) group whose lease this call released,
// and not on another partition's group of the same call.
func TestConformance_Ack_PerItemFlags(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "a", "a", 4)
	pushN(h, "q", "b", "b", 4)
	res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 8, Partitions: 2})
	if len(res.Messages) != 8 {
		t.Fatalf("delivered %d", len(res.Messages))
	}
	items := []engine.AckItem{
		item(t, res, "a0", "completed", ""),
		item(t, res, "b0", "completed", ""),
		item(t, res, "a1", "completed", ""),
		item(t, res, "a2", "dlq", "poison"),
		item(t, res, "a3", "completed", ""),
		item(t, res, "b1", "completed", ""),
	}
	got := h.Ack(items...)
	for i, r := range got {
		inA := items[i].TransactionID[0] == 'a'
		if !r.Success || r.DLQ != (i == 3) || r.Dropped || r.LeaseReleased != inA {
			t.Fatalf("item %d (%s) = %+v", i, items[i].TransactionID, r)
		}
	}
	wantCursor(h, "partition a", "q", "a", "G", 2, 0, false)
	wantCursor(h, "partition b", "q", "b", "G", 1, 0, true)

	h2 := enginetest.MustOpen(t)
	h2.Set("q", O{engine.OptRetryLimit: 0, engine.OptDeadLetterQueue: 0, engine.OptDLQAfterMaxRetries: 0})
	pushN(h2, "q", "", "m", 4)
	res = popQueue(h2, "q", "G", 4)
	got = h2.Ack(
		item(t, res, "m0", "completed", ""),
		item(t, res, "m2", "failed", ""),
		item(t, res, "m1", "failed", ""),
		item(t, res, "m3", "completed", ""),
	)
	for i, r := range got {
		if !r.Success || r.Dropped != (i == 2) || r.DLQ || !r.LeaseReleased {
			t.Fatalf("drop item %d = %+v", i, r)
		}
	}
	wantCursor(h2, "after drop", "q", "Default", "G", 1, 0, false)
	wantTxns(t, "after drop", popQueue(h2, "q", "G", 4), "m2", "m3")
}

// Ack items naming unknown messages, partitions, or groups without a cursor
// are rejected per item; they never stop the cursor short of real acks
// below them... and never move it.
func TestConformance_Ack_Rejections(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 2)
	res := popQueue(h, "q", "G", 2)
	pid := res.Messages[0].PartitionID
	got := h.Ack(
		engine.AckItem{TransactionID: "nope", PartitionID: pid, Group: "G", Lease: res.LeaseID},
		engine.AckItem{TransactionID: "m0", PartitionID: h.Stamp().Seed, Group: "G"},
		engine.AckItem{TransactionID: "m0", PartitionID: pid, Group: "never"},
	)
	for i, r := range got {
		if r.Success || r.Error == "" {
			t.Fatalf("item %d = %+v, want rejected", i, r)
		}
	}
	wantCursor(h, "after rejections", "q", "Default", "G", -1, 0, true)
}

// ---------------------------------------------------------------------------
// docs/semantics.md §13 transactions.

func txPush(queue, txn string) engine.TxOp {
	return engine.TxOp{Push: &engine.PushItem{Queue: queue, TransactionID: txn, Payload: []byte(`{}`)}}
}

func txAck(it engine.AckItem) engine.TxOp { return engine.TxOp{Ack: &it} }

// Every fatal cause rolls the whole bundle back: the store is byte for byte
// what it was, and engine.Check passes.
func TestConformance_Transaction_FatalCausesRollBack(t *testing.T) {
	for _, c := range []struct {
		name string
		ops  func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID)
	}{
		{"duplicate push", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			return []engine.TxOp{txPush("out", "new"), txAck(item(t, res, "in0", "completed", "")), txPush("in", "in1")}, nil
		}},
		{"invalid lease", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			it := item(t, res, "in0", "completed", "")
			it.Lease = h.Stamp().Seed
			return []engine.TxOp{txPush("out", "new"), txAck(it)}, nil
		}},
		{"expired lease", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			h.Advance(sec(61))
			return []engine.TxOp{txPush("out", "new"), txAck(item(t, res, "in0", "completed", ""))}, nil
		}},
		{"unknown transaction id", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			it := item(t, res, "in0", "completed", "")
			it.TransactionID = "nope"
			return []engine.TxOp{txPush("out", "new"), txAck(it)}, nil
		}},
		{"beyond the leased batch", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			it := item(t, res, "in0", "completed", "")
			it.TransactionID = "in2"
			return []engine.TxOp{txPush("out", "new"), txAck(it)}, nil
		}},
		{"required lease expired", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			h.Advance(sec(61))
			return []engine.TxOp{txPush("out", "new"), txAck(leaseless(item(t, res, "in0", "completed", "")))}, []engine.ID{res.LeaseID}
		}},
		{"invalid push", func(t *testing.T, res engine.PopResult, h *enginetest.Harness) ([]engine.TxOp, []engine.ID) {
			return []engine.TxOp{txAck(item(t, res, "in0", "completed", "")), txPush("", "x")}, nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := enginetest.MustOpen(t)
			pushN(h, "in", "", "in", 3)
			res := popQueue(h, "in", "G", 2)
			ops, required := c.ops(t, res, h)
			before := h.Dump()
			beforeCursor := mustCursor(h, "in", "Default", "G")
			tx := h.Transaction(ops, required...)
			if tx.Success || tx.Error == "" || len(tx.Pushes)+len(tx.Acks) != 0 {
				t.Fatalf("transaction = %+v, want a failure without results", tx)
			}
			if diff := enginetest.DiffDumps(before, h.Dump()); diff != "" {
				t.Fatalf("rolled-back transaction wrote: %s", diff)
			}
			if _, err := h.Queue("out"); !errors.Is(err, engine.ErrQueueNotFound) {
				t.Fatalf("queue out exists after rollback: %v", err)
			}
			if c := mustCursor(h, "in", "Default", "G"); c.CursorRecord != beforeCursor.CursorRecord {
				t.Fatalf("cursor moved: %+v -> %+v", beforeCursor.CursorRecord, c.CursorRecord)
			}
			if err := h.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A transaction id repeated in one bundle for the same partition is
// first-wins, not fatal; acks follow docs/semantics.md §6 (a failed ack charges the budget);
// the transaction gets a fresh id; lease-less acks are not validated.
func TestConformance_Transaction_Success(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "in", "", "in", 3)
	res := popQueue(h, "in", "G", 3)
	tx := h.Transaction([]engine.TxOp{
		txPush("out", "T"),
		txAck(item(t, res, "in0", "completed", "")),
		txPush("out", "T"),
		txAck(item(t, res, "in1", "failed", "x")),
		{Push: &engine.PushItem{Queue: "out", Partition: "p2", TransactionID: "T", Payload: []byte(`{}`)}},
	})
	if !tx.Success || tx.ID == (engine.ID{}) {
		t.Fatalf("transaction = %+v", tx)
	}
	if st := []engine.PushStatus{tx.Pushes[0].Status, tx.Pushes[1].Status, tx.Pushes[2].Status}; !slices.Equal(st, []engine.PushStatus{engine.Queued, engine.Duplicate, engine.Queued}) ||
		tx.Pushes[1].MessageID != tx.Pushes[0].MessageID {
		t.Fatalf("pushes = %+v", tx.Pushes)
	}
	if len(tx.Acks) != 2 || !tx.Acks[0].Success || !tx.Acks[1].Success || !tx.Acks[1].LeaseReleased {
		t.Fatalf("acks = %+v", tx.Acks)
	}
	wantCursor(h, "after transaction", "in", "Default", "G", 0, 1, false)
	wantTxns(t, "out", popPart(h, "out", "Default", "G", 10), "T")

	// requiredLeases supplies the lease of an ack that names none.
	res = popQueue(h, "in", "G", 3)
	tx = h.Transaction([]engine.TxOp{txAck(leaseless(item(t, res, "in2", "completed", "")))}, res.LeaseID)
	if !tx.Success || !tx.Acks[0].LeaseReleased {
		t.Fatalf("required-lease transaction = %+v", tx)
	}
	// With no lease hint at all the ack is lease-less, accepted after expiry.
	h.PushOne("in", "", "late", `{}`)
	res = h.Pop(engine.PopCmd{Queue: "in", Group: "G", Batch: 1, LeaseSeconds: 1})
	h.Advance(sec(5))
	if tx := h.Transaction([]engine.TxOp{txAck(leaseless(item(t, res, "late", "completed", "")))}); !tx.Success {
		t.Fatalf("lease-less transaction ack = %+v", tx)
	}
	wantNothing(t, "all consumed", popQueue(h, "in", "G", 10))
}

// ---------------------------------------------------------------------------
// docs/semantics.md §9 dead letters.

type dlqFixture struct {
	h  *enginetest.Harness
	t0 int64
}

// newDLQFixture files six dead letters, one per second:
//
//	t0+1 q1/p1/G1 a    t0+2 q1/p2/G1 b    t0+3 q1/p1/G2 a
//	t0+4 q2/p1/G1 c    t0+5 q1/p1/G1 d    t0+6 q2/p2/G2 e
func newDLQFixture(t *testing.T) *dlqFixture {
	h := enginetest.MustOpen(t)
	f := &dlqFixture{h: h, t0: h.Now}
	h.PushOne("q1", "p1", "a", `{"a":1}`)
	h.PushOne("q1", "p2", "b", `{}`)
	h.PushOne("q2", "p1", "c", `{}`)
	h.PushOne("q1", "p1", "d", `{}`)
	h.PushOne("q2", "p2", "e", `{}`)
	for i, r := range []struct{ q, p, g, txn string }{
		{"q1", "p1", "G1", "a"}, {"q1", "p2", "G1", "b"}, {"q1", "p1", "G2", "a"},
		{"q2", "p1", "G1", "c"}, {"q1", "p1", "G1", "d"}, {"q2", "p2", "G2", "e"},
	} {
		h.Now = f.t0 + us(sec(i+1))
		res, err := h.MoveToDLQ(partID(h, r.q, r.p), r.txn, r.g, "err-"+r.txn)
		if err != nil || !res.DLQ {
			t.Fatalf("move %+v: %+v, %v", r, res, err)
		}
	}
	return f
}

// label names a row "txn/group" for comparisons.
func label(rows []engine.DeadLetter) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.TransactionID+"/"+r.Group)
	}
	return out
}

// docs/decisions.md B1: newest failure first, every filter (queue, group, partition, from/to),
// pagination, and a total that counts every matching row.
func TestConformance_DLQ_ListFilters(t *testing.T) {
	f := newDLQFixture(t)
	at := func(s int) int64 { return f.t0 + us(sec(s)) }
	for _, c := range []struct {
		name   string
		filter engine.DLQFilter
		want   []string
		total  int
	}{
		{"all", engine.DLQFilter{}, []string{"e/G2", "d/G1", "c/G1", "a/G2", "b/G1", "a/G1"}, 6},
		{"queue", engine.DLQFilter{Queue: "q1"}, []string{"d/G1", "a/G2", "b/G1", "a/G1"}, 4},
		{"queue and group", engine.DLQFilter{Queue: "q1", Group: "G1"}, []string{"d/G1", "b/G1", "a/G1"}, 3},
		{"group only", engine.DLQFilter{Group: "G1"}, []string{"d/G1", "c/G1", "b/G1", "a/G1"}, 4},
		{"partition only", engine.DLQFilter{Partition: "p1"}, []string{"d/G1", "c/G1", "a/G2", "a/G1"}, 4},
		{"queue and partition", engine.DLQFilter{Queue: "q1", Partition: "p2"}, []string{"b/G1"}, 1},
		{"from/to inclusive", engine.DLQFilter{From: at(2), To: at(4)}, []string{"c/G1", "a/G2", "b/G1"}, 3},
		{"from only", engine.DLQFilter{From: at(5)}, []string{"e/G2", "d/G1"}, 2},
		{"to only", engine.DLQFilter{To: at(1)}, []string{"a/G1"}, 1},
		{"page", engine.DLQFilter{Limit: 2, Offset: 1}, []string{"d/G1", "c/G1"}, 6},
		{"page past the end", engine.DLQFilter{Limit: 2, Offset: 6}, nil, 6},
		{"queue page", engine.DLQFilter{Queue: "q1", Limit: 1}, []string{"d/G1"}, 4},
		{"group, partition, page", engine.DLQFilter{Group: "G1", Partition: "p1", Limit: 1, Offset: 1}, []string{"c/G1"}, 3},
		{"queue, group, partition, time", engine.DLQFilter{Queue: "q1", Group: "G1", Partition: "p1", From: at(2)}, []string{"d/G1"}, 1},
		{"no match", engine.DLQFilter{Queue: "q3"}, nil, 0},
	} {
		rows, total := dlq(f.h, c.filter)
		if got := label(rows); !slices.Equal(got, c.want) || total != c.total {
			t.Errorf("%s: rows %q total %d, want %q total %d", c.name, got, total, c.want, c.total)
		}
	}
	rows, _ := dlq(f.h, engine.DLQFilter{Queue: "q1", Group: "G1", Partition: "p1", To: at(1)})
	if len(rows) != 1 {
		t.Fatalf("rows %+v", rows)
	}
	d := rows[0]
	if d.FailedAt != at(1) || d.Error != "err-a" || d.Queue != "q1" || d.Partition != "p1" || d.PartitionID != partID(f.h, "q1", "p1") ||
		string(d.Payload) != `{"a":1}` || d.EnqueuedAt != f.t0 || d.Offset != 0 {
		t.Fatalf("row = %+v", d)
	}
}

// docs/decisions.md C4: replay pushes the snapshot under a fresh transaction id to the tail of
// its partition, removes the rows, and every group sees the replayed
// message; a second replay finds nothing.
func TestConformance_DLQ_ReplayEveryGroupSees(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "m", `{"v":1}`)
	// G2 consumes m; G1 dead-letters it; n arrives after.
	g2 := popQueue(h, "q", "G2", 1)
	h.Ack(enginetest.AckMessages(g2, "completed")...)
	g1 := popQueue(h, "q", "G1", 1)
	h.Ack(item(t, g1, "m", "dlq", "bad"))
	h.PushOne("q", "", "n", `{}`)
	pid := g1.Messages[0].PartitionID

	rep, err := h.Replay(engine.ReplayCmd{PartitionID: pid, TransactionID: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Push.Status != engine.Queued || rep.Push.TransactionID == "m" || rep.Push.TransactionID != engine.FormatID(rep.Push.MessageID) ||
		rep.Queue != "q" || rep.Partition != "Default" || rep.Push.PartitionID != pid || rep.RowsRemoved != 1 {
		t.Fatalf("replay = %+v", rep)
	}
	if _, total := dlq(h, engine.DLQFilter{}); total != 0 {
		t.Fatalf("%d rows left", total)
	}
	wantTxns(t, "G1", popQueue(h, "q", "G1", 10), "n", rep.Push.TransactionID)
	wantTxns(t, "G2", popQueue(h, "q", "G2", 10), "n", rep.Push.TransactionID)
	wantTxns(t, "queue mode", popQueue(h, "q", "", 10), "m", "n", rep.Push.TransactionID)
	if _, err := h.Replay(engine.ReplayCmd{PartitionID: pid, TransactionID: "m"}); !errors.Is(err, engine.ErrNoDeadLetter) {
		t.Fatalf("second replay: %v", err)
	}
}

// A replay's producer: the snapshot keeps the dead letter's producerSub; a
// corrected payload takes the command's when Restamp says so (the edge's
// caller, "" anonymous), and keeps the dead letter's without it, as replays
// logged before Restamp did. The rows keep the original until they go.
func TestConformance_DLQ_ReplayProducer(t *testing.T) {
	h := enginetest.MustOpen(t)
	cases := []struct {
		txn  string
		cmd  engine.ReplayCmd
		want string
	}{
		{"snapshot", engine.ReplayCmd{}, "alice"},
		{"snapshot-restamp", engine.ReplayCmd{Restamp: true, ProducerSub: "mallory"}, "alice"},
		{"corrected", engine.ReplayCmd{Payload: []byte(`2`), Restamp: true, ProducerSub: "mallory"}, "mallory"},
		{"anonymous", engine.ReplayCmd{Payload: []byte(`2`), Restamp: true}, ""},
		{"older-log", engine.ReplayCmd{Payload: []byte(`2`)}, "alice"},
	}
	var pid engine.ID
	for _, c := range cases {
		pid = h.Push(engine.PushItem{Queue: "q", TransactionID: c.txn, ProducerSub: "alice", Payload: []byte(`1`)})[0].PartitionID
		if _, err := h.MoveToDLQ(pid, c.txn, "", "x"); err != nil {
			t.Fatal(err)
		}
		rows, err := h.DeadLettersAt(pid, c.txn)
		if err != nil || len(rows) != 1 || rows[0].ProducerSub != "alice" {
			t.Fatalf("%s: rows %+v, %v; want one row produced by alice", c.txn, rows, err)
		}
	}
	for _, c := range cases {
		c.cmd.PartitionID, c.cmd.TransactionID = pid, c.txn
		rep, err := h.Replay(c.cmd)
		if err != nil {
			t.Fatalf("replay %s: %v", c.txn, err)
		}
		m, err := h.MessageAt(pid, rep.Push.TransactionID)
		if err != nil {
			t.Fatalf("replayed %s: %v", c.txn, err)
		}
		if m.ProducerSub != c.want {
			t.Errorf("replay %s: producerSub %q, want %q", c.txn, m.ProducerSub, c.want)
		}
	}
}

// Replay and delete scoped to one group leave the other group's row; a
// replay with a corrected payload (docs/decisions.md B4) pushes that payload.
func TestConformance_DLQ_ReplayAndDeleteByGroup(t *testing.T) {
	h := enginetest.MustOpen(t)
	r := h.PushOne("q", "", "m", `{"v":1}`)
	for _, g := range []string{"G1", "G2", "G3"} {
		if _, err := h.MoveToDLQ(r.PartitionID, "m", g, "x"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := h.Replay(engine.ReplayCmd{PartitionID: r.PartitionID, TransactionID: "m", Group: "G1", Payload: []byte(`{"v":2}`)})
	if err != nil || rep.RowsRemoved != 1 {
		t.Fatalf("replay G1 = %+v, %v", rep, err)
	}
	if n, err := h.DeleteDLQ(r.PartitionID, "m", "G2"); err != nil || n != 1 {
		t.Fatalf("delete G2 = %d, %v", n, err)
	}
	if rows, _ := h.DeadLettersAt(r.PartitionID, "m"); len(rows) != 1 || rows[0].Group != "G3" {
		t.Fatalf("rows left = %+v", rows)
	}
	if _, err := h.DeleteDLQ(r.PartitionID, "m", "G2"); !errors.Is(err, engine.ErrNoDeadLetter) {
		t.Fatalf("second delete: %v", err)
	}
	if n, err := h.DeleteDLQ(r.PartitionID, "m", ""); err != nil || n != 1 {
		t.Fatalf("delete all = %d, %v", n, err)
	}
	res := popQueue(h, "q", "", 10)
	if len(res.Messages) != 2 || string(res.Messages[1].Payload) != `{"v":2}` {
		t.Fatalf("queue mode pop = %+v", res.Messages)
	}
}

// docs/decisions.md B3: MoveToDLQ dead-letters a pending message as a dlq ack would, without
// holding the lease; a consumed message is ErrAlreadyConsumed and an unknown
// address ErrMessageNotFound.
func TestConformance_DLQ_MoveToDLQ(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	pid := partID(h, "q", "Default")
	res, err := h.MoveToDLQ(pid, "m0", "G", "manual")
	if err != nil || !res.Success || !res.DLQ {
		t.Fatalf("move = %+v, %v", res, err)
	}
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q", Group: "G"})
	if len(rows) != 1 || rows[0].TransactionID != "m0" || rows[0].Error != "manual" {
		t.Fatalf("rows = %+v", rows)
	}
	if _, err := h.MoveToDLQ(pid, "m0", "G", ""); !errors.Is(err, engine.ErrAlreadyConsumed) {
		t.Fatalf("move consumed: %v", err)
	}
	if _, err := h.MoveToDLQ(pid, "nope", "G", ""); !errors.Is(err, engine.ErrMessageNotFound) {
		t.Fatalf("move unknown: %v", err)
	}
	if _, err := h.MoveToDLQ(h.Stamp().Seed, "m1", "G", ""); !errors.Is(err, engine.ErrMessageNotFound) {
		t.Fatalf("move unknown partition: %v", err)
	}
	// Another worker holds the lease on m1..m2; the move does not need it.
	leased := popQueue(h, "q", "G", 2)
	wantTxns(t, "leased", leased, "m1", "m2")
	if res, err := h.MoveToDLQ(pid, "m1", "G", "manual"); err != nil || !res.DLQ {
		t.Fatalf("move of a leased message = %+v, %v", res, err)
	}
	wantTxns(t, "queue mode unaffected", popQueue(h, "q", "", 10), "m0", "m1", "m2")
	h.Advance(time.Hour)
	wantTxns(t, "G after the moves", popQueue(h, "q", "G", 10), "m2")
}

// docs/decisions.md B5: maxDeliveries dead-letters a message delivered that many times without
// a terminal ack, lease expiries included, and goes on with the next one.
func TestConformance_DLQ_MaxDeliveries(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptMaxDeliveries: 2, engine.OptLeaseTime: 5})
	pushN(h, "q", "", "m", 2)
	for i := 1; i <= 2; i++ {
		res := popQueue(h, "q", "G", 1)
		wantTxns(t, fmt.Sprintf("delivery %d", i), res, "m0")
		h.Advance(sec(6))
	}
	res := popQueue(h, "q", "G", 1)
	wantTxns(t, "third pop", res, "m1")
	if res.DeadLettered != 1 {
		t.Fatalf("dead-lettered %d, want 1", res.DeadLettered)
	}
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 1 || rows[0].TransactionID != "m0" || rows[0].Error != "max deliveries exceeded" || rows[0].Deliveries != 2 {
		t.Fatalf("rows = %+v", rows)
	}
}

// docs/decisions.md B5 when the dead-lettered message is the last one: the pop delivers
// nothing and the store stays consistent (the expired lease must not be
// left on a row whose cursor reached its batch end).
func TestConformance_DLQ_MaxDeliveriesLastMessage(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptMaxDeliveries: 1, engine.OptLeaseTime: 5})
	h.PushOne("q", "", "m", `{}`)
	wantTxns(t, "delivery", popQueue(h, "q", "G", 1), "m")
	h.Advance(sec(6))
	res := popQueue(h, "q", "G", 1)
	wantNothing(t, "second pop", res)
	if res.DeadLettered != 1 {
		t.Fatalf("dead-lettered %d, want 1", res.DeadLettered)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("engine.Check: %v", err)
	}
	c := mustCursor(h, "q", "Default", "G")
	if c.Committed != 0 || c.Lease != (engine.ID{}) || c.BatchEnd != -1 {
		t.Fatalf("cursor = %+v, want committed 0 and no lease", c.CursorRecord)
	}
}

// docs/decisions.md B6: after a failed or retry ack the partition is not redelivered to that
// group until retryDelay has passed; order is kept; other groups and
// completed acks are not delayed.
func TestConformance_RetryDelay(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryDelay: 5000})
	pushN(h, "q", "", "m", 2)
	for _, status := range []string{"failed", "retry"} {
		res := popQueue(h, "q", "G", 1)
		wantTxns(t, status, res, "m0")
		h.Ack(item(t, res, "m0", status, ""))
		h.Advance(sec(4))
		wantNothing(t, status+" after 4 s (wildcard)", popQueue(h, "q", "G", 1))
		wantNothing(t, status+" after 4 s (partition route)", popPart(h, "q", "Default", "G", 1))
		wantTxns(t, "other group", popQueue(h, "q", "other-"+status, 1), "m0")
		h.Advance(sec(1))
	}
	res := popQueue(h, "q", "G", 1)
	wantTxns(t, "after the delay", res, "m0")
	h.Ack(item(t, res, "m0", "completed", ""))
	wantTxns(t, "completed ack not delayed", popQueue(h, "q", "G", 1), "m1")
}

// ---------------------------------------------------------------------------
// docs/semantics.md §14 group management.

// Seek releases the lease (the old lease's acks then fail), resets the
// counter and attempt state, creates missing rows, and can target one
// partition.
func TestConformance_Seek(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "a", "a", 3)
	t1 := h.Now
	h.Advance(sec(10))
	pushN(h, "q", "b", "b", 3)
	h.PushOne("q", "a", "a3", `{}`)
	res := popPart(h, "q", "a", "G", 10)
	h.Ack(item(t, res, "a1", "failed", ""))
	res = popPart(h, "q", "a", "G", 10)
	wantCursor(h, "before seek", "q", "a", "G", -1, 1, true)

	if n, err := h.Seek(engine.SeekCmd{Group: "G", Queue: "q", Partition: "a", Timestamp: t1 + 1}); err != nil || n != 1 {
		t.Fatalf("seek = %d, %v", n, err)
	}
	c := wantCursor(h, "after seek", "q", "a", "G", 2, 0, false)
	if c.Lease != (engine.ID{}) || c.AttemptCount != 0 || c.BatchEnd != -1 {
		t.Fatalf("seek left %+v", c.CursorRecord)
	}
	if r := h.Ack(item(t, res, "a3", "completed", ""))[0]; r.Success {
		t.Fatalf("ack under the released lease = %+v", r)
	}
	if _, ok := cursorOf(h, "q", "b", "G"); ok {
		t.Fatal("partition seek touched partition b")
	}
	wantTxns(t, "a after seek", popPart(h, "q", "a", "G", 10), "a3")

	// Queue-wide seek creates missing rows.
	if n, err := h.Seek(engine.SeekCmd{Group: "G2", Queue: "q", ToEnd: true}); err != nil || n != 2 {
		t.Fatalf("seek toEnd = %d, %v", n, err)
	}
	wantCursor(h, "G2 on a", "q", "a", "G2", 3, 0, false)
	wantCursor(h, "G2 on b", "q", "b", "G2", 2, 0, false)
	wantNothing(t, "G2", h.Pop(engine.PopCmd{Queue: "q", Group: "G2", Batch: 10, Partitions: 2}))

	if _, err := h.Seek(engine.SeekCmd{Group: "G", Queue: "nope", ToEnd: true}); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("seek unknown queue: %v", err)
	}
	if _, err := h.Seek(engine.SeekCmd{Group: "G", Queue: "q", Partition: "nope", ToEnd: true}); !errors.Is(err, engine.ErrPartitionNotFound) {
		t.Fatalf("seek unknown partition: %v", err)
	}
	h.Set("empty", nil)
	h.DeleteQueue("empty")
}

// Deleting a group's rows but keeping its subscription re-seeds from the
// stored subscription; deleting one queue's rows leaves other queues alone.
func TestConformance_DeleteGroup(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "before", `{}`)
	h.PushOne("q2", "", "x", `{}`)
	h.Advance(sec(1))
	wantNothing(t, "join new", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, SubscriptionMode: engine.SubNew}))
	h.Advance(sec(1))
	h.PushOne("q", "", "after", `{}`)
	res := popQueue(h, "q", "G", 10)
	wantTxns(t, "after join", res, "after")
	h.Ack(enginetest.AckMessages(res, "completed")...)
	res = popQueue(h, "q2", "G", 10)
	h.Ack(enginetest.AckMessages(res, "completed")...)

	if n, meta := h.DeleteGroup("G", "q", false); n != 1 || meta {
		t.Fatalf("delete = %d, %v", n, meta)
	}
	if subs, _ := h.Subscriptions(); len(subs) != 2 {
		t.Fatalf("subscriptions = %+v, want both kept", subs)
	}
	wantTxns(t, "re-seeded from the stored join time", popQueue(h, "q", "G", 10), "after")
	wantNothing(t, "q2 untouched", popQueue(h, "q2", "G", 10))
	if n, meta := h.DeleteGroup("G", "", true); n != 2 || !meta {
		t.Fatalf("delete everywhere = %d, %v", n, meta)
	}
	if cs, _ := h.Cursors(h.Now, "G"); len(cs) != 0 {
		t.Fatalf("cursors left: %+v", cs)
	}
	wantTxns(t, "after full delete", popQueue(h, "q", "G", 10), "before", "after")
}

// A subscription update moves no existing cursor and seeds partitions met
// for the first time afterwards from the new timestamp.
func TestConformance_UpdateSubscription(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "p1", "x", 2)
	res := popQueue(h, "q", "G", 1)
	h.Ack(enginetest.AckMessages(res, "completed")...)
	h.Advance(sec(1))
	h.PushOne("q", "p2", "y1", `{}`)
	h.Advance(sec(2))
	ts := h.Now - us(sec(1))
	h.PushOne("q", "p2", "y2", `{}`)
	if n := h.UpdateSubscription("G", ts); n != 1 {
		t.Fatalf("updated %d subscriptions", n)
	}
	if n := h.UpdateSubscription("nobody", ts); n != 0 {
		t.Fatalf("updated %d subscriptions of an unknown group", n)
	}
	wantCursor(h, "p1 after update", "q", "p1", "G", 0, 0, false)
	subs, _ := h.Subscriptions()
	if len(subs) != 1 || subs[0].Mode != engine.SubFrom || subs[0].Timestamp != ts {
		t.Fatalf("subscriptions = %+v", subs)
	}
	got := txns(h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 2}))
	slices.Sort(got)
	if want := []string{"x1", "y2"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}

// Deleting a queue removes its partitions, messages, cursors and
// subscriptions, but keeps its dead letters, which can still be replayed.
func TestConformance_DeleteQueueKeepsDeadLetters(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushN(h, "q", "", "m", 3)
	res := popQueue(h, "q", "G", 3)
	h.Ack(item(t, res, "m0", "dlq", "bad"))
	popQueue(h, "q", "G", 1) // a live lease on the way out
	old := partID(h, "q", "Default")
	if !h.DeleteQueue("q") {
		t.Fatal("delete reported no queue")
	}
	if h.DeleteQueue("q") {
		t.Fatal("second delete reported a queue")
	}
	if _, err := h.Queue("q"); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("queue: %v", err)
	}
	if cs, _ := h.Cursors(h.Now, ""); len(cs) != 0 {
		t.Fatalf("cursors left: %+v", cs)
	}
	if subs, _ := h.Subscriptions(); len(subs) != 0 {
		t.Fatalf("subscriptions left: %+v", subs)
	}
	if _, err := h.MessageAt(old, "m1"); !errors.Is(err, engine.ErrMessageNotFound) {
		t.Fatalf("message of a deleted queue: %v", err)
	}
	rows, total := dlq(h, engine.DLQFilter{Queue: "q"})
	if total != 1 || rows[0].TransactionID != "m0" || string(rows[0].Payload) != `{"n":0,"p":""}` {
		t.Fatalf("dead letters after delete = %+v", rows)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	r := h.PushOne("q", "", "fresh", `{}`)
	if r.PartitionID == old {
		t.Fatal("recreated partition reused the old id")
	}
	wantTxns(t, "recreated queue", popQueue(h, "q", "G", 10), "fresh")
	rep, err := h.Replay(engine.ReplayCmd{PartitionID: old, TransactionID: "m0"})
	if err != nil || rep.Push.PartitionID != r.PartitionID {
		t.Fatalf("replay into the recreated queue = %+v, %v", rep, err)
	}
}

// MessageAt finds a stored message with every group's position.
func TestConformance_MessageAt(t *testing.T) {
	h := enginetest.MustOpen(t)
	r := pushN(h, "q", "", "m", 2)
	res := popQueue(h, "q", "G", 1)
	h.Ack(enginetest.AckMessages(res, "completed")...)
	sm, err := h.MessageAt(r[1].PartitionID, "m1")
	if err != nil || sm.ID != r[1].MessageID || sm.Offset != 1 || len(sm.Groups) != 1 || sm.Groups[0].Committed != 0 {
		t.Fatalf("message = %+v, %v", sm, err)
	}
	if _, err := h.MessageAt(r[1].PartitionID, "nope"); !errors.Is(err, engine.ErrMessageNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}

// ---------------------------------------------------------------------------
// Determinism and restart.

// script drives one engine through a fixed mix of every command; it returns
// a transcript of the results. reopenAt >= 0 restarts the engine before that
// step.
func script(t *testing.T, h *enginetest.Harness, reopenAt int) []string {
	var out []string
	rec := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	steps := []func(){
		func() { h.Set("q", O{engine.OptRetryLimit: 1, engine.OptLeaseTime: 30}) },
		func() {
			for _, p := range []string{"a", "b", "c"} {
				pushN(h, "q", p, p, 4)
			}
		},
		func() {
			rec("%+v", h.Push(engine.PushItem{Queue: "q", Partition: "a", TransactionID: "a0", Payload: []byte(`{}`)}))
		},
		func() {
			res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 5, Partitions: 3})
			rec("pop %+v", res)
			if len(res.Messages) > 1 {
				rec("ack %+v", h.Ack(engine.AckItem{TransactionID: res.Messages[1].TransactionID, PartitionID: res.Messages[1].PartitionID,
					Group: "G", Lease: res.LeaseID, Status: cursor.Failed, Error: "x"}))
			}
		},
		func() { h.Advance(sec(31)) },
		func() {
			res := h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 3, Partitions: 2})
			rec("pop %+v", res)
			rec("extend %+v", h.Extend(res.LeaseID, 100))
			items := enginetest.AckMessages(res, "completed")
			if len(items) > 0 {
				items[0].Status = cursor.DeadLetter
			}
			rec("ack %+v", h.Ack(items...))
		},
		func() {
			rec("pop %+v", h.Pop(engine.PopCmd{Queue: "q", Group: "H", Batch: 2, SubscriptionMode: engine.SubNew}))
		},
		func() {
			res := h.Pop(engine.PopCmd{Queue: "q", Batch: 2, Partitions: 2})
			rec("pop %+v", res)
			ops := []engine.TxOp{txPush("out", "o1")}
			for _, it := range enginetest.AckMessages(res, "completed") {
				ops = append(ops, txAck(it))
			}
			rec("tx %+v", h.Transaction(ops))
		},
		func() {
			rows, total := dlq(h, engine.DLQFilter{})
			rec("dlq %d %+v", total, rows)
			if len(rows) > 0 {
				rep, err := h.Replay(engine.ReplayCmd{PartitionID: rows[0].PartitionID, TransactionID: rows[0].TransactionID})
				rec("replay %+v %v", rep, err)
			}
		},
		func() {
			n, err := h.Seek(engine.SeekCmd{Group: "G", Queue: "q", Partition: "b", ToEnd: true})
			rec("seek %d %v", n, err)
		},
		func() {
			rec("pop %+v", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 3, AutoAck: true}))
		},
		func() {
			res, err := h.MoveToDLQ(partID(h, "q", "c"), "c3", "M", "manual")
			rec("move %+v %v", res, err)
		},
		func() { n, m := h.DeleteGroup("H", "", true); rec("delete %d %v", n, m) },
		func() { rec("update %d", h.UpdateSubscription("G", h.Now)) },
		func() {
			h.Advance(sec(200))
			rec("pop %+v", h.Pop(engine.PopCmd{Queue: "q", Group: "G", Batch: 10, Partitions: 3}))
		},
		func() { rec("delete queue %v", h.DeleteQueue("out")) },
	}
	for i, step := range steps {
		if i == reopenAt {
			h.Reopen()
		}
		step()
		if err := h.Check(); err != nil {
			t.Fatalf("step %d: engine.Check: %v", i, err)
		}
	}
	return out
}

// The same commands with the same stamps give byte-identical stores and
// identical results on two fresh engines; a different clock gives a
// different store (the comparison can fail).
func TestConformance_Determinism(t *testing.T) {
	a := enginetest.MustOpen(t)
	b := enginetest.MustOpen(t)
	ta, tb := script(t, a, -1), script(t, b, -1)
	if !slices.Equal(ta, tb) {
		for i := range min(len(ta), len(tb)) {
			if ta[i] != tb[i] {
				t.Fatalf("transcripts differ at %d:\n%s\n%s", i, ta[i], tb[i])
			}
		}
		t.Fatalf("transcripts differ in length: %d vs %d", len(ta), len(tb))
	}
	da, db := a.Dump(), b.Dump()
	families := map[byte]bool{}
	for _, kv := range da {
		families[kv.Key[0]] = true
	}
	for f := byte(0x01); f <= 0x0A; f++ {
		if !families[f] {
			t.Fatalf("the script wrote no key of family %#x: it does not exercise the whole store", f)
		}
	}
	if diff := enginetest.DiffDumps(da, db); diff != "" {
		t.Fatalf("stores differ: %s", diff)
	}
	c := enginetest.MustOpen(t)
	c.Now += 1
	script(t, c, -1)
	if enginetest.DiffDumps(da, c.Dump()) == "" {
		t.Fatal("a different clock gave an identical store: the dump compares nothing")
	}
}

// After a restart at any point of the script, the results and the store are
// those of an engine that never restarted.
func TestConformance_RestartContinuesIdentically(t *testing.T) {
	ref := enginetest.MustOpen(t)
	want := script(t, ref, -1)
	wantDump := ref.Dump()
	for at := 1; at < 16; at++ {
		h := enginetest.MustOpen(t)
		got := script(t, h, at)
		if !slices.Equal(got, want) {
			t.Fatalf("restart before step %d changed the results", at)
		}
		if diff := enginetest.DiffDumps(wantDump, h.Dump()); diff != "" {
			t.Fatalf("restart before step %d: stores differ: %s", at, diff)
		}
	}
}

// After a restart every state is intact: cursors with their leases,
// counters and retry delays, subscriptions, dead letters, queue options.
func TestConformance_RestartKeepsState(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptRetryDelay: 10000, engine.OptRetryLimit: 5})
	pushN(h, "q", "p1", "a", 5)
	pushN(h, "q", "p2", "b", 5)
	h.Advance(sec(1))
	wantNothing(t, "H joins new", h.Pop(engine.PopCmd{Queue: "q", Group: "H", Batch: 1, SubscriptionMode: engine.SubNew}))
	g1 := popPart(h, "q", "p1", "G1", 4)
	h.Ack(item(t, g1, "a0", "completed", ""))
	g2 := popPart(h, "q", "p2", "G2", 4)
	h.Ack(item(t, g2, "b1", "failed", "x"))
	g3 := popPart(h, "q", "p2", "G3", 1)
	h.Ack(item(t, g3, "b0", "dlq", "bad"))

	cursors, _ := h.Cursors(h.Now, "")
	subs, _ := h.Subscriptions()
	queues, _ := h.Queues()
	rows, _ := dlq(h, engine.DLQFilter{})
	h.Reopen()
	cursors2, _ := h.Cursors(h.Now, "")
	subs2, _ := h.Subscriptions()
	queues2, _ := h.Queues()
	rows2, _ := dlq(h, engine.DLQFilter{})
	for _, c := range []struct {
		name        string
		before, now any
	}{{"cursors", cursors, cursors2}, {"subscriptions", subs, subs2}, {"queues", queues, queues2}, {"dead letters", rows, rows2}} {
		if a, b := fmt.Sprintf("%+v", c.before), fmt.Sprintf("%+v", c.now); a != b {
			t.Fatalf("%s changed across restart:\n%s\n%s", c.name, a, b)
		}
	}
	// Behaviour continues: G1's lease still holds and its acks work.
	wantNothing(t, "G1 leased", popPart(h, "q", "p1", "G1", 4))
	if r := h.Ack(item(t, g1, "a3", "completed", ""))[0]; !r.Success || !r.LeaseReleased {
		t.Fatalf("ack after restart = %+v", r)
	}
	// G2's retry delay survives.
	wantNothing(t, "G2 delayed", popPart(h, "q", "p2", "G2", 4))
	h.Advance(sec(10))
	wantTxns(t, "G2 after the delay", popPart(h, "q", "p2", "G2", 4), "b0", "b1", "b2", "b3")
	// H's subscription survives: it sees only what is pushed now.
	h.PushOne("q", "p1", "late", `{}`)
	wantTxns(t, "H", h.Pop(engine.PopCmd{Queue: "q", Group: "H", Batch: 10, Partitions: 2}), "late")
}

// docs/semantics.md §6.3: acks are grouped by (partition, lease) and each group is one atomic
// decision under the row lock, so two groups of one call that land on the
// same cursor row (an item with the lease and a lease-less one) are decided
// in turn, the second seeing what the first did. A failure must never be
// skipped by a success decided against a state that no longer exists.
func TestConformance_Ack_GroupsOnOneRowDecidedInTurn(t *testing.T) {
	t.Run("completed then lease-less failed", func(t *testing.T) {
		h := enginetest.MustOpen(t)
		pushN(h, "q", "", "m", 5)
		res := popQueue(h, "q", "G", 5)
		got := h.Ack(item(t, res, "m4", "completed", ""), leaseless(item(t, res, "m2", "failed", "")))
		// The first group completes the batch; offset 2 is then already
		// committed, so the lease-less failed ack is stale and charges nothing.
		if !got[0].Success || got[1].Success {
			t.Fatalf("results = %+v, want the lease-less failed item rejected as already committed", got)
		}
		wantCursor(h, "after the call", "q", "Default", "G", 4, 0, false)
	})
	t.Run("lease-less failed then completed", func(t *testing.T) {
		h := enginetest.MustOpen(t)
		pushN(h, "q", "", "m", 5)
		res := popQueue(h, "q", "G", 5)
		got := h.Ack(leaseless(item(t, res, "m2", "failed", "")), item(t, res, "m4", "completed", ""))
		// The first group's signal at 2 has no completed prefix below it
		// (docs/semantics.md §6.4.7), so the cursor stays; it charges the budget and releases
		// the lease. The second group's lease is then gone, so it is
		// rejected and the whole batch redelivers.
		if !got[0].Success || got[1].Success {
			t.Fatalf("results = %+v, want the completed item under the released lease rejected", got)
		}
		wantCursor(h, "after the call", "q", "Default", "G", -1, 1, false)
		wantTxns(t, "redelivery", popQueue(h, "q", "G", 5), "m0", "m1", "m2", "m3", "m4")
	})
}

// Several commands in one batch (one Raft apply batch) see each other's
// writes: a push deduplicates against a push of the same batch, a pop
// leases it, an ack under that lease commits it; the pop's messages are
// read after the commit.
func TestConformance_BatchOfCommandsSeesOwnWrites(t *testing.T) {
	h := enginetest.MustOpen(t)
	var (
		push1, push2 []engine.PushResult
		pop          engine.Result
		acks         []engine.AckResult
	)
	s1, s2, s3, s4 := h.Stamp(), h.Stamp(), h.Stamp(), h.Stamp()
	h.Do(func(b *engine.Batch) {
		push1 = b.Apply(s1, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "T", Payload: []byte(`1`)}, {Queue: "q", TransactionID: "U", Payload: []byte(`2`)}}}).Value.([]engine.PushResult)
		push2 = b.Apply(s2, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "T", Payload: []byte(`3`)}}}).Value.([]engine.PushResult)
		pop = b.Apply(s3, engine.PopCmd{Queue: "q", Group: "G", Batch: 10})
		lease := pop.Value.(engine.PopResult).LeaseID
		acks = b.Apply(s4, engine.AckCmd{Items: []engine.AckItem{{TransactionID: "T", PartitionID: push1[0].PartitionID,
			Group: "G", Status: cursor.Completed, Lease: lease}}}).Value.([]engine.AckResult)
	})
	if err := h.Finish(&pop); err != nil {
		t.Fatal(err)
	}
	if pop.Err != nil || push1[0].Status != engine.Queued || push2[0].Status != engine.Duplicate || push2[0].MessageID != push1[0].MessageID {
		t.Fatalf("pushes = %+v %+v, %v", push1, push2, pop.Err)
	}
	wantTxns(t, "pop in the batch", pop.Value.(engine.PopResult), "T", "U")
	if !acks[0].Success {
		t.Fatalf("ack = %+v", acks)
	}
	wantCursor(h, "after the batch", "q", "Default", "G", 0, 0, true)
}

// createdAt never decreases along a partition, even when the proposer's
// clock goes backwards (a leader change to a node that is behind).
func TestConformance_CreatedAtNeverDecreases(t *testing.T) {
	h := enginetest.MustOpen(t)
	t0 := h.Now
	h.PushOne("q", "", "a", `{}`)
	h.Now = t0 - us(sec(10))
	h.PushOne("q", "", "b", `{}`)
	res := popQueue(h, "q", "", 10)
	wantTxns(t, "pop", res, "a", "b")
	if res.Messages[1].CreatedAt != t0 {
		t.Fatalf("b created at %d, want %d (not before a)", res.Messages[1].CreatedAt, t0)
	}
}

// docs/decisions.md C5: configure merges, Reset restores one option's default, Replace resets
// everything not given; the implicit queue's leaseTime is 60 and configure's
// default is 300; configure creates Default.
func TestConformance_Configure(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("implicit", "p", "m", `{}`)
	info := h.Set("implicit", O{engine.OptRetryLimit: 7})
	if info.Config.Get(engine.OptLeaseTime) != 60 || info.Config.Get(engine.OptRetryLimit) != 7 {
		t.Fatalf("implicit queue after configure: %+v", info.Config)
	}
	if len(info.Partitions) != 2 {
		t.Fatalf("configure did not add Default: %+v", info.Partitions)
	}
	info = h.Set("q", O{engine.OptRetryLimit: 1, engine.OptDelayedProcessing: 5})
	if info.Config.Get(engine.OptLeaseTime) != 300 || info.Config.Get(engine.OptDedupWindowSeconds) != 3600 ||
		!info.Config.DeadLetterEnabled() || info.Config.Get(engine.OptRetryDelay) != 0 {
		t.Fatalf("configure defaults: %+v", info.Config)
	}
	info = h.Set("q", O{engine.OptWindowBuffer: 2})
	if info.Config.Get(engine.OptRetryLimit) != 1 || info.Config.Get(engine.OptWindowBuffer) != 2 {
		t.Fatalf("merge lost an option: %+v", info.Config)
	}
	info = h.Configure(engine.ConfigureCmd{Queue: "q", Reset: []engine.Option{engine.OptRetryLimit}})
	if info.Config.Get(engine.OptRetryLimit) != 3 || info.Config.Get(engine.OptDelayedProcessing) != 5 {
		t.Fatalf("reset: %+v", info.Config)
	}
	info = h.Configure(engine.ConfigureCmd{Queue: "q", Replace: true, Set: []engine.OptionValue{{Option: engine.OptTTL, Value: 9}}})
	want := engine.DefaultConfig()
	if info.Config.Get(engine.OptTTL) != 9 || info.Config.Get(engine.OptDelayedProcessing) != want.Get(engine.OptDelayedProcessing) ||
		info.Config.Get(engine.OptWindowBuffer) != 0 {
		t.Fatalf("replace: %+v", info.Config)
	}
	_, err := enginetest.Run[engine.QueueInfo](h, engine.ConfigureCmd{Queue: "q", Set: []engine.OptionValue{{Option: engine.OptDeadLetterQueue, Value: 2}}})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("configure with a bad boolean: %v", err)
	}
	h.Reopen()
	if cfg, _ := h.QueueConfig("q"); cfg != info.Config {
		t.Fatalf("config after restart %+v, want %+v", cfg, info.Config)
	}
}

// A discovery pop (namespace and/or task, no queue) claims from every
// matching queue: labels come from the dotted name or from configure (docs/semantics.md §1.1).
func TestConformance_Pop_Discovery(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("billing.invoice", "", "inv", `{}`)
	h.PushOne("billing.refund", "", "ref", `{}`)
	h.PushOne("shipping.label", "", "lab", `{}`)
	h.PushOne("plain", "", "pl", `{}`)
	h.Configure(engine.ConfigureCmd{Queue: "plain", Namespace: "billing", NamespaceSet: true, Task: "invoice", TaskSet: true})
	got := txns(h.Pop(engine.PopCmd{Namespace: "billing", Batch: 10, Partitions: 10}))
	slices.Sort(got)
	if want := []string{"inv", "pl", "ref"}; !slices.Equal(got, want) {
		t.Fatalf("namespace billing delivered %q, want %q", got, want)
	}
	got = txns(h.Pop(engine.PopCmd{Task: "invoice", Group: "G", Batch: 10, Partitions: 10}))
	slices.Sort(got)
	if want := []string{"inv", "pl"}; !slices.Equal(got, want) {
		t.Fatalf("task invoice delivered %q, want %q", got, want)
	}
	wantTxns(t, "namespace and task", h.Pop(engine.PopCmd{Namespace: "shipping", Task: "label", Batch: 10}), "lab")
}

// Push validates each item on its own: a bad item is rejected with
// ErrInvalid and the others of the request are still written (docs/semantics.md §3.3).
func TestConformance_Push_Validation(t *testing.T) {
	h := enginetest.MustOpen(t)
	long := string(make([]byte, 256))
	res := h.Push(
		engine.PushItem{Queue: "", Payload: []byte(`1`)},
		engine.PushItem{Queue: "q", Partition: "bad\x00name", Payload: []byte(`2`)},
		engine.PushItem{Queue: "q", TransactionID: long, Payload: []byte(`3`)},
		engine.PushItem{Queue: "q", TransactionID: "ok", Payload: []byte(`4`)},
	)
	for i, r := range res[:3] {
		if r.Status != engine.Rejected || !errors.Is(r.Err, engine.ErrInvalid) {
			t.Fatalf("item %d = %+v, want rejected", i, r)
		}
	}
	if res[3].Status != engine.Queued {
		t.Fatalf("valid item = %+v", res[3])
	}
	wantTxns(t, "pop", popQueue(h, "q", "", 10), "ok")
}

// The DLQ page defaults to 100 rows while total counts every match.
func TestConformance_DLQ_DefaultPage(t *testing.T) {
	h := enginetest.MustOpen(t)
	r := h.PushOne("q", "", "m", `{}`)
	for i := range 120 {
		h.Advance(time.Millisecond)
		if _, err := h.MoveToDLQ(r.PartitionID, "m", fmt.Sprintf("G%03d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	rows, total := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 100 || total != 120 || rows[0].Group != "G119" || rows[99].Group != "G020" {
		t.Fatalf("page of %d rows (first %s), total %d", len(rows), rows[0].Group, total)
	}
	// Queue mode is the default group of a move.
	if res, err := h.MoveToDLQ(r.PartitionID, "m", "", "qm"); err != nil || !res.DLQ {
		t.Fatalf("queue-mode move = %+v, %v", res, err)
	}
	if rows, _ := dlq(h, engine.DLQFilter{Queue: "q", Group: engine.QueueMode}); len(rows) != 1 || rows[0].Error != "qm" {
		t.Fatalf("queue-mode rows = %+v", rows)
	}
}

// requiredLeases may list the leases of several pops: each lease-less ack
// takes the live lease of its own row when that lease is listed (docs/semantics.md §13).
func TestConformance_Transaction_SeveralRequiredLeases(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("a", "", "a0", `{}`)
	h.PushOne("b", "", "b0", `{}`)
	ra := popQueue(h, "a", "G", 1)
	rb := popQueue(h, "b", "G", 1)
	tx := h.Transaction([]engine.TxOp{
		txAck(leaseless(item(t, ra, "a0", "completed", ""))),
		txAck(leaseless(item(t, rb, "b0", "completed", ""))),
	}, ra.LeaseID, rb.LeaseID)
	if !tx.Success || !tx.Acks[0].LeaseReleased || !tx.Acks[1].LeaseReleased {
		t.Fatalf("transaction = %+v", tx)
	}
	wantCursor(h, "a", "a", "Default", "G", 0, 0, false)
	wantCursor(h, "b", "b", "Default", "G", 0, 0, false)
}

// The applied Raft index is recorded with the batch and survives a restart.
func TestConformance_AppliedIndex(t *testing.T) {
	h := enginetest.MustOpen(t)
	b, err := h.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b.Apply(h.Stamp(), engine.PushCmd{Items: []engine.PushItem{{Queue: "q", Payload: []byte(`{}`)}}})
	if err := b.Commit(42); err != nil {
		t.Fatal(err)
	}
	h.Do(func(*engine.Batch) {}) // a batch without an index keeps it
	if got := h.Applied(); got != 42 {
		t.Fatalf("applied %d, want 42", got)
	}
	h.Reopen()
	if got := h.Applied(); got != 42 {
		t.Fatalf("applied after restart %d, want 42", got)
	}
}

// A message acked dlq after retention or eviction deleted its segment (it
// was leased when it went, docs/semantics.md §8.2): either nothing is filed (evicted messages
// are skipped, not dead-lettered, docs/semantics.md §8.1) or the row keeps its address, the
// transaction and message ids the index still holds, so that it can be
// listed, replayed or deleted by address. A row without an address cannot.
func TestConformance_DLQ_DeadLetterOfDeletedMessage(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.Set("q", O{engine.OptMaxWaitTimeSeconds: 10, engine.OptLeaseTime: 60})
	r := h.PushOne("q", "", "m", `{"m":1}`)
	res := popQueue(h, "q", "G", 1)
	h.Advance(sec(11))
	if got := h.Sweep(); got.Evicted != 1 {
		t.Fatalf("sweep = %+v, want m evicted", got)
	}
	ack := h.Ack(item(t, res, "m", "dlq", "bad"))[0]
	rows, total := dlq(h, engine.DLQFilter{Queue: "q"})
	if !ack.DLQ {
		if total != 0 {
			t.Fatalf("ack = %+v, yet %d rows filed: %+v", ack, total, rows)
		}
		return
	}
	if total != 1 || rows[0].TransactionID != "m" || rows[0].MessageID != r.MessageID {
		t.Fatalf("ack = %+v; rows = %+v, want one row addressed (partition, \"m\")", ack, rows)
	}
	if at, err := h.DeadLettersAt(r.PartitionID, "m"); err != nil || len(at) != 1 {
		t.Fatalf("row by address: %+v, %v", at, err)
	}
}
