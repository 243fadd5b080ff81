package cluster_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Moves left part way when groups are on R of N nodes: the directory's
// leader, which undoes a stopped mover's move, may host no replica of the
// move's target, and the freeze marks a mover leaves are in groups it may
// not host either.

// spreadMoveHosts opens four hosts of four groups of three voters and
// picks, by the layout settled: the directory's leader d, the one group it
// does not host (far), and a group it hosts (near, where orders is placed).
func spreadMoveHosts(t *testing.T) (c *hosts, d int, near, far uint32) {
	c = openSpreadHosts(t, 4, 4, 3)
	leaders := c.leaders(nil)
	d = leaders[raft.Directory]
	for g := uint32(1); g <= 4; g++ {
		switch {
		case !c.h[d].Hosts(g):
			far = g
		case near == 0:
			near = g
		}
	}
	if far == 0 || near == 0 {
		t.Fatalf("the directory's leader %s hosts every group, or none: %v", c.peers[d].ID, c.describe())
	}
	t.Logf("directory leader %s; orders in group %d; group %d not hosted there", c.peers[d].ID, near, far)
	return c, d, near, far
}

// spreadFixture places orders in group g and pushes n messages of size
// bytes that do not compress (so a move copies them in several chunks).
func spreadFixture(t *testing.T, c *hosts, g uint32, n, size int) {
	t.Helper()
	c.place("orders", g)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < n; i += 10 {
		var items []engine.PushItem
		for k := i; k < min(n, i+10); k++ {
			body := make([]byte, size)
			for j := range body {
				body[j] = "0123456789abcdef"[rng.IntN(16)]
			}
			items = append(items, engine.PushItem{Queue: "orders", TransactionID: fmt.Sprintf("t-%03d", k), Payload: []byte(`"` + string(body) + `"`)})
		}
		r, err := c.again(c.h[i%len(c.h)], engine.PushCmd{Items: items})
		if res, ok := r.Value.([]engine.PushResult); err != nil || !ok || res[0].Status == engine.Rejected {
			t.Fatalf("push: %v %+v", err, r.Value)
		}
	}
}

// TestHost_MoveQueue_MoverKilledTargetHostedElsewhere stops the node
// moving orders after the first chunk of its copy, into the one group the
// directory's leader holds no replica of, under two pushers and two
// consumers. The directory's leader undoes the move once it is older than
// MoveTimeout: it must learn the id of the part copy from the target's
// leader (its own replica of the target is idle, and empty), or the undo
// thaws a target still holding the part copy, which then nothing finds.
// Every replica ends clean, and every acknowledged push is delivered
// exactly once.
func TestHost_MoveQueue_MoverKilledTargetHostedElsewhere(t *testing.T) {
	t.Parallel()
	c, d, near, far := spreadMoveHosts(t)
	spreadFixture(t, c, near, 40, 20_000)
	mover := -1
	for i := range c.h {
		if i != d && c.h[i].Hosts(near) { // it copies from its replica of the source
			mover = i
			break
		}
	}
	var via []*cluster.Host
	for i, h := range c.h {
		if i != mover {
			via = append(via, h)
		}
	}
	load := startMoveLoad(t, c, via[:2], 2, 150, fixtureTxns(40))
	waitFor(t, "50 pushes", func() bool { return load.pushed.Load() >= 50 })

	entered := make(chan struct{})
	cluster.SetMoveHook(c.h[mover], func(_ string, seq uint32) error {
		if seq == 1 {
			close(entered)
			<-cluster.Stopping(c.h[mover]) // held until the node stops
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- c.h[mover].MoveQueue(ctxT(t), "orders", far, nil) }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the move ended before its second chunk: %v", err)
	}
	imported := func() bool {
		for _, h := range via {
			if h.Hosts(far) && len(h.Group(far).Engine().ImportsUnderWay()) > 0 { // Hosts: it holds a replica
				return true
			}
		}
		return false
	}
	waitFor(t, "the target's replicas to hold the first chunk", imported)
	c.stop(mover)
	if err := <-done; err == nil {
		t.Fatal("the move of a stopped node succeeded")
	}
	// moveSettled over every running host: a host reads the target's and
	// the source's state from its own replicas, so those of the hosts that
	// hold them are the ones that count.
	waitForLong(t, "the directory's leader to undo the move", 60*time.Second, func() bool { return moveSettled(via, near, far, 1) })
	for i := range c.h {
		for _, o := range c.outcomes(i) {
			if o.Result == "aborted" {
				t.Logf("undone by %s, which hosts the target: %v", c.peers[i].ID, c.h[i] != nil && c.h[i].Hosts(far))
			}
		}
	}
	load.check(40 + 2*150)
}

// TestHost_MoveQueue_StrayFreezeElsewhereIsUndone freezes orders, with no
// move recorded, in the group the directory's leader does not host: the
// group's own leader thaws it once it has stayed so for MoveTimeout, and
// a push that waited meanwhile lands.
func TestHost_MoveQueue_StrayFreezeElsewhereIsUndone(t *testing.T) {
	t.Parallel()
	c, d, _, far := spreadMoveHosts(t)
	c.place("orders", far)
	r, err := c.again(c.h[d], engine.FreezeQueueCmd{Group: far, Queue: "orders", Epoch: 5})
	if err != nil || r.Err != nil || r.Value != true {
		t.Fatalf("freeze: %v %v %v", r.Value, err, r.Err)
	}
	// An election in the far group (a busy machine) answers no leader
	// before the push is proposed: that is retried. ErrQueueMoving is not:
	// the push must wait for the thaw.
	var res []engine.PushResult
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err = raft.Propose[[]engine.PushResult](ctxT(t), c.h[d], engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "waited", Payload: []byte(`1`)}}})
		elected := !errors.Is(err, raft.ErrNoLeader) && !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipTransfer)
		if elected || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(res) != 1 || res[0].Status != engine.Queued {
		t.Fatalf("push: %v %+v", err, res)
	}
	waitFor(t, "every replica of the group to thaw", func() bool {
		for _, h := range c.h {
			if n := h.Group(far); n != nil && h.Hosts(far) {
				if _, frozen := n.Engine().Frozen("orders"); frozen {
					return false
				}
			}
		}
		return true
	})
}

// TestHost_ReadThroughTheSourceAfterTheFlip: a move has flipped orders to
// the group the directory's leader does not host and thawed it there, and
// its source copy waits to be dropped. The directory's leader hosts the
// source, which still holds orders' partition as it was at the freeze: a
// read of a message pushed since, through it, must go to the target's
// leader (the chaos suite's seed 819321041 read found=false there).
func TestHost_ReadThroughTheSourceAfterTheFlip(t *testing.T) {
	t.Parallel()
	c, d, near, far := spreadMoveHosts(t)
	c.place("orders", near)
	push := func(txn string) engine.PushResult {
		t.Helper()
		r := pushedAgain(t, c.h[d], []engine.PushItem{{Queue: "orders", TransactionID: txn, Payload: []byte(`{"n":1}`)}})[0]
		if r.Status != engine.Queued {
			t.Fatalf("push %s: %+v", txn, r)
		}
		return r
	}
	before := push("before")
	held, release := make(chan struct{}), make(chan struct{})
	cluster.SetDropHook(c.h[d], func(string) {
		close(held)
		<-release
	})
	done := make(chan error, 1)
	go func() { done <- c.h[d].MoveQueue(ctxT(t), "orders", far, nil) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the move ended before its drop: %v", err)
	}
	after := push("after")
	for _, m := range []engine.PushResult{before, after} {
		got, err := c.h[d].MessageAt(m.PartitionID, m.TransactionID)
		if err != nil || got.TransactionID != m.TransactionID {
			t.Errorf("read %s through %s (hosts source %d: %v, target %d: %v): %+v, %v",
				m.TransactionID, c.peers[d].ID, near, c.h[d].Hosts(near), far, c.h[d].Hosts(far), got, err)
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("move: %v", err)
	}
}
