package raft_test

// Storage faults at the node level: real raft on the in-memory transport,
// real Pebble under engine/fault/faulttest. Rerun a randomized failure with
//
//	go test ./raft -run TestNode_IOErrors -seed=<seed>

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/fault/faulttest"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the randomized tests; 0 picks one (it is logged)")

// stores are the injectors of one node's two stores.
type stores struct{ engine, log *faulttest.Injector }

func (s stores) each(fn func(*faulttest.Injector)) { fn(s.engine); fn(s.log) }

// faultOptions puts a node's stores on injectors. The Raft log is synced:
// that is what makes an acknowledged command durable.
func faultOptions(t *testing.T, s stores) func(*raft.Options) {
	return func(o *raft.Options) {
		o.RaftLogSync = true
		o.Engine.FS = s.engine.FS(nil)
		o.LogStore.FS = s.log.FS(nil)
		fatal := func(err error) {
			t.Errorf("%s: fatal storage error (the injectors spare what Pebble cannot survive): %v", o.ID, err)
			runtime.Goexit()
		}
		o.Engine.OnFatal, o.LogStore.OnFatal = fatal, fatal
		// Snapshots sync the engine's WAL: have them often.
		o.SnapshotThreshold = 16
	}
}

// waitHealed polls cond until it holds, failing the test after a generous
// deadline.
func waitHealed(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func opCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type ackedAck struct {
	part   engine.ID
	group  string
	offset engine.Offset
}

// checkAcknowledged requires every acknowledged push and ack on node.
func checkAcknowledged(t *testing.T, node *raft.Node, pushed map[string]engine.ID, acked []ackedAck) {
	t.Helper()
	for txn, part := range pushed {
		if _, err := node.MessageAt(part, txn); err != nil {
			t.Errorf("%s: acknowledged push %s: %v", node.Status().ID, txn, err)
		}
	}
	cursors, err := node.Engine().Cursors(time.Now().UnixMicro(), "")
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		part  engine.ID
		group string
	}
	committed := map[key]int64{}
	for _, c := range cursors {
		committed[key{c.PartitionID, c.Group}] = c.Committed
	}
	for _, a := range acked {
		if got, ok := committed[key{a.part, a.group}]; !ok || got < int64(a.offset) {
			t.Errorf("%s: acknowledged ack of offset %d not committed (cursor at %d)", node.Status().ID, a.offset, got)
		}
	}
}

// A three-node cluster under random write, sync and read errors on all six
// stores, with nodes restarted under the faults and the first WAL fsync
// after a restart failed: every command either succeeds or fails in
// bounded time, and once the faults are lifted the nodes heal by
// themselves, agree byte for byte, and hold every acknowledged push and
// ack, also after a restart without faults.
func TestNode_IOErrors_LoseNothingAcknowledged(t *testing.T) {
	t.Parallel()
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun: go test ./raft -run TestNode_IOErrors_LoseNothingAcknowledged -seed=%d)", seed, seed)
	steps, episodes := 240, 3
	if testing.Short() {
		steps, episodes = 100, 1
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	sched := faulttest.Schedule{Kinds: faulttest.All, Rate: 0.3, Quiet: [2]int{20, 100}, Faulty: [2]int{3, 20}}
	inj := map[string]stores{}
	for i := range 3 {
		id := fmt.Sprintf("n%d", i+1)
		inj[id] = stores{faulttest.New(seed + uint64(2*i)), faulttest.New(seed + uint64(2*i+1))}
	}
	c := rafttest.MakeClusterWith(t, 3, func(o *raft.Options) { faultOptions(t, inj[o.ID])(o) })
	for _, s := range inj {
		s.each(func(in *faulttest.Injector) { in.Random(sched) })
	}

	pushed := map[string]engine.ID{}
	var (
		acked            []ackedAck
		leases           []engine.PopResult
		ok, failed, outs int
		startFailures    int
		errs             = map[string]int{}
	)
	leader := func() *raft.Node {
		for _, n := range c.Nodes {
			if n != nil && n.Status().Role == "leader" {
				return n
			}
		}
		return nil
	}
	for step := range steps {
		if step%(steps/(episodes+1)) == steps/(episodes+1)-1 {
			// A node restarts under the faults, and the first fsync of
			// one of its WALs fails.
			i := rng.IntN(3)
			id := fmt.Sprintf("n%d", i+1)
			waitHealed(t, id+" healthy before its restart", func() bool { return c.Nodes[i].Status().Fault == "" || inj[id].log.Total() == 0 })
			c.Stop(i)
			// Opening may meet an injected error (reading the log's
			// bounds, replaying a WAL): a start that fails is reported and
			// the supervisor starts again.
			waitHealed(t, id+" opens under the faults", func() bool {
				_, err := c.TryRestartWith(i, faultOptions(t, inj[id]))
				if err != nil {
					startFailures++
				}
				return err == nil
			})
			c.Heal() // a stopped node's in-memory transport was closed
			target := []*faulttest.Injector{inj[id].engine, inj[id].log}[rng.IntN(2)]
			target.Once(faulttest.Sync, ".log", syscall.EIO)
			outs++
		}
		n := leader()
		if n == nil {
			failed++
			errs["no leader"]++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		queue := fmt.Sprintf("q%d", rng.IntN(2))
		var err error
		start := time.Now()
		switch r := rng.IntN(10); {
		case r < 6 || len(pushed) == 0:
			items := make([]engine.PushItem, 1+rng.IntN(3))
			for j := range items {
				items[j] = engine.PushItem{Queue: queue, TransactionID: fmt.Sprintf("t%d-%d", step, j),
					Payload: []byte(fmt.Sprintf(`{"step":%d,"pad":%q}`, step, strings.Repeat("x", rng.IntN(1500))))}
			}
			var res []engine.PushResult
			if res, err = raft.Propose[[]engine.PushResult](opCtx(t), n, engine.PushCmd{Items: items}); err == nil {
				for _, r := range res {
					if r.Status == engine.Queued {
						pushed[r.TransactionID] = r.PartitionID
					}
				}
			}
		case r < 8 || len(leases) == 0:
			var res engine.PopResult
			if res, err = raft.Propose[engine.PopResult](opCtx(t), n, engine.PopCmd{Queue: queue, Batch: 1 + rng.IntN(4)}); err == nil && len(res.Messages) > 0 {
				leases = append(leases, res)
			}
		default:
			i := rng.IntN(len(leases))
			res := leases[i]
			leases = append(leases[:i], leases[i+1:]...)
			items := make([]engine.AckItem, len(res.Messages))
			for j, m := range res.Messages {
				items[j] = engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Group: res.Group, Lease: res.LeaseID}
			}
			var out []engine.AckResult
			if out, err = raft.Propose[[]engine.AckResult](opCtx(t), n, engine.AckCmd{Items: items}); err == nil {
				for j, r := range out {
					if r.Success && !r.Noop {
						m := res.Messages[j]
						acked = append(acked, ackedAck{part: m.PartitionID, group: res.Group, offset: m.Offset})
					}
				}
			}
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("a command took %v", took)
		}
		if err != nil {
			failed++
			errs[errName(err)]++
			continue
		}
		ok++
	}

	var total uint64
	for _, s := range inj {
		s.each(func(in *faulttest.Injector) { total += in.Total(); in.Lift() })
	}
	for _, n := range c.Nodes {
		waitHealed(t, n.Status().ID+" heals by itself", func() bool { return n.Status().Fault == "" })
	}
	c.EnsureSame()
	var storageErrors uint64
	for _, n := range c.Nodes {
		storageErrors += n.Status().StorageErrors
		checkAcknowledged(t, n, pushed, acked)
	}
	t.Logf("%d commands: %d succeeded, %d failed %v; %d restarts under faults (%d failed starts); %d errors injected, %d storage errors seen; %d acked pushes, %d acked acks",
		ok+failed, ok, failed, errs, outs, startFailures, total, storageErrors, len(pushed), len(acked))
	if total == 0 || len(pushed) == 0 || len(acked) == 0 {
		t.Fatalf("nothing injected or nothing acknowledged: the test proved nothing")
	}

	// Reopened without faults, the stores hold the same.
	for i := range c.Nodes {
		c.Stop(i)
		c.Restart(i)
		c.Heal()
	}
	c.Leader()
	c.EnsureSame()
	for _, n := range c.Nodes {
		checkAcknowledged(t, n, pushed, acked)
	}
}

func errName(err error) string {
	for _, e := range []error{raft.ErrFaulted, raft.ErrNoLeader, raft.ErrNotLeader, raft.ErrLeadershipLost,
		raft.ErrTimeout, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "raft: ")
		}
	}
	return err.Error()
}

// singleNode is one voter whose stores are on injectors.
func singleNode(t *testing.T) (*rafttest.Cluster, stores) {
	s := stores{faulttest.New(1), faulttest.New(2)}
	return rafttest.MakeClusterWith(t, 1, faultOptions(t, s)), s
}

// pushOK pushes one message and fails the test unless it is queued.
func pushOK(t *testing.T, n *raft.Node, txn string, pushed map[string]engine.ID) {
	t.Helper()
	res, err := raft.Propose[[]engine.PushResult](opCtx(t), n, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: txn, Payload: []byte(`{}`)}}})
	if err != nil || res[0].Status != engine.Queued {
		t.Fatalf("push %s = %+v, %v", txn, res, err)
	}
	pushed[txn] = res[0].PartitionID
}

// A full disk under the Raft log: appends wait for space, the node says so
// in Status, and once space returns it goes on by itself; nothing
// acknowledged is lost.
func TestNode_LogStoreDiskFull_ReportedAndHealed(t *testing.T) {
	t.Parallel()
	c, s := singleNode(t)
	n := c.Leader()
	pushed := map[string]engine.ID{}
	for i := range 5 {
		pushOK(t, n, fmt.Sprint("before", i), pushed)
	}
	s.log.Fail(faulttest.Write, syscall.ENOSPC)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := raft.Propose[[]engine.PushResult](ctx, n, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "during", Payload: []byte(`{}`)}}})
	cancel()
	if err == nil {
		t.Fatal("a push acknowledged while its log entry could not be written")
	}
	waitHealed(t, "Status reports the full disk", func() bool {
		f := n.Status().Fault
		return strings.Contains(f, "raft log") && strings.Contains(f, "no space left")
	})
	if n.Status().StorageErrors == 0 {
		t.Error("StorageErrors is 0 on a full disk")
	}
	s.log.Lift()
	waitHealed(t, "the node heals by itself", func() bool { return n.Status().Fault == "" })
	n = c.Leader()
	pushOK(t, n, "after", pushed)
	checkAcknowledged(t, n, pushed, nil)
	c.EnsureSame()
}

// A failed fsync of the Raft log: the leader's append fails, it steps down,
// the log store is faulted and says so, and once fsyncs work again the
// store reopens itself and the node leads again, without a restart.
func TestNode_LogStoreFsyncFails_StepsDownAndHeals(t *testing.T) {
	t.Parallel()
	c, s := singleNode(t)
	n := c.Leader()
	pushed := map[string]engine.ID{}
	for i := range 5 {
		pushOK(t, n, fmt.Sprint("before", i), pushed)
	}
	s.log.Fail(faulttest.Sync, syscall.EIO)
	_, err := raft.Propose[[]engine.PushResult](opCtx(t), n, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "during", Payload: []byte(`{}`)}}})
	if !errors.Is(err, raft.ErrFaulted) && !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("push over a failing fsync = %v, want ErrFaulted or ErrLeadershipLost", err)
	}
	waitHealed(t, "Status reports the faulted log", func() bool {
		st := n.Status()
		return st.Role != "leader" && strings.Contains(st.Fault, "raft log") && strings.Contains(st.Fault, "faulted")
	})
	if _, err := raft.Propose[[]engine.PushResult](opCtx(t), n, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "refused", Payload: []byte(`{}`)}}}); err == nil {
		t.Fatal("push acknowledged by a node whose log cannot sync")
	}
	if _, err := n.Queues(); err != nil {
		t.Errorf("reads on a node with a faulted log: %v", err)
	}
	s.log.Lift()
	waitHealed(t, "the node heals and leads again", func() bool {
		st := n.Status()
		return st.Fault == "" && st.Role == "leader"
	})
	pushOK(t, n, "after", pushed)
	checkAcknowledged(t, n, pushed, nil)
	c.EnsureSame()
}

// The engine cannot apply (its WAL fsync failed when a snapshot synced it):
// the command is answered ErrFaulted, the node says so, and once the disk
// works again the node reopens the engine and applies that command from
// the log: it was committed, and a replica never skips one.
func TestNode_EngineFault_CatchesUpFromTheLog(t *testing.T) {
	t.Parallel()
	c, s := singleNode(t)
	n := c.Leader()
	pushed := map[string]engine.ID{}
	for i := range 5 {
		pushOK(t, n, fmt.Sprint("before", i), pushed)
	}
	s.engine.Fail(faulttest.Sync, syscall.EIO)
	if err := n.Snapshot(); err == nil {
		t.Fatal("snapshot succeeded though the engine's WAL could not be synced")
	}
	res, err := raft.Propose[[]engine.PushResult](opCtx(t), n, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "during", Payload: []byte(`{}`)}}})
	if !errors.Is(err, raft.ErrFaulted) {
		t.Fatalf("push on a faulted engine = %+v, %v; want ErrFaulted", res, err)
	}
	waitHealed(t, "Status reports the faulted engine", func() bool { return strings.Contains(n.Status().Fault, "engine") })
	s.engine.Lift()
	waitHealed(t, "the engine heals by itself", func() bool { return n.Status().Fault == "" })
	qs, err := n.Queues()
	if err != nil || len(qs) != 1 || qs[0].Partitions[0].Next != 6 {
		t.Fatalf("after healing the queue is %+v, %v; want the 5 acknowledged pushes and the one answered ErrFaulted", qs, err)
	}
	pushOK(t, n, "after", pushed)
	checkAcknowledged(t, n, pushed, nil)
	c.EnsureSame()
	c.Stop(0)
	c.Restart(0)
	c.Leader()
	c.EnsureSame()
}

// A node restarted on a full disk comes up: both stores open read-only,
// reads are served, commands fail without hanging, Status says why, and the
// node becomes writable by itself when space returns.
func TestNode_Open_ServesReadsOnFullDisk(t *testing.T) {
	t.Parallel()
	c, s := singleNode(t)
	n := c.Leader()
	pushed := map[string]engine.ID{}
	for i := range 5 {
		pushOK(t, n, fmt.Sprint("before", i), pushed)
	}
	c.Stop(0)
	s.each(func(in *faulttest.Injector) { in.Fail(faulttest.Write|faulttest.Sync, syscall.ENOSPC) })
	n = c.RestartWith(0, faultOptions(t, s))
	checkAcknowledged(t, n, pushed, nil)
	if f := n.Status().Fault; !strings.Contains(f, "read-only") || !strings.Contains(f, "no space left") {
		t.Errorf("Status.Fault on a full disk = %q", f)
	}
	start := time.Now()
	if _, err := raft.Propose[[]engine.PushResult](opCtx(t), n, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "full", Payload: []byte(`{}`)}}}); err == nil {
		t.Fatal("push acknowledged on a full disk")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("a push on a full disk took %v to fail", took)
	}
	s.each(func(in *faulttest.Injector) { in.Lift() })
	waitHealed(t, "the node becomes writable by itself", func() bool {
		st := n.Status()
		return st.Fault == "" && st.Role == "leader"
	})
	pushOK(t, n, "after", pushed)
	checkAcknowledged(t, n, pushed, nil)
	c.EnsureSame()
}
