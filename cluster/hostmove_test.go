package cluster_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
)

// TestHost_MoveCommandsRunOnTheGroupTheyName copies a queue from its
// group into the other one through Host.Propose, each chunk proposed on
// another host (relayed to the target group's leader where that host does
// not lead it), then drops the source copy: every replica of the target
// ends holding the queue as the source had it, and no replica of the
// source keeps it. The placement is not touched: that is the move's
// orchestration, not these commands'.
func TestHost_MoveCommandsRunOnTheGroupTheyName(t *testing.T) {
	t.Parallel()
	c := openCurrentHosts(t, 3, 2)
	c.settled()
	c.relayInProcess()
	c.addressesKnown()
	c.atMaxVersion()
	const src, dst = uint32(1), uint32(2)
	c.place("orders", src)
	for i := range 20 {
		c.push(src, "orders", fmt.Sprintf("t-%d", i))
	}
	leaders := c.settled()
	from := c.h[leaders[src]].Group(src).Engine()
	want, err := from.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := from.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if snap != nil {
			snap.Close() // the test failed part way
		}
	})
	var pos []byte
	for seq := 0; ; seq++ {
		chunk, err := snap.ExportQueue("orders", pos, 512)
		if err != nil {
			t.Fatal(err)
		}
		cmd := engine.ImportQueueCmd{Group: dst, Queue: "orders", ID: chunk.ID, Epoch: 1, Seq: uint32(seq), Last: chunk.Last, KVs: chunk.KVs}
		r, err := c.h[seq%3].Propose(ctxT(t), cmd)
		if err != nil || r.Err != nil {
			t.Fatalf("import chunk %d on host %d: %v %v", seq, seq%3, err, r.Err)
		}
		if res, ok := r.Value.(engine.ImportResult); !ok || res.Next != uint32(seq+1) || res.Done != chunk.Last {
			t.Fatalf("import chunk %d answered %#v", seq, r.Value)
		}
		if chunk.Last {
			if seq < 3 {
				t.Fatalf("only %d chunks", seq+1)
			}
			break
		}
		pos = chunk.Next
	}
	snap.Close()
	snap = nil
	// Both groups hold it now; the listings name it once, from the group
	// the directory places it in.
	waitFor(t, "host 0's replica of the target to hold the queue", func() bool {
		_, err := c.h[0].Group(dst).Engine().Queue("orders")
		return err == nil
	})
	qs, err := c.h[0].Queues()
	if err != nil || len(qs) != 1 || qs[0].Name != "orders" || qs[0].ID != want.ID {
		t.Fatalf("queues while both groups hold it: %+v %v", qs, err)
	}
	r, err := c.h[1].Propose(ctxT(t), engine.DropQueueCmd{Group: src, Queue: "orders", ID: want.ID})
	if err != nil || r.Err != nil || r.Value != true {
		t.Fatalf("drop: %v %v %v", r.Value, err, r.Err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i, h := range c.h {
		for {
			got, err := h.Group(dst).Engine().Queue("orders")
			_, gone := h.Group(src).Engine().Queue("orders")
			if err == nil && reflect.DeepEqual(got, want) && errors.Is(gone, engine.ErrQueueNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("host %d: target %+v (%v), source %v", i, got, err, gone)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, g := range []uint32{0, 7} {
		if _, err := c.h[0].Propose(ctxT(t), engine.DropQueueCmd{Group: g, Queue: "orders", ID: want.ID}); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("a drop on group %d: %v", g, err)
		}
	}
}

// moveFixture fills queue "orders" in group 1 of c: n messages of size
// bytes, consumer group billing with 5 acked, 1 dead-lettered and 3 held
// under a live lease (returned as ack items).
// patient runs cmd through h as forwarded does, and retries, for up to
// 30 s, what may succeed later: an error that says the command was not
// applied (no leader yet, a transfer), and for a push, whose transaction
// ids make a repeat a duplicate, one whose outcome is unknown (leadership
// lost while committing). On a loaded machine the test cluster may hold an
// election while a fixture is being built, which is not what these tests
// test.
func (c *hosts) patient(h *cluster.Host, cmd engine.Command) (engine.Result, error) {
	_, push := cmd.(engine.PushCmd)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.forwarded(h, cmd)
		retry := raft.Transient(err) && (push || raft.NotApplied(err))
		if err == nil || !retry || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// patientAs is patient with the answer's value as a T (its zero value
// when it is not one).
func patientAs[T any](c *hosts, h *cluster.Host, cmd engine.Command) (T, error) {
	r, err := c.patient(h, cmd)
	v, _ := r.Value.(T)
	if err == nil {
		err = r.Err
	}
	return v, err
}

func moveFixture(t *testing.T, c *hosts, n, size int) (held []engine.AckItem) {
	t.Helper()
	c.place("orders", 1)
	rng := rand.New(rand.NewPCG(1, 2)) // bodies that do not compress: sizes are what they say
	for i := 0; i < n; i += 10 {
		var items []engine.PushItem
		for k := i; k < min(n, i+10); k++ {
			body := make([]byte, size)
			for j := range body {
				body[j] = "0123456789abcdef"[rng.IntN(16)]
			}
			items = append(items, engine.PushItem{Queue: "orders", TransactionID: fmt.Sprintf("t-%03d", k), Payload: []byte(`"` + string(body) + `"`)})
		}
		r, err := c.patient(c.h[i%3], engine.PushCmd{Items: items})
		// Duplicate: a retry of a push whose first answer was lost.
		if res, ok := r.Value.([]engine.PushResult); err != nil || !ok || res[0].Status == engine.Rejected {
			t.Fatalf("push: %v %+v", err, r.Value)
		}
	}
	pop := func(batch int) engine.PopResult {
		r, err := c.patient(c.h[0], engine.PopCmd{Queue: "orders", Group: "billing", Batch: batch, Partitions: 1, LeaseSeconds: 600})
		if err != nil || r.Err != nil {
			t.Fatalf("pop: %v %v", err, r.Err)
		}
		return r.Value.(engine.PopResult)
	}
	acks := func(p engine.PopResult) []engine.AckItem {
		var items []engine.AckItem
		for _, m := range p.Messages {
			items = append(items, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Group: "billing", Lease: p.LeaseID, Status: cursor.Completed})
		}
		return items
	}
	// settle is patient also with an answer an election lost (leadership
	// lost while committing: the outcome unknown), asking again; uncertain
	// says the retry may find the command done.
	settle := func(h *cluster.Host, cmd engine.Command) (r engine.Result, err error, uncertain bool) {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			r, err = c.patient(h, cmd)
			if err == nil || !raft.Transient(err) || time.Now().After(deadline) {
				return r, err, uncertain
			}
			uncertain = true
		}
	}
	first := pop(5)
	if _, err, _ := settle(c.h[1], engine.AckCmd{Items: acks(first)}); err != nil { // acked again: no change
		t.Fatal(err)
	}
	poison := pop(1).Messages[0]
	r, err, uncertain := settle(c.h[2], engine.MoveToDLQCmd{PartitionID: poison.PartitionID,
		TransactionID: poison.TransactionID, Group: "billing", Error: "poison"})
	if err != nil || (r.Err != nil && !(uncertain && errors.Is(r.Err, engine.ErrAlreadyConsumed))) {
		t.Fatal(err, r.Err)
	}
	held = acks(pop(3))
	if len(held) != 3 {
		t.Fatalf("held %d", len(held))
	}
	return held
}

// TestHost_MoveQueue_CarriesItsState moves a queue with messages, a
// consumer group's cursor, a live lease and a dead letter from group 1 to
// group 2 through a host that leads neither: every host then places it in
// 2 at epoch 2, the held lease acks, pops continue where the cursor was
// (no message delivered twice, none skipped), the dead letter is listed,
// and no replica of group 1 keeps the queue.
func TestHost_MoveQueue_CarriesItsState(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	held := moveFixture(t, c, 40, 100)
	var phases []string
	err := c.h[0].MoveQueue(ctxT(t), "orders", 2, func(p cluster.MoveProgress) {
		if len(phases) == 0 || phases[len(phases)-1] != p.Phase {
			phases = append(phases, p.Phase)
		}
	})
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	if want := []string{"begin", "freeze", "copy", "flip", "drop", "done"}; !reflect.DeepEqual(phases, want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	waitFor(t, "every host to place orders in group 2 at epoch 2, thawed, and drop group 1's copy", func() bool {
		for _, h := range c.h {
			_, gone := h.Group(1).Engine().Queue("orders")
			_, frozen := h.Group(2).Engine().Frozen("orders")
			if h.Placement("orders") != 2 || h.PlacementEpoch("orders") != 2 || len(h.Moves()) != 0 || frozen ||
				!errors.Is(gone, engine.ErrQueueNotFound) {
				return false
			}
		}
		return true
	})
	for i, h := range c.h {
		if rows, n, err := h.Group(1).Engine().ListDLQ(engine.DLQFilter{Queue: "orders"}); err != nil || n != 0 {
			t.Fatalf("host %d: group 1 keeps %d dead letters (%v)", i, n, rows)
		}
		if _, n, err := h.ListDLQ(engine.DLQFilter{Queue: "orders"}); err != nil || n != 1 {
			t.Fatalf("host %d: %d dead letters of orders (%v)", i, n, err)
		}
	}
	res, err := patientAs[[]engine.AckResult](c, c.h[1], engine.AckCmd{Items: held})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Success {
			t.Fatalf("the lease held across the move: ack %+v", r)
		}
	}
	r, err := c.patient(c.h[1], engine.PopCmd{Queue: "orders", Group: "billing", Batch: 100, Partitions: 1})
	if err != nil || r.Err != nil {
		t.Fatalf("pop after the move: %v %v", err, r.Err)
	}
	var got []string
	for _, m := range r.Value.(engine.PopResult).Messages {
		got = append(got, m.TransactionID)
	}
	var want []string
	for k := 9; k < 40; k++ {
		want = append(want, fmt.Sprintf("t-%03d", k))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the move billing got %v, want %v", got, want)
	}
	// A push lands in group 2.
	r, err = c.patient(c.h[0], engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "after", Payload: []byte(`1`)}}})
	pr, ok := r.Value.([]engine.PushResult)
	if err != nil || !ok || pr[0].Status != engine.Queued {
		t.Fatalf("push after the move: %v %+v", err, r.Value)
	}
	if _, _, ok := c.h[0].Group(2).Engine().PartitionByID(pr[0].PartitionID); !ok {
		waitFor(t, "the push to be in group 2", func() bool {
			_, _, ok := c.h[0].Group(2).Engine().PartitionByID(pr[0].PartitionID)
			return ok
		})
	}
}

// TestHost_MoveQueue_FailureUndoes fails a move after its first chunk was
// imported (the queue spans several): the queue stays in group 1 at epoch
// 1, thawed and serving, group 2 holds no copy nor import, and a second
// move while one runs is refused.
func TestHost_MoveQueue_FailureUndoes(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	moveFixture(t, c, 40, 20_000) // ~800 KB: four chunks
	entered := make(chan struct{})
	release := make(chan struct{})
	cluster.SetMoveHook(c.h[0], func(_ string, seq uint32) error {
		if seq == 1 {
			close(entered)
			<-release
			return errors.New("test: the copy fails")
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- c.h[0].MoveQueue(ctxT(t), "orders", 2, nil) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the move ended before its second chunk: %v", err)
	}
	if err := c.h[1].MoveQueue(ctxT(t), "orders", 3, nil); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a second move while one runs: %v", err)
	}
	if ms := c.h[0].Moves(); len(ms) != 1 || ms[0].From != 1 || ms[0].To != 2 || ms[0].Epoch != 1 {
		t.Fatalf("moves under way: %+v", ms)
	}
	// Meanwhile the queue refuses and the Host waits: a push answers
	// once the move is undone.
	pushed := make(chan error, 1)
	go func() {
		res, err := raft.Propose[[]engine.PushResult](ctxT(t), c.h[2], engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "during", Payload: []byte(`1`)}}})
		if err == nil && res[0].Status != engine.Queued {
			err = fmt.Errorf("%+v", res[0])
		}
		pushed <- err
	}()
	close(release)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "the copy fails") {
		t.Fatalf("move: %v", err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("a push during the failed move: %v", err)
	}
	waitFor(t, "every host to keep orders in group 1, thawed, and group 2 without it", func() bool {
		for _, h := range c.h {
			_, frozen1 := h.Group(1).Engine().Frozen("orders")
			_, frozen2 := h.Group(2).Engine().Frozen("orders")
			_, err := h.Group(2).Engine().Queue("orders")
			if h.Placement("orders") != 1 || h.PlacementEpoch("orders") != 1 || len(h.Moves()) != 0 || frozen1 || frozen2 ||
				!errors.Is(err, engine.ErrQueueNotFound) || len(h.Group(2).Engine().ImportsUnderWay()) != 0 {
				return false
			}
		}
		return true
	})
	r, err := c.patient(c.h[0], engine.PopCmd{Queue: "orders", Group: "fresh", Batch: 100, Partitions: 1, AutoAck: true})
	if err != nil || r.Err != nil || len(r.Value.(engine.PopResult).Messages) != 41 {
		t.Fatalf("pop after the failed move: %v %v", err, r.Err)
	}
	// And it moves once nothing fails.
	cluster.SetMoveHook(c.h[0], nil)
	start := time.Now()
	var last cluster.MoveProgress
	if err := c.h[0].MoveQueue(ctxT(t), "orders", 2, func(p cluster.MoveProgress) { last = p }); err != nil {
		t.Fatalf("the move again: %v", err)
	}
	t.Logf("moved %d bytes in %d chunks in %v", last.Bytes, last.Chunks, time.Since(start))
	// The mover reported both moves (the second host's refused one is no
	// move): the failed one with its first chunk's bytes.
	got := c.outcomes(0)
	if len(got) != 2 || got[0].Result != "failed" || got[1].Result != "done" ||
		got[0].Bytes <= 0 || got[0].Bytes >= last.Bytes || got[1].Bytes != last.Bytes ||
		got[1].Queue != "orders" || got[1].From != 1 || got[1].To != 2 || got[1].Took <= 0 {
		t.Fatalf("host 0's move outcomes: %+v", got)
	}
	if got := c.outcomes(1); len(got) != 0 {
		t.Fatalf("host 1's move outcomes: %+v", got)
	}
	waitFor(t, "every host to count orders placed in group 2, none in 1", func() bool {
		for _, h := range c.h {
			if h.QueuesPlaced(1) != 0 || h.QueuesPlaced(2) != 1 || h.QueuesPlaced(3) != 0 {
				return false
			}
		}
		return true
	})
}

// TestHost_MoveQueue_UnderLoad moves a queue twice (group 1 to 2, then 2
// to 3) while two pushers and two consumers run through every host: every
// acknowledged push is delivered, none twice but after its lease (no
// message lost in a copy, none delivered again because a cursor or a lease
// was not carried; moveLoad).
func TestHost_MoveQueue_UnderLoad(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	c.place("orders", 1)
	const pushers, each = 2, 300
	load := startMoveLoad(t, c, c.h, pushers, each, nil)
	for _, m := range []struct {
		after int32
		to    uint32
	}{{150, 2}, {400, 3}} {
		// One push a request through every host, with -race on a busy
		// machine and elections among the fixture's groups: tens of
		// seconds for a few hundred (the load's own bound is 3 minutes).
		waitForLong(t, fmt.Sprintf("%d pushes", m.after), 90*time.Second, func() bool { return load.pushed.Load() >= m.after })
		start := time.Now()
		// A move that fails for an election (a loaded machine's) is undone
		// and may be asked again, once it is: by the mover, or after
		// MoveTimeout by the directory's leader, which may finish it
		// instead. Until then a move of orders is on record, and a new one
		// would be refused as moving already.
		for end := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			err := c.h[0].MoveQueue(ctxT(t), "orders", m.to, nil)
			if err == nil {
				break
			}
			if !raft.Transient(err) || time.Now().After(end) {
				t.Fatalf("move to %d: %v", m.to, err)
			}
			waitForLong(t, "the failed move to be undone or finished", 60*time.Second, func() bool {
				for _, h := range c.h {
					if len(h.Moves()) != 0 {
						return false
					}
				}
				return true
			})
			if c.h[0].Placement("orders") == m.to {
				t.Logf("move to %d failed (%v), and the directory's leader finished it", m.to, err)
				break
			}
			t.Logf("move to %d failed, asked again: %v", m.to, err)
		}
		t.Logf("moved orders to group %d in %v after %d pushes", m.to, time.Since(start), m.after)
	}
	load.check(pushers * each)
	waitForLong(t, "every host to place orders in group 3 at epoch 3", 60*time.Second, func() bool {
		for _, h := range c.h {
			if h.Placement("orders") != 3 || h.PlacementEpoch("orders") != 3 {
				return false
			}
		}
		return true
	})
}

// TestHost_MoveQueue_StalledMoveIsUndone holds a move part way (its copy
// stopped at the second chunk, as a node that stopped would leave it) on a
// host that does not lead the directory: the directory's leader undoes the
// move once it is older than MoveTimeout, and the queue serves from its
// group again, thawed, with no copy left in the target. The mover, when it
// wakes, finds its move undone.
func TestHost_MoveQueue_StalledMoveIsUndone(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	moveFixture(t, c, 40, 20_000)
	entered := make(chan struct{})
	release := make(chan struct{})
	mover := c.h[1] // the directory's leader is c.h[0] (preferredLeaders)
	cluster.SetMoveHook(mover, func(_ string, seq uint32) error {
		if seq == 1 {
			close(entered)
			<-release
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- mover.MoveQueue(ctxT(t), "orders", 2, nil) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the move ended before its second chunk: %v", err)
	}
	waitFor(t, "the directory's leader to undo the move", func() bool {
		for _, h := range c.h {
			_, frozen1 := h.Group(1).Engine().Frozen("orders")
			_, frozen2 := h.Group(2).Engine().Frozen("orders")
			_, err := h.Group(2).Engine().Queue("orders")
			if h.Placement("orders") != 1 || len(h.Moves()) != 0 || frozen1 || frozen2 ||
				!errors.Is(err, engine.ErrQueueNotFound) || len(h.Group(2).Engine().ImportsUnderWay()) != 0 {
				return false
			}
		}
		return true
	})
	res, err := patientAs[[]engine.PushResult](c, c.h[2], engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "after", Payload: []byte(`1`)}}})
	if err != nil || len(res) != 1 || res[0].Status != engine.Queued {
		t.Fatalf("push after the undo: %v %+v", err, res)
	}
	close(release)
	if err := <-done; err == nil {
		t.Fatal("the stalled move succeeded after it was undone")
	}
	for i, h := range c.h {
		if h.Placement("orders") != 1 || h.PlacementEpoch("orders") != 1 {
			t.Fatalf("host %d places orders in %d at epoch %d", i, h.Placement("orders"), h.PlacementEpoch("orders"))
		}
	}
	// The mover counts its move failed; the directory's leader that undid
	// it, aborted, once.
	if got := c.outcomes(1); len(got) != 1 || got[0].Result != "failed" {
		t.Fatalf("the mover's move outcomes: %+v", got)
	}
	aborted := 0
	for i := range c.h {
		for _, o := range c.outcomes(i) {
			if o.Result == "aborted" && o.Queue == "orders" && o.From == 1 && o.To == 2 {
				aborted++
			}
		}
	}
	if aborted != 1 {
		t.Fatalf("%d aborted moves reported", aborted)
	}
}

// TestHost_MoveQueue_StrayFreezeIsUndone freezes a queue with no move
// recorded (what a mover that froze again after its move was undone, then
// stopped, would leave): group 1's leader thaws it once it has stayed so
// for MoveTimeout, and a push that waited meanwhile lands.
func TestHost_MoveQueue_StrayFreezeIsUndone(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	c.place("orders", 1)
	r, err := c.h[2].Propose(ctxT(t), engine.FreezeQueueCmd{Group: 1, Queue: "orders", Epoch: 5})
	if err != nil || r.Err != nil || r.Value != true {
		t.Fatalf("freeze: %v %v %v", r.Value, err, r.Err)
	}
	start := time.Now()
	res, err := patientAs[[]engine.PushResult](c, c.h[1], engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "waited", Payload: []byte(`1`)}}})
	if err != nil || len(res) != 1 || res[0].Status != engine.Queued {
		t.Fatalf("push: %v %+v", err, res)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Fatalf("the push landed after %v, before the freeze could have been undone", waited)
	}
	waitFor(t, "every replica to thaw", func() bool {
		for _, h := range c.h {
			if _, frozen := h.Group(1).Engine().Frozen("orders"); frozen {
				return false
			}
		}
		return true
	})
}
