package relay_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server/relay"
)

// hostOfThree is one node holding three groups on one store, as a
// cluster.Host holds them: the directory (0) and group 1 with this node
// their only voter, so it leads them, and group 2 founded with two voters
// that never come, so it never elects a leader (a data group that lost its
// quorum). It returns the node's replicas by group.
func hostOfThree(t *testing.T) map[uint32]*raft.Node {
	t.Helper()
	dir := t.TempDir()
	addrs := rafttest.FreeAddrs(t, 3)
	o := rafttest.Options("n1", filepath.Join(dir, "n1"))
	o.RaftAddr = addrs[0]
	o.HTTPAddr = "http-n1"
	o.RetentionInterval = 0
	if !testing.Verbose() {
		o.Logger = slog.New(slog.DiscardHandler) // group 2's votes, refused
	}
	store, err := raft.OpenStore(o, []uint32{raft.Directory, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	alone := o
	alone.Bootstrap = true
	nodes := map[uint32]*raft.Node{}
	for _, g := range []uint32{raft.Directory, 1} {
		if nodes[g], err = store.OpenGroup(alone, g); err != nil {
			t.Fatalf("open group %d: %v", g, err)
		}
	}
	store.Serve(nodes[raft.Directory])
	// The two other founders' addresses are free ports no one listens on.
	lost := o
	lost.Peers = []raft.Peer{{ID: "n1", Addr: addrs[0]}, {ID: "n2", Addr: addrs[1]}, {ID: "n3", Addr: addrs[2]}}
	if nodes[2], err = store.OpenGroup(lost, 2); err != nil {
		t.Fatalf("open group 2: %v", err)
	}
	rafttest.WaitLeader(t, nodes[raft.Directory])
	rafttest.WaitLeader(t, nodes[1])
	return nodes
}

// A read of some groups (BarrierGroups) waits for those alone: with group 2
// leaderless, a read of the directory then group 1 returns at once, its
// second step named once the first has caught up, while a read of every
// group, or one whose second step names group 2, answers Unavailable after
// ReadIndexTimeout. A stale read of group 1 does not wait for a floor this
// node holds in group 2.
func TestReads_BarrierGroups_WaitsForTheNamedGroupsAlone(t *testing.T) {
	t.Parallel() // waits out ReadIndexTimeout
	nodes := hostOfThree(t)
	replicas := []*raft.Node{nodes[raft.Directory], nodes[1], nodes[2]}
	var asked atomic.Int64
	reads, set := (&group{}).readsOf(func() []*raft.Node { return replicas }, func(o *relay.ReadOptions) {
		o.Ask = func(context.Context, *raft.Node) (uint64, error) {
			asked.Add(1)
			return 0, raft.ErrNoLeader // as the server's ask, when the group knows no leader
		}
	})

	// Both waits for group 2 run meanwhile: each takes ReadIndexTimeout.
	all := make(chan error, 1)
	go func() { all <- reads.Barrier(false) }()
	second := make(chan error, 1)
	go func() {
		second <- reads.BarrierGroups(false, []uint32{raft.Directory}, func() []uint32 { return []uint32{2} })
	}()

	start := time.Now()
	var thenAt time.Duration
	called := 0
	err := reads.BarrierGroups(false, []uint32{raft.Directory}, func() []uint32 {
		called++
		thenAt = time.Since(start)
		return []uint32{1}
	})
	if took := time.Since(start); err != nil || took > relay.ReadIndexTimeout/2 {
		t.Errorf("BarrierGroups(directory, then group 1) = %v after %v, want nil well before ReadIndexTimeout (%v)",
			err, took, relay.ReadIndexTimeout)
	}
	if called != 1 {
		t.Errorf("the second step was named %d times, want once (after the directory, at %v)", called, thenAt)
	}
	if err := reads.BarrierGroups(false, []uint32{1}, nil); err != nil {
		t.Errorf("BarrierGroups(group 1) = %v, want nil", err)
	}

	nodes[2].NoteWritten(nodes[2].Applied() + 100) // a floor group 2 never reaches
	stale := time.Now()
	if err := reads.BarrierGroups(true, []uint32{raft.Directory}, func() []uint32 { return []uint32{1} }); err != nil {
		t.Errorf("stale BarrierGroups = %v, want nil", err)
	}
	if took := time.Since(stale); took > relay.ReadIndexTimeout/2 {
		t.Errorf("stale BarrierGroups of groups 0 and 1 took %v: it waited for group 2's floor", took)
	}
	if got := counter(set, `queen_applied_wait_timeouts_total`); got != 0 {
		t.Errorf("queen_applied_wait_timeouts_total = %d after a stale read of groups 0 and 1, want 0", got)
	}

	for what, ch := range map[string]chan error{"Barrier (every group)": all, "BarrierGroups(directory, then group 2)": second} {
		if err := receive(t, ch, what); !errors.Is(err, errUnavailable) {
			t.Errorf("%s = %v, want Unavailable: group 2 has no leader", what, err)
		}
	}
	if asked.Load() == 0 {
		t.Error("no read asked group 2's leader, which it does not lead")
	}
}
