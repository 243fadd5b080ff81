package cluster_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
)

// openSpreadHosts opens n hosts running groups data groups of r voters
// each, at the current command version (the directory's record of the
// layout needs it).
func openSpreadHosts(t *testing.T, n, groups, r int) *hosts {
	t.Helper()
	c := openHostsOf(t, n, groups, r, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	})
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(r)
	c.spreadSettled()
	return c
}

// layoutRecorded waits until every host's directory records each data
// group's r voters and a leader.
func (c *hosts) layoutRecorded(r int) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("every host's directory to record %d voters and a leader per group", r), func() bool {
		for _, h := range c.h {
			if h == nil {
				continue
			}
			for _, g := range h.Layout().Groups[1:] {
				if len(g.Members) != r || g.Leader == "" {
					return false
				}
			}
		}
		return true
	})
}

// TestHost_GroupsOnROfN: four hosts, four groups of three voters. Each
// host is a voter of three groups and its replica of the fourth applies
// nothing; pushes, pops and acks through every host reach every group.
func TestHost_GroupsOnROfN(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 4, 4, 3)
	l := c.h[0].Layout()
	per := map[string]int{}
	for _, g := range l.Groups[1:] {
		for _, m := range g.Members {
			per[m]++
		}
	}
	for _, p := range c.peers {
		if per[p.ID] != 3 {
			t.Fatalf("node %s is a voter of %d groups, want 3 (layout %+v)", p.ID, per[p.ID], l.Groups)
		}
	}
	if len(l.Nodes) != 4 || len(l.Groups[0].Members) != 4 {
		t.Fatalf("the directory has %d nodes and %d voters, want every node in it: %+v", len(l.Nodes), len(l.Groups[0].Members), l)
	}

	// Two queues per group, each pushed to through every host.
	var queues []string
	for g := uint32(1); g <= 4; g++ {
		for k := range 2 {
			q := fmt.Sprintf("q%d-%d", g, k)
			c.place(q, g)
			queues = append(queues, q)
		}
	}
	for i, h := range c.h {
		var items []engine.PushItem
		for _, q := range queues {
			items = append(items, engine.PushItem{Queue: q, TransactionID: fmt.Sprintf("%s-%d", q, i), Payload: []byte(`{}`)})
		}
		res, err := patientAs[[]engine.PushResult](c, h, engine.PushCmd{Items: items})
		if err != nil {
			t.Fatalf("push through %s: %v", c.peers[i].ID, err)
		}
		for k, r := range res {
			if r.Status != engine.Queued && r.Status != engine.Duplicate { // a retry after an unknown outcome: duplicate
				t.Fatalf("push through %s: item %d (%s) answered %+v", c.peers[i].ID, k, queues[k], r)
			}
		}
	}
	// Each message popped and acked through a host that is not a voter of
	// its group when there is one (the pop forwarded as the edge does,
	// the ack routed by the Host). A pop or an ack whose outcome was
	// unknown (an election on a loaded machine) is asked again: a lost
	// pop's short lease ends and its message comes again, a second ack of
	// a committed message answers success.
	for _, q := range queues {
		g := c.h[0].Placement(q)
		members := l.Groups[g].Members
		var via *cluster.Host
		for i, p := range c.peers {
			if !slices.Contains(members, p.ID) {
				via = c.h[i]
			}
		}
		acked := map[string]bool{}
		for end := time.Now().Add(60 * time.Second); len(acked) < len(c.h); {
			if time.Now().After(end) {
				t.Fatalf("%s: %d of %d messages popped and acked through a non-member", q, len(acked), len(c.h))
			}
			r, err := c.forwarded(via, engine.PopCmd{Queue: q, Batch: 1, Partitions: 1, LeaseSeconds: 1})
			if err != nil && raft.Transient(err) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("pop %s through a non-member: %v", q, err)
			}
			pop := r.Value.(engine.PopResult)
			if len(pop.Messages) == 0 {
				time.Sleep(100 * time.Millisecond) // a lost pop's lease runs out
				continue
			}
			m := pop.Messages[0]
			item := engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Lease: pop.LeaseID, Status: cursor.Completed}
			res, err := raft.Propose[[]engine.AckResult](ctxT(t), via, engine.AckCmd{Items: []engine.AckItem{item}})
			for end := time.Now().Add(30 * time.Second); err != nil && raft.Transient(err) && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
				res, err = raft.Propose[[]engine.AckResult](ctxT(t), via, engine.AckCmd{Items: []engine.AckItem{item}})
			}
			switch {
			case err != nil:
				t.Fatalf("ack %s through a non-member: %v", q, err)
			case len(res) == 1 && res[0].Success:
				acked[m.TransactionID] = true
			}
			// An ack refused (its one-second lease ran out on a slow
			// machine): the message comes again.
		}
	}
	// Only the voters of a group hold a replica of it (cluster/placed.go):
	// a non-member runs none.
	for g := uint32(1); g <= 4; g++ {
		for i, h := range c.h {
			member := slices.Contains(l.Groups[g].Members, c.peers[i].ID)
			switch n := h.Group(g); {
			case member && (n == nil || n.Status().Applied == 0):
				t.Fatalf("group %d on %s, a member: no replica, or one that applied nothing", g, c.peers[i].ID)
			case !member && n != nil:
				t.Fatalf("group %d on %s, not a member: a replica is open (applied %d)", g, c.peers[i].ID, n.Status().Applied)
			}
		}
	}
}

// TestHost_LeadersSpreadOverTheNodes: five hosts, five groups of three
// voters: once settled, every host leads exactly one data group (each
// group's first voter by id at g mod 3, the rule when every node hosts
// every group, would have one host lead three).
func TestHost_LeadersSpreadOverTheNodes(t *testing.T) {
	t.Parallel()
	c := openSpreadHosts(t, 5, 5, 3)
	c.leaders(func(leaders []int) bool {
		led := map[int]int{}
		for _, i := range leaders[1:] {
			led[i]++
		}
		return len(led) == 5
	})
}
