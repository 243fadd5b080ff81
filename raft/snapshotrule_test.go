package raft_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// TestNode_AnsweringASnapshotItHoldsKeepsTheConfiguration: a follower sent
// a snapshot whose last entry its log already holds answers it without
// installing it (Raft's InstallSnapshot rule 6), so the configuration
// entries it appended after that entry stand. hashicorp/raft alone installs
// it and sets the configuration back to the snapshot's: a joiner sent the
// same snapshot twice, the second time after the entry that made it a
// voter, stayed a voter on the leader's books but not on its own, for good
// (chaos seed 984274746). Here the leader snapshots, then adds a non-voter
// (a configuration entry after the snapshot), and the follower is sent the
// leader's snapshot again, as the leader's replication would.
func TestNode_AnsweringASnapshotItHoldsKeepsTheConfiguration(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	leader := c.Leader()
	for i := range 5 {
		push(t, leader, "q", fmt.Sprintf("t%d", i))
	}
	if err := leader.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := leader.JoinNonvoter("n9", "n9", true); err != nil {
		t.Fatalf("add a non-voter: %v", err)
	}
	push(t, leader, "q", "after")
	follower := c.Followers()[0]
	fi := c.Index(follower)
	hasN9 := func() bool {
		peers, err := follower.Configuration()
		return err == nil && slices.ContainsFunc(peers, func(p raft.Peer) bool { return p.ID == "n9" && p.NonVoter })
	}
	for deadline := time.Now().Add(30 * time.Second); !hasN9() || follower.Applied() < leader.Applied(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower did not take the non-voter and catch up (applied %d of %d)", follower.Applied(), leader.Applied())
		}
	}
	applied := follower.Applied()

	meta, rc, err := leader.OpenLatestSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if slices.ContainsFunc(meta.Configuration.Servers, func(s hraft.Server) bool { return s.ID == "n9" }) {
		t.Fatalf("the leader's snapshot at %d already lists n9: the test needs one from before it joined", meta.Index)
	}
	_, fake := hraft.NewInmemTransport("fake")
	fake.Connect(c.Transport(fi).LocalAddr(), c.Transport(fi))
	req := &hraft.InstallSnapshotRequest{
		RPCHeader:          hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(leader.Status().ID), Addr: []byte(c.Transport(c.Index(leader)).LocalAddr())},
		SnapshotVersion:    meta.Version,
		Term:               follower.Term(),
		LastLogIndex:       meta.Index,
		LastLogTerm:        meta.Term,
		Configuration:      hraft.EncodeConfiguration(meta.Configuration),
		ConfigurationIndex: meta.ConfigurationIndex,
		Size:               meta.Size,
	}
	var resp hraft.InstallSnapshotResponse
	if err := fake.InstallSnapshot(hraft.ServerID(follower.Status().ID), c.Transport(fi).LocalAddr(), req, &resp, rc); err != nil {
		t.Fatalf("install snapshot: %v", err)
	}
	if !resp.Success || resp.Term != req.Term {
		t.Fatalf("answer %+v; want success in term %d", resp, req.Term)
	}
	if !hasN9() {
		peers, _ := follower.Configuration()
		t.Fatalf("after a snapshot at %d it held, the follower's configuration is %+v: the non-voter added at a later entry is gone", meta.Index, peers)
	}
	if got := follower.Applied(); got < applied {
		t.Fatalf("applied %d, down from %d", got, applied)
	}
	push(t, leader, "q", "later")
	for deadline := time.Now().Add(30 * time.Second); follower.Applied() < leader.Applied(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follower stopped following: applied %d of %d", follower.Applied(), leader.Applied())
		}
	}
	c.EnsureSame()
}
