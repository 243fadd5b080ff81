package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// moveLoad is a load on queue "orders" while it moves: pushers that push
// one message a request until each has pushed its share, and consumers
// that pop (the queue's default group) and ack what they got, all through
// the hosts given, which the test keeps running (a pop one of them does
// not lead the group for goes to the leader, as the edge forwards it). It
// records what was acknowledged and what delivered, and each delivery
// that came again though its earlier one was acked, or while that one's
// lease was live: a double delivery.
//
// The lease, popLease, is far longer than a pop's ack takes, even one
// that waits for a move, and short enough that a pop whose outcome was
// unknown (leadership lost as it committed) and which was applied all the
// same, leasing the partition to nobody, gives it back within the test.
type moveLoad struct {
	t   *testing.T
	c   *hosts
	via []*cluster.Host

	mu        sync.Mutex
	acked     map[string]bool
	delivered map[string]int
	answers   map[string]int // consumers' errors, for a failure's message
	lastAt    map[string]time.Time
	completed map[string]bool // acks answered success
	twice     []string        // the double deliveries
	pushed    atomic.Int32

	pushers, consumers sync.WaitGroup
	stop               chan struct{}
	once               sync.Once
}

// startMoveLoad starts pushers × each pushes and two consumers through
// via; acked starts with the pushes made before (a fixture's).
func startMoveLoad(t *testing.T, c *hosts, via []*cluster.Host, pushers, each int, acked []string) *moveLoad {
	l := &moveLoad{t: t, c: c, via: via, acked: map[string]bool{}, delivered: map[string]int{}, answers: map[string]int{},
		lastAt: map[string]time.Time{}, completed: map[string]bool{}, stop: make(chan struct{})}
	for _, txn := range acked {
		l.acked[txn] = true
	}
	// A bound for a load nobody halts (check halts it): generous, as the
	// moves, kills and elections between the load's start and check take
	// a minute and more on a busy machine.
	deadline := time.Now().Add(3 * time.Minute)
	t.Cleanup(l.halt) // before the hosts close, should the test fail first
	for k := range pushers {
		l.pushers.Go(func() {
			for i := range each {
				txn := fmt.Sprintf("p%d-%03d", k, i)
				for !l.stopped() {
					h := via[(k+i)%len(via)]
					res, err := raft.Propose[[]engine.PushResult](ctxT(t), h, engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: txn, Payload: []byte(`{}`)}}})
					if err == nil && res[0].Status != engine.Rejected {
						l.mu.Lock()
						l.acked[txn] = true
						l.mu.Unlock()
						l.pushed.Add(1)
						break
					}
					// A push whose outcome is unknown is tried again: its
					// transaction id makes a repeat a duplicate.
					if (err != nil && !raft.Transient(err)) || time.Now().After(deadline) {
						t.Errorf("push %s: %v %+v", txn, err, res)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	for k := range 2 {
		l.consumers.Go(func() {
			for !l.stopped() && time.Now().Before(deadline) {
				pop := engine.PopCmd{Queue: "orders", Batch: 10, Partitions: 1, LeaseSeconds: int64(popLease / time.Second)}
				r, err := via[k%len(via)].Propose(ctxT(t), pop)
				var nl *raft.NotLeaderError
				if errors.As(err, &nl) {
					if h := c.host("", nl.Status.Leader); h != nil {
						r, err = h.Propose(ctxT(t), pop)
					}
				}
				if err == nil {
					err = r.Err
				}
				if err != nil {
					l.answer("pop: " + err.Error())
					time.Sleep(20 * time.Millisecond)
					continue
				}
				res := r.Value.(engine.PopResult)
				var items []engine.AckItem
				l.mu.Lock()
				for _, m := range res.Messages {
					txn := m.TransactionID
					if l.delivered[txn] > 0 && (l.completed[txn] || time.Since(l.lastAt[txn]) < popLease) {
						l.twice = append(l.twice, fmt.Sprintf("%s (acked %v, %v after)", txn, l.completed[txn], time.Since(l.lastAt[txn])))
					}
					l.delivered[txn]++
					l.lastAt[txn] = time.Now()
					items = append(items, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Lease: res.LeaseID, Status: cursor.Completed})
				}
				l.mu.Unlock()
				for len(items) > 0 && time.Now().Before(deadline) {
					res, err := raft.Propose[[]engine.AckResult](ctxT(t), via[(k+1)%len(via)], engine.AckCmd{Items: items})
					if err == nil {
						l.mu.Lock()
						for _, a := range res {
							if a.Success {
								l.completed[a.TransactionID] = true
							} else {
								l.answers["ack: "+a.Error]++
							}
						}
						l.mu.Unlock()
						break
					}
					l.answer("ack: " + err.Error())
					time.Sleep(20 * time.Millisecond)
				}
				if len(res.Messages) == 0 {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	return l
}

func (l *moveLoad) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *moveLoad) answer(s string) {
	l.mu.Lock()
	l.answers[s]++
	l.mu.Unlock()
}

func (l *moveLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.pushers.Wait()
	l.consumers.Wait()
}

// popLease is a moveLoad pop's lease.
const popLease = 10 * time.Second

// check waits for the pushers to finish and the consumers to have been
// delivered every acknowledged push, then stops them and fails the test
// unless want pushes were acknowledged, each was delivered, and none
// twice but after its lease.
func (l *moveLoad) check(want int) {
	t := l.t
	t.Helper()
	l.pushers.Wait()
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		var missing []string
		for txn := range l.acked {
			if l.delivered[txn] == 0 {
				missing = append(missing, txn)
			}
		}
		answers := fmt.Sprint(l.answers)
		l.mu.Unlock()
		if len(missing) == 0 {
			break
		}
		if time.Now().After(end) {
			slices.Sort(missing)
			t.Fatalf("%d acknowledged pushes never delivered: %v (consumers were answered %s)", len(missing), missing, answers)
		}
	}
	time.Sleep(200 * time.Millisecond) // a late duplicate would show here
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.acked) != want {
		t.Fatalf("%d pushes acknowledged, want %d", len(l.acked), want)
	}
	again := 0
	for txn, n := range l.delivered {
		if !l.acked[txn] {
			t.Errorf("%s delivered %d times, never acknowledged", txn, n)
		}
		again += n - 1
	}
	if len(l.twice) > 0 {
		t.Errorf("delivered twice: %v", l.twice)
	}
	if again > 0 {
		t.Logf("%d deliveries again after the lease (consumers were answered %v)", again, l.answers)
	}
}

// fixtureTxns are the transaction ids moveFixture pushed.
func fixtureTxns(n int) []string {
	var out []string
	for k := range n {
		out = append(out, fmt.Sprintf("t-%03d", k))
	}
	return out
}

// moveSettled reports whether every host of via shows orders placed in
// group to at epoch ep with no move under way, and, in the replicas it
// holds of them, thawed in group to and no copy, import or freeze left in
// group other: the move to `to` completed (or, with to the source, was
// undone).
func moveSettled(via []*cluster.Host, to, other uint32, ep uint64) bool {
	for _, h := range via {
		if h.Placement("orders") != to || h.PlacementEpoch("orders") != ep || len(h.Moves()) != 0 {
			return false
		}
		if n := h.Group(to); n != nil {
			if _, frozen := n.Engine().Frozen("orders"); frozen {
				return false
			}
		}
		n := h.Group(other)
		if n == nil {
			continue
		}
		_, gone := n.Engine().Queue("orders")
		if !errors.Is(gone, engine.ErrQueueNotFound) || len(n.Engine().ImportsUnderWay()) != 0 {
			return false
		}
		if ep == 1 { // undone: the target keeps no mark either
			if _, frozen := n.Engine().Frozen("orders"); frozen {
				return false
			}
		}
	}
	return true
}

// checkBilling fails the test unless the consumer group moveFixture left
// (5 acked, 1 dead-lettered, 3 held under a lease) is where it was before
// the queue moved, as via[0] answers: the held lease acks, the dead letter
// is listed once (and kept by no replica of the groups in gone), and a
// pop of everything delivers each acknowledged push after the first nine
// exactly once.
func checkBilling(t *testing.T, c *hosts, via []*cluster.Host, held []engine.AckItem, acked map[string]bool, gone ...uint32) {
	t.Helper()
	res, err := patientAs[[]engine.AckResult](c, via[0], engine.AckCmd{Items: held})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if !r.Success {
			t.Fatalf("the lease held across the move: ack %+v", r)
		}
	}
	for _, h := range via {
		if _, n, err := h.ListDLQ(engine.DLQFilter{Queue: "orders"}); err != nil || n != 1 {
			t.Fatalf("%d dead letters of orders (%v)", n, err)
		}
		for _, g := range gone {
			if _, n, err := h.Group(g).Engine().ListDLQ(engine.DLQFilter{Queue: "orders"}); err != nil || n != 0 {
				t.Fatalf("group %d keeps %d dead letters (%v)", g, n, err)
			}
		}
	}
	got := map[string]int{}
	for {
		r, err := c.patient(via[0], engine.PopCmd{Queue: "orders", Group: "billing", Batch: 500, Partitions: 1, AutoAck: true})
		if err != nil || r.Err != nil {
			t.Fatalf("billing pop: %v %v", err, r.Err)
		}
		msgs := r.Value.(engine.PopResult).Messages
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			got[m.TransactionID]++
		}
	}
	for txn := range acked {
		want := 1
		if txn >= "t-000" && txn <= "t-008" {
			want = 0 // acked, dead-lettered or held before the move
		}
		if got[txn] != want {
			t.Errorf("billing was delivered %s %d times, want %d", txn, got[txn], want)
		}
	}
	if len(got) != len(acked)-9 {
		t.Errorf("billing was delivered %d messages, want %d", len(got), len(acked)-9)
	}
}

// TestHost_MoveQueue_SourceLeaderKilled moves a queue of four chunks from
// group 1 to group 2 under two pushers and two consumers, and stops group
// 1's leader (host 1) after the first chunk was imported, the copy going
// on or failing there (its undo then thaws a group that is electing). The
// move either completes or is undone within MoveTimeout (and then
// completes when run again); host 1 comes back and catches up, and the
// queue moves once more (2 to 3) through it. Every acknowledged push is
// delivered exactly once, and the consumer group the fixture left, its
// lease and its dead letter are where they were.
func TestHost_MoveQueue_SourceLeaderKilled(t *testing.T) {
	t.Parallel()
	t.Run("copy goes on", func(t *testing.T) { sourceLeaderKilled(t, nil) })
	t.Run("copy fails", func(t *testing.T) { sourceLeaderKilled(t, errors.New("test: the copy fails")) })
}

// sourceLeaderKilled is TestHost_MoveQueue_SourceLeaderKilled, the copy
// failing with fail (nil: going on) once group 1's leader is stopped.
func sourceLeaderKilled(t *testing.T, fail error) {
	c := openOutboxHosts(t)
	held := moveFixture(t, c, 40, 20_000)  // ~800 KB: four chunks
	via := []*cluster.Host{c.h[0], c.h[2]} // the hosts that keep running
	load := startMoveLoad(t, c, via, 2, 150, fixtureTxns(40))
	waitFor(t, "50 pushes", func() bool { return load.pushed.Load() >= 50 })

	entered, release := make(chan struct{}), make(chan struct{})
	mover := c.h[0] // leads the directory and group 3, not 1 nor 2
	cluster.SetMoveHook(mover, func(_ string, seq uint32) error {
		if seq == 1 {
			close(entered)
			<-release
			return fail
		}
		return nil
	})
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- mover.MoveQueue(ctxT(t), "orders", 2, nil) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the move ended before its second chunk: %v", err)
	}
	c.stop(1)
	close(release)
	err := <-done
	cluster.SetMoveHook(mover, nil)
	t.Logf("the move with group 1's leader stopped answered %v after %v", err, time.Since(start))
	waitFor(t, "the move to complete or be undone", func() bool {
		return moveSettled(via, 2, 1, 2) || moveSettled(via, 1, 2, 1)
	})
	if moveSettled(via, 1, 2, 1) {
		t.Logf("undone; moving again")
		c.settled() // group 1 has elected another leader
		if err := mover.MoveQueue(ctxT(t), "orders", 2, nil); err != nil {
			t.Fatalf("the move again: %v", err)
		}
		waitFor(t, "the second move to complete", func() bool { return moveSettled(via, 2, 1, 2) })
	}
	c.start(1)
	waitFor(t, "host 1 to catch up", func() bool { return moveSettled([]*cluster.Host{c.h[1]}, 2, 1, 2) })
	if err := c.h[1].MoveQueue(ctxT(t), "orders", 3, nil); err != nil {
		t.Fatalf("the move to group 3 through the host that was stopped: %v", err)
	}
	waitFor(t, "every host to place orders in group 3", func() bool { return moveSettled(c.h, 3, 2, 3) })
	load.check(40 + 2*150)
	checkBilling(t, c, c.h, held, load.acked, 1, 2)
}

// TestHost_MoveQueue_MoverKilled stops the node that runs a move (host 2,
// which leads neither the directory nor the groups the queue moves
// between) after the first of four chunks, under two pushers and two
// consumers: the directory's leader undoes the move once it is older than
// MoveTimeout, the queue serves from its group, thawed, and, the node
// back, moves through it. Every acknowledged push is delivered exactly
// once; the consumer group the fixture left is where it was.
func TestHost_MoveQueue_MoverKilled(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	held := moveFixture(t, c, 40, 20_000)
	via := []*cluster.Host{c.h[0], c.h[1]}
	load := startMoveLoad(t, c, via, 2, 150, fixtureTxns(40))
	waitFor(t, "50 pushes", func() bool { return load.pushed.Load() >= 50 })

	mover := c.h[2]
	entered := make(chan struct{})
	cluster.SetMoveHook(mover, func(_ string, seq uint32) error {
		if seq == 1 {
			close(entered)
			<-cluster.Stopping(mover) // held until the node stops
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- mover.MoveQueue(ctxT(t), "orders", 3, nil) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the move ended before its second chunk: %v", err)
	}
	start := time.Now()
	c.stop(2)
	if err := <-done; err == nil {
		t.Fatal("the move of a stopped node succeeded")
	}
	t.Logf("the mover stopped in %v", time.Since(start))
	waitFor(t, "the directory's leader to undo the move", func() bool { return moveSettled(via, 1, 3, 1) })
	t.Logf("undone %v after the mover stopped", time.Since(start))
	res, err := patientAs[[]engine.PushResult](c, c.h[0], engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "after", Payload: []byte(`1`)}}})
	if err != nil || len(res) != 1 || res[0].Status != engine.Queued {
		t.Fatalf("push after the undo: %v %+v", err, res)
	}
	load.mu.Lock()
	load.acked["after"] = true
	load.mu.Unlock()
	c.start(2)
	waitFor(t, "host 2 to catch up", func() bool { return moveSettled([]*cluster.Host{c.h[2]}, 1, 3, 1) })
	// The move again: it copies 20,000 messages, which on a busy machine
	// can outlast MoveTimeout (3 s here), and the directory's leader then
	// undoes it as a move left part way: asked again, as the balancer
	// would. Any other failure fails the test.
	for attempt := 1; ; attempt++ {
		aborted := func() (n int) {
			for i := range c.h {
				for _, o := range c.outcomes(i) {
					if o.Queue == "orders" && o.Result == "aborted" {
						n++
					}
				}
			}
			return n
		}
		before := aborted()
		err := c.h[2].MoveQueue(ctxT(t), "orders", 3, nil)
		if err == nil {
			break
		}
		if aborted() == before || attempt == 3 {
			t.Fatalf("the move again through the node that stopped (attempt %d): %v", attempt, err)
		}
		t.Logf("attempt %d outlasted MoveTimeout and was undone: %v", attempt, err)
		waitFor(t, "the undo to settle", func() bool { return moveSettled(c.h, 1, 3, 1) })
	}
	waitFor(t, "every host to place orders in group 3", func() bool { return moveSettled(c.h, 3, 1, 2) })
	load.check(40 + 2*150 + 1)
	checkBilling(t, c, c.h, held, load.acked, 1)
}

// TestHost_MoveQueue_FlipAnswerLost loses the answer to the placement
// flip (EndMove) of a move run by a host that relays it to the
// directory's leader: the first try is applied there and its answer lost,
// every later one is refused as by a directory with no leader, until the
// mover gives up on it. The flip happened, so the move must complete: the
// queue placed in group 2 holds every message, group 1's copy is dropped.
// (Undoing the move there would drop the copy the directory places.)
func TestHost_MoveQueue_FlipAnswerLost(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	held := moveFixture(t, c, 40, 100)
	mover := c.h[1] // the directory's leader is c.h[0]
	// The flip, whichever attempt it names (command version 4: its
	// BeginMove's stamp).
	isFlip := func(entry []byte) bool {
		cmds, err := command.DecodeEntry(entry)
		if err != nil || len(cmds) != 1 {
			return false
		}
		end, ok := cmds[0].Cmd.(command.EndMove)
		return ok && end.Queue == "orders" && end.To == 2 && end.Epoch == 1
	}
	var tries atomic.Int32
	c.setForward(1, func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error) {
		h := c.host("http-", addr)
		if h == nil {
			return engine.Result{}, raft.ErrForward
		}
		if g == raft.Directory && isFlip(entry) {
			if tries.Add(1) > 1 {
				return engine.Result{}, raft.ErrNoLeader
			}
			if _, err := h.ProposeEntry(ctx, g, entry); err != nil {
				t.Errorf("the flip: %v", err)
			}
			return engine.Result{}, fmt.Errorf("%w: test: the flip's answer was lost", raft.ErrForward)
		}
		return h.ProposeEntry(ctx, g, entry)
	})
	err := mover.MoveQueue(ctxT(t), "orders", 2, nil)
	t.Logf("the move answered %v after %d tries of the flip", err, tries.Load())
	if tries.Load() < 2 {
		t.Fatalf("the flip was tried %d times", tries.Load())
	}
	waitFor(t, "the move to complete", func() bool { return moveSettled(c.h, 2, 1, 2) })
	acked := map[string]bool{}
	for _, txn := range fixtureTxns(40) {
		acked[txn] = true
	}
	checkBilling(t, c, c.h, held, acked, 1)
}
