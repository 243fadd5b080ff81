package raft_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// A single node whose membership was broken by a forced join of a voter that
// never answers has no leader; recovered with itself as the only peer, it
// elects itself again and has all its data.
func TestRecover_SingleNodeAfterForcedJoin(t *testing.T) {
	t.Parallel()
	for _, snapshotFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot first %v", snapshotFirst), func(t *testing.T) {
			c := rafttest.MakeClusterWith(t, 1, func(o *raft.Options) {
				o.SnapshotThreshold = 1 << 30 // only the explicit snapshot below
				o.RetentionInterval = 0
			})
			n := c.Leader()
			for i := range 30 {
				push(t, n, "q", fmt.Sprintf("t%d", i))
			}
			if snapshotFirst {
				if err := n.Snapshot(); err != nil {
					t.Fatal(err)
				}
				push(t, n, "q", "after snapshot")
			}
			// The digest covers the applied index too, which recovery moves
			// (it applies the forced join's entry): compare the queues.
			want, err := n.Queues()
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Join("ghost", "ghost", true); err != nil && !errors.Is(err, raft.ErrLeadershipLost) {
				t.Fatalf("forced join: %v", err)
			}
			waitFor(t, "no leader", func() bool { st := n.Status(); return st.Voters == 2 && st.Role != "leader" })
			applied := n.Status().Applied

			if _, err := raft.Recover(rafttest.Options("n1", c.Dir(0)), []raft.Peer{{ID: "n1", Addr: "n1"}}); !errors.Is(err, raft.ErrInUse) {
				t.Fatalf("recover under a running node: %v, want ErrInUse", err)
			}
			c.Stop(0)
			index, err := raft.Recover(rafttest.Options("n1", c.Dir(0)), []raft.Peer{{ID: "n1", Addr: "n1"}})
			if err != nil {
				t.Fatalf("recover: %v", err)
			}
			if index < applied {
				t.Fatalf("recovered at index %d, below the applied %d", index, applied)
			}
			// The snapshot recovery wrote is a reference to the engine, which
			// holds its index: the restart restores nothing.
			if size := latestSnapshotSize(t, c.Dir(0)); size != 13 {
				t.Fatalf("recovery's snapshot is %d bytes, want a 13-byte reference", size)
			}
			n = c.Restart(0)
			if got := n.Status().Applied; got != index {
				t.Fatalf("restarted at applied %d, want the recovered index %d", got, index)
			}
			c.Leader()
			if st := n.Status(); st.Voters != 1 || st.Role != "leader" {
				t.Fatalf("after recovery: %+v, want the single voter leading", st)
			}
			got, err := n.Queues()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
				t.Fatalf("queues changed across the recovery:\n got %+v\nwant %+v", got, want)
			}
			if err := n.Engine().Check(); err != nil {
				t.Fatalf("engine check: %v", err)
			}
			push(t, n, "q", "after recovery")
			pop, err := raft.Propose[engine.PopResult](ctxT(t), n, engine.PopCmd{Queue: "q", Batch: 100})
			wantN := 31
			if snapshotFirst {
				wantN++
			}
			if err != nil || len(pop.Messages) != wantN {
				t.Fatalf("pop after recovery: %d messages, %v; want %d", len(pop.Messages), err, wantN)
			}
		})
	}
}

func TestRecover_RefusesDirWithoutState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := raft.Recover(rafttest.Options("n1", dir), []raft.Peer{{ID: "n1", Addr: "n1"}})
	if !errors.Is(err, raft.ErrNoState) {
		t.Fatalf("recover of an empty dir: %v, want ErrNoState", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("recover of an empty dir created %d entries in it", len(entries))
	}
}

func TestRecover_RefusesConfigurationWithoutVoter(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 1)
	c.Stop(0)
	_, err := raft.Recover(rafttest.Options("n1", c.Dir(0)), []raft.Peer{{ID: "n1", Addr: "n1", NonVoter: true}})
	if err == nil {
		t.Fatal("recover to a configuration without a voter succeeded")
	}
}

func TestReadPeersJSON(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "peers.json")
	os.WriteFile(p, []byte(`[{"id":"n1","address":"10.0.0.1:7001","non_voter":false},{"id":"n2","address":"10.0.0.2:7001","non_voter":true}]`), 0o644)
	got, err := raft.ReadPeersJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []raft.Peer{{ID: "n1", Addr: "10.0.0.1:7001"}, {ID: "n2", Addr: "10.0.0.2:7001", NonVoter: true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	os.WriteFile(p, []byte(`[{"id":"n1","address":"a"},{"id":"n1","address":"b"}]`), 0o644)
	if _, err := raft.ReadPeersJSON(p); err == nil {
		t.Fatal("a peers.json with a duplicate id was accepted")
	}
}
