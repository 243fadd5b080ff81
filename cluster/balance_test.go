package cluster_test

import (
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
)

// openBalanceHosts opens three hosts of three groups, every group on
// every host, at the current command version, with the load signal every
// 200 ms and the balancer's thresholds shrunk (hold 1 s, cooldown 1 s,
// floor 1 msg/s) and on or off.
func openBalanceHosts(t *testing.T, balance bool) *hosts {
	c := openHostsOf(t, 3, 3, 0, currentVersions, balanceQuickly(balance))
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	c.atMaxVersion()
	return c
}

// currentVersions has a host read every server at the current command
// version, every 50 ms.
func currentVersions(o *raft.Options) {
	o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
}

// balanceQuickly is the load signal every 200 ms and the balancer's
// thresholds shrunk (hold 1 s, cooldown 1 s, floor 1 msg/s), on or off.
func balanceQuickly(balance bool) func(*hosts) {
	return func(c *hosts) {
		c.tune = func(o *cluster.HostOptions) {
			o.LoadInterval = 200 * time.Millisecond
			o.Balance, o.BalanceRatio, o.BalanceFloor = balance, 1.5, 1
			o.BalanceHold, o.BalanceCooldown = time.Second, time.Second
		}
	}
}

// traffic pushes to each of queues without pause, through the hosts in
// turn, and pops and acks them, recording what was acknowledged and what
// delivered, until stopped.
type traffic struct {
	t         *testing.T
	c         *hosts
	mu        sync.Mutex
	acked     map[string]bool
	delivered map[string]int
	// unsure are the messages whose ack was not answered a success: a
	// lease that expired meanwhile, or an ack whose outcome is unknown.
	// They may be delivered again once their lease expires.
	unsure map[string]bool
	errs   map[string]int // what consumers were answered, for a failure's message
	pushed atomic.Int32
	// stopPush stops the pushers, stop everyone.
	stopPush, stop chan struct{}
	haltPush, halt sync.Once
	pushers        sync.WaitGroup
	consumers      sync.WaitGroup
}

func startTraffic(t *testing.T, c *hosts, queues ...string) *traffic {
	tr := &traffic{t: t, c: c, acked: map[string]bool{}, delivered: map[string]int{}, unsure: map[string]bool{}, errs: map[string]int{},
		stopPush: make(chan struct{}), stop: make(chan struct{})}
	t.Cleanup(tr.end) // before the hosts close, should the test fail first
	for k, q := range queues {
		tr.pushers.Go(func() { tr.push(k, q) })
		tr.consumers.Go(func() { tr.consume(k, q) })
	}
	return tr
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (tr *traffic) stopped() bool { return closed(tr.stop) }

func (tr *traffic) pushing() bool { return !closed(tr.stopPush) && !closed(tr.stop) }

func (tr *traffic) push(k int, queue string) {
	for i := 0; tr.pushing(); i++ {
		txn := fmt.Sprintf("%s-%05d", queue, i)
		deadline := time.Now().Add(60 * time.Second)
		// Once tried, a push is retried until acknowledged even after
		// stopPush: its outcome may be unknown, and it may be stored.
		for !tr.stopped() {
			h := tr.c.h[(k+i)%3]
			res, err := raft.Propose[[]engine.PushResult](ctxT(tr.t), h, engine.PushCmd{Items: []engine.PushItem{{Queue: queue, TransactionID: txn, Payload: []byte(`{"n":1}`)}}})
			if err == nil && res[0].Status != engine.Rejected {
				tr.mu.Lock()
				tr.acked[txn] = true
				tr.mu.Unlock()
				tr.pushed.Add(1)
				break
			}
			if (err != nil && !raft.Transient(err)) || time.Now().After(deadline) {
				tr.t.Errorf("push %s: %v %+v", txn, err, res)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (tr *traffic) consume(k int, queue string) {
	for !tr.stopped() {
		// A short lease: a pop whose outcome was unknown (leadership lost
		// on a loaded machine) leases messages this consumer never saw,
		// which come back once it expires.
		r, err := tr.c.forwarded(tr.c.h[(k+1)%3], engine.PopCmd{Queue: queue, Batch: 20, Partitions: 1, LeaseSeconds: 3})
		if err == nil {
			err = r.Err
		}
		if err != nil {
			tr.note(err.Error())
			time.Sleep(20 * time.Millisecond)
			continue
		}
		pop := r.Value.(engine.PopResult)
		var items []engine.AckItem
		tr.mu.Lock()
		for _, m := range pop.Messages {
			tr.delivered[m.TransactionID]++
			items = append(items, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Lease: pop.LeaseID, Status: cursor.Completed})
		}
		tr.mu.Unlock()
		acked := false
		for deadline := time.Now().Add(60 * time.Second); len(items) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			res, err := raft.Propose[[]engine.AckResult](ctxT(tr.t), tr.c.h[k%3], engine.AckCmd{Items: items})
			if err == nil {
				acked = true
				for i, a := range res {
					if !a.Success {
						tr.note("ack: " + a.Error)
						tr.mu.Lock()
						tr.unsure[items[i].TransactionID] = true
						tr.mu.Unlock()
					}
				}
				break
			}
			tr.note("ack: " + err.Error())
		}
		if !acked {
			tr.mu.Lock()
			for _, it := range items {
				tr.unsure[it.TransactionID] = true
			}
			tr.mu.Unlock()
		}
		if len(pop.Messages) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (tr *traffic) note(what string) {
	tr.mu.Lock()
	tr.errs[what]++
	tr.mu.Unlock()
}

func (tr *traffic) end() {
	tr.halt.Do(func() { close(tr.stop) })
	tr.haltPush.Do(func() { close(tr.stopPush) })
	tr.pushers.Wait()
	tr.consumers.Wait()
}

// drained stops the pushers, waits until every acknowledged push was
// delivered, stops the consumers, and checks that each was delivered
// once (or again only after its lease expired without an ack) and
// nothing unacknowledged was.
func (tr *traffic) drained() {
	t := tr.t
	t.Helper()
	tr.haltPush.Do(func() { close(tr.stopPush) })
	tr.pushers.Wait()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tr.mu.Lock()
		var missing []string
		for txn := range tr.acked {
			if tr.delivered[txn] == 0 {
				missing = append(missing, txn)
			}
		}
		tr.mu.Unlock()
		if len(missing) == 0 {
			break
		}
		if time.Now().After(end) {
			slices.Sort(missing)
			t.Fatalf("%d acknowledged pushes never delivered: %v (consumers were answered %v)", len(missing), missing[:min(len(missing), 20)], tr.errs)
		}
	}
	time.Sleep(200 * time.Millisecond) // a late duplicate would show here
	tr.end()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	again := 0
	for txn, n := range tr.delivered {
		if n > 1 && tr.unsure[txn] {
			again++ // its lease expired before its ack: delivered again, as promised
			continue
		}
		if !tr.acked[txn] || n != 1 {
			t.Errorf("%s delivered %d times (acknowledged %v)", txn, n, tr.acked[txn])
		}
	}
	t.Logf("%d pushes acknowledged, each delivered once (%d again after their lease expired unacked)", len(tr.acked), again)
}

// placements are queues' groups and epochs as host 0 has them.
func placements(c *hosts, queues ...string) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, q := range queues {
		out[q] = [2]uint64{uint64(c.h[0].Placement(q)), c.h[0].PlacementEpoch(q)}
	}
	return out
}

// moveOutcomes are the moves every host reported (HostOptions.OnMove).
func moveOutcomes(c *hosts) []cluster.MoveOutcome {
	var out []cluster.MoveOutcome
	for i := range c.h {
		out = append(out, c.outcomes(i)...)
	}
	return out
}

// TestHost_BalancerMovesOneHotQueueAndNotBack: two queues pushed without
// pause in group 1, nothing elsewhere. The directory's leader sees group 1
// hot and groups 2 and 3 cold for the hold, and moves exactly one of the
// two queues to another group; after that each busy group holds one queue,
// and no queue fits the rule (moving either alone would invert the gap),
// so nothing moves again, through several holds and cooldowns. Every
// acknowledged push is delivered once.
func TestHost_BalancerMovesOneHotQueueAndNotBack(t *testing.T) {
	t.Parallel()
	c := openBalanceHosts(t, true)
	queues := []string{"hot-a", "hot-b"}
	for _, q := range queues {
		c.place(q, 1)
	}
	start := time.Now()
	tr := startTraffic(t, c, queues...)
	var moved, kept string
	waitForLong(t, "the balancer to move one of the hot queues", 30*time.Second, func() bool {
		for i, q := range queues {
			if c.h[0].Placement(q) != 1 {
				moved, kept = q, queues[1-i]
				return true
			}
		}
		return false
	})
	took := time.Since(start)
	to := c.h[0].Placement(moved)
	t.Logf("moved %s to group %d %v after the pushes began (%d pushes so far)", moved, to, took, tr.pushed.Load())
	if to != 2 && to != 3 {
		t.Fatalf("%s moved to group %d", moved, to)
	}
	// The window: three holds and cooldowns more, the load still on.
	want := map[string][2]uint64{moved: {uint64(to), 2}, kept: {1, 1}}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		got := placements(c, queues...)
		if got[moved] == [2]uint64{} || got[moved][0] == 1 && got[moved][1] == 1 {
			continue // host 0's replica not there yet
		}
		if got[moved] != want[moved] || got[kept] != want[kept] || len(c.h[0].Moves()) > 0 {
			t.Fatalf("placements %v, moves under way %+v: want %v and no other move", got, c.h[0].Moves(), want)
		}
	}
	if l := c.h[0].Load(to); l.MsgsPerSec <= 0 || !slices.ContainsFunc(l.Queues, func(q cluster.QueueLoad) bool { return q.Queue == moved && q.MsgsPerSec > 0 }) {
		t.Errorf("group %d's load after the move %+v: want %s's rate in it", to, l, moved)
	}
	tr.drained()
	outs := moveOutcomes(c)
	if len(outs) != 1 || outs[0].Queue != moved || outs[0].Result != "done" || outs[0].From != 1 || outs[0].To != to {
		t.Fatalf("move outcomes %+v: want one, %s from 1 to %d done", outs, moved, to)
	}
}

// TestHost_BalanceOffMovesNothing: the same load with Balance off is
// reported (group 1's rate and both queues', the one a stream reads
// pinned, groups 2 and 3 idle) and moves nothing.
func TestHost_BalanceOffMovesNothing(t *testing.T) {
	t.Parallel()
	c := openBalanceHosts(t, false)
	queues := []string{"hot-a", "hot-b"}
	for _, q := range queues {
		c.place(q, 1)
	}
	if _, err := patientAs[engine.StreamRegistered](c, c.h[1], engine.StreamRegisterCmd{Name: "audit", SourceQueue: "hot-b", ConfigHash: "h"}); err != nil {
		t.Fatalf("register a stream on hot-b: %v", err)
	}
	tr := startTraffic(t, c, queues...)
	waitForLong(t, "every host's directory to show group 1 busy with both queues and groups 2 and 3 idle", 30*time.Second, func() bool {
		for _, h := range c.h {
			l := h.Load(1)
			if l.MsgsPerSec <= 0 || l.BytesPerSec <= 0 || len(l.Queues) != 2 || l.Queues[0].MsgsPerSec <= 0 || l.Queues[1].MsgsPerSec <= 0 {
				return false
			}
			for _, q := range l.Queues {
				if q.Pinned != (q.Queue == "hot-b") {
					t.Fatalf("group 1's report %+v: want hot-b, and only it, pinned", l)
				}
			}
			for _, g := range []uint32{2, 3} {
				if l := h.Load(g); l.At == 0 || l.MsgsPerSec != 0 {
					return false
				}
			}
		}
		return true
	})
	// Three holds of reports more: a balancer would have moved by then.
	since := c.h[0].Load(1).At
	waitForLong(t, "three seconds of reports more", 30*time.Second, func() bool { return c.h[0].Load(1).At >= since+3e6 })
	if got, want := placements(c, queues...), map[string][2]uint64{"hot-a": {1, 1}, "hot-b": {1, 1}}; got["hot-a"] != want["hot-a"] || got["hot-b"] != want["hot-b"] {
		t.Fatalf("placements %v, want %v", got, want)
	}
	tr.drained()
	if outs := moveOutcomes(c); len(outs) != 0 {
		t.Fatalf("moves with Balance off: %+v", outs)
	}
}

// TestHost_BalancerMovesFromAGroupTheDirectoryLeaderDoesNotHost: four
// hosts, four groups of three voters, the balancer on. Two queues pushed
// without pause in the one group the directory's leader holds no replica
// of: the directory's leader decides, and the group's leader runs the move
// (Forwarder.StartMove), since the copy reads a replica of the source.
// Before, such a group never shed a queue. Every acknowledged push is
// delivered once.
func TestHost_BalancerMovesFromAGroupTheDirectoryLeaderDoesNotHost(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 4, 4, 3, currentVersions, balanceQuickly(true))
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(3)
	c.spreadSettled()
	d := c.leaders(nil)[raft.Directory]
	var far uint32
	for g := uint32(1); g <= 4; g++ {
		if !c.h[d].Hosts(g) {
			far = g
		}
	}
	if far == 0 {
		t.Fatalf("the directory's leader %s hosts every group: %v", c.peers[d].ID, c.describe())
	}
	queues := []string{"hot-a", "hot-b"}
	for _, q := range queues {
		c.place(q, far)
	}
	tr := startTraffic(t, c, queues...)
	var moved string
	waitForLong(t, fmt.Sprintf("the balancer to move one of the hot queues out of group %d", far), 60*time.Second, func() bool {
		for _, q := range queues {
			if g := c.h[d].Placement(q); g != far && g != 0 {
				moved = q
				return true
			}
		}
		return false
	})
	tr.drained()
	var by []string
	for i := range c.h {
		for _, o := range c.outcomes(i) {
			if o.Queue != moved || o.From != far || o.Result != "done" {
				t.Fatalf("%s reported move %+v; want %s from group %d done", c.peers[i].ID, o, moved, far)
			}
			by = append(by, c.peers[i].ID)
			if !c.h[i].Hosts(far) {
				t.Errorf("%s, which hosts no replica of group %d, ran the move", c.peers[i].ID, far)
			}
		}
	}
	if len(by) != 1 {
		t.Fatalf("the move was reported by %v; want one host", by)
	}
	t.Logf("directory leader %s; %s moved out of group %d by %s", c.peers[d].ID, moved, far, by[0])
}
