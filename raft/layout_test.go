package raft_test

import (
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// laidOut reports whether l lists the servers ids at http-<id>, live
// unless down, and groups each with every id as a member and leaders[g]
// as its leader.
func laidOut(l raft.Layout, ids []string, down string, groups []uint32, leaders map[uint32]string) bool {
	if len(l.Nodes) != len(ids) || len(l.Groups) != len(groups) {
		return false
	}
	for i, n := range l.Nodes {
		if n.ID != ids[i] || n.HTTP != "http-"+ids[i] || n.Live != (n.ID != down) {
			return false
		}
	}
	for i, g := range l.Groups {
		if g.ID != groups[i] || !slices.Equal(g.Members, ids) || g.Leader != leaders[g.ID] {
			return false
		}
	}
	return true
}

func TestNode_LayoutListsTheServersTheirLivenessAndTheLeader(t *testing.T) {
	t.Parallel()
	net := &inProcess{nodes: map[string]*raft.Node{}}
	c := rafttest.MakeClusterWith(t, 3, func(o *raft.Options) {
		o.Versions, o.Forward, o.VersionInterval = net, net, 50*time.Millisecond
	})
	for _, n := range c.Nodes {
		net.set(n)
	}
	ids := []string{"n1", "n2", "n3"}
	want := func(nodes []*raft.Node, down string) {
		t.Helper()
		waitFor(t, "every node's layout", func() bool {
			leader := map[uint32]string{1: nodes[0].Status().Leader}
			for _, n := range nodes {
				if !laidOut(n.Layout(), ids, down, []uint32{1}, leader) {
					return false
				}
			}
			return true
		})
	}
	want(c.Nodes, "")
	// A stopped server stays a member, no longer live.
	net.drop("http-n3")
	c.Stop(2)
	want(c.Nodes[:2], "n3")
}
