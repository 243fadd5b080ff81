// Package rafttest runs real Raft nodes on raft's in-memory transport for
// tests: clusters that can be partitioned, healed and compared. Import it only
// from _test.go files.
package rafttest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft"
)

// Cluster is a set of nodes connected by in-memory transports.
type Cluster struct {
	T          testing.TB
	Nodes      []*raft.Node
	ids        []string
	dirs       []string
	transports []*hraft.InmemTransport
}

// Options returns node options tuned for fast tests.
func Options(id, dir string) raft.Options {
	o := raft.DefaultOptions()
	o.ID, o.Dir = id, dir
	o.Engine = enginetest.Options()
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// 400 ms, not 100: tests run in parallel beside other race-built test
	// binaries on two cores, where a follower that misses 100 ms of
	// heartbeats (a leader not scheduled) is common: with 100 ms, a make
	// test run beside two CPU burners had five-group hosts stuck as
	// candidates for 20 s ("groups did not settle") and sixteen raft tests
	// failing.
	o.HeartbeatTimeout = 400 * time.Millisecond
	o.ElectionTimeout = 400 * time.Millisecond
	o.LeaderLeaseTimeout = 400 * time.Millisecond
	o.ApplyTimeout = 5 * time.Second
	o.SnapshotInterval = 50 * time.Millisecond
	o.RaftLogSync = false // tests never lose power
	// Fixtures open founders one after another; the founders' round
	// (raft/identity.go) has tests of its own that open them together.
	o.AwaitFounders = false
	return o
}

// MakeCluster starts n voters that bootstrap together and waits for a
// leader. Nodes are closed at cleanup.
func MakeCluster(t testing.TB, n int) *Cluster {
	return MakeClusterWith(t, n, nil)
}

// MakeClusterWith is MakeCluster with a hook to adjust each node's options.
func MakeClusterWith(t testing.TB, n int, adjust func(*raft.Options)) *Cluster {
	t.Helper()
	c := &Cluster{T: t}
	base := t.TempDir()
	var peers []raft.Peer
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		addr, tr := hraft.NewInmemTransport(hraft.ServerAddress(id))
		c.ids = append(c.ids, id)
		c.dirs = append(c.dirs, filepath.Join(base, id))
		c.transports = append(c.transports, tr)
		peers = append(peers, raft.Peer{ID: id, Addr: string(addr)})
	}
	c.connectAll()
	for i := range c.ids {
		o := Options(c.ids[i], c.dirs[i])
		o.Transport = c.transports[i]
		o.Peers = peers
		o.HTTPAddr = "http-" + c.ids[i]
		if adjust != nil {
			adjust(&o)
		}
		node, err := raft.Open(o)
		if err != nil {
			t.Fatalf("open node %s: %v", c.ids[i], err)
		}
		c.Nodes = append(c.Nodes, node)
	}
	t.Cleanup(func() {
		for _, node := range c.Nodes {
			if node != nil {
				node.Close()
			}
		}
	})
	c.Leader()
	return c
}

// Transport is node i's in-memory transport, for a test that sends it an
// RPC of its own.
func (c *Cluster) Transport(i int) *hraft.InmemTransport { return c.transports[i] }

func (c *Cluster) connectAll() {
	for i, a := range c.transports {
		for j, b := range c.transports {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
}

// Leader waits up to 10 s for a leader every connected node agrees on and
// returns it.
func (c *Cluster) Leader() *raft.Node {
	c.T.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, node := range c.Nodes {
			if node != nil && node.Status().Role == "leader" {
				return node
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.T.Fatalf("no leader within 10s")
	return nil
}

// Followers returns the nodes that are not the leader.
func (c *Cluster) Followers() []*raft.Node {
	leader := c.Leader()
	var out []*raft.Node
	for _, node := range c.Nodes {
		if node != nil && node != leader {
			out = append(out, node)
		}
	}
	return out
}

// Index returns the position of a node in Nodes.
func (c *Cluster) Index(node *raft.Node) int {
	for i, x := range c.Nodes {
		if x == node {
			return i
		}
	}
	return -1
}

// Partition cuts node i off from every other node.
func (c *Cluster) Partition(i int) {
	for j, other := range c.transports {
		if i != j {
			c.transports[i].Disconnect(other.LocalAddr())
			other.Disconnect(c.transports[i].LocalAddr())
		}
	}
}

// Dir is node i's data directory.
func (c *Cluster) Dir(i int) string { return c.dirs[i] }

// Heal reconnects every node.
func (c *Cluster) Heal() { c.connectAll() }

// Stop closes node i (its data stays).
func (c *Cluster) Stop(i int) {
	c.T.Helper()
	if err := c.Nodes[i].Close(); err != nil {
		c.T.Fatalf("close %s: %v", c.ids[i], err)
	}
	c.Nodes[i] = nil
}

// Restart reopens a stopped node i on its data.
func (c *Cluster) Restart(i int) *raft.Node {
	c.T.Helper()
	return c.RestartWith(i, nil)
}

// RestartWith is Restart with a hook to adjust the node's options.
func (c *Cluster) RestartWith(i int, adjust func(*raft.Options)) *raft.Node {
	c.T.Helper()
	node, err := c.TryRestartWith(i, adjust)
	if err != nil {
		c.T.Fatalf("restart %s: %v", c.ids[i], err)
	}
	return node
}

// TryRestartWith is RestartWith that returns raft.Open's error (the node
// stays stopped) instead of failing the test.
func (c *Cluster) TryRestartWith(i int, adjust func(*raft.Options)) (*raft.Node, error) {
	o := Options(c.ids[i], c.dirs[i])
	o.Transport = c.transports[i]
	o.HTTPAddr = "http-" + c.ids[i]
	if adjust != nil {
		adjust(&o)
	}
	node, err := raft.Open(o)
	if err != nil {
		return nil, err
	}
	c.Nodes[i] = node
	return node, nil
}

// EnsureSame waits until every running node has applied the leader's index
// and then requires identical engine digests and a clean engine.Check.
func (c *Cluster) EnsureSame() {
	c.T.Helper()
	EnsureSame(c.T, c.Nodes...)
}

// EnsureSame checks that the replicas of one group (nil entries skipped)
// hold the same state: it waits, up to 20 s, for a barrier on their leader
// and for every replica to apply as far, then compares engine digests and
// runs engine.Check on each.
func EnsureSame(t testing.TB, nodes ...*raft.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A barrier fails while leadership moves (a healing node may hand it
	// over): take the leader again and retry until the deadline.
	var leader *raft.Node
	for leader == nil {
		for _, node := range nodes {
			if node != nil && node.Status().Role == "leader" && node.Barrier(ctx) == nil {
				leader = node
				break
			}
		}
		if leader == nil {
			if ctx.Err() != nil {
				t.Fatalf("no leader passed a barrier within 20s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	want := leader.Status().Applied
	for _, node := range nodes {
		if node == nil {
			continue
		}
		for node.Status().Applied < want {
			if ctx.Err() != nil {
				t.Fatalf("%s applied %d, leader %d", node.Status().ID, node.Status().Applied, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ref, err := leader.Engine().Digest()
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	for _, node := range nodes {
		if node == nil {
			continue
		}
		if err := node.Engine().Check(); err != nil {
			t.Errorf("%s: engine.Check: %v", node.Status().ID, err)
		}
		if node.Status().Applied != want {
			continue // it moved on meanwhile; digests would differ by design
		}
		d, err := node.Engine().Digest()
		if err != nil {
			t.Fatalf("digest: %v", err)
		}
		if d != ref {
			t.Errorf("%s: engine digest differs from the leader's", node.Status().ID)
		}
	}
}
