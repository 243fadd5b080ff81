package raft_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// waitFor polls cond every 10 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 20s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string { return rafttest.FreeAddrs(t, 1)[0] }

func TestNode_Join_RefusesUnreachableUnlessForced(t *testing.T) {
	t.Parallel()
	addr := rafttest.FreeAddrs(t, 1)[0]
	n := rafttest.OpenTCP(t, "n1", t.TempDir(), addr, func(o *raft.Options) { o.Bootstrap = true })
	rafttest.WaitLeader(t, n)
	push(t, n, "q", "before")
	ghost := closedAddr(t)

	err := n.Join("ghost", ghost, false)
	if !errors.Is(err, raft.ErrQuorumRisk) || !strings.Contains(err.Error(), "force") {
		t.Fatalf("join of an unreachable address: %v, want ErrQuorumRisk saying force overrides it", err)
	}
	if st := n.Status(); st.Voters != 1 || st.Role != "leader" {
		t.Fatalf("after a refused join: %+v, want the single voter still leading", st)
	}
	push(t, n, "q", "after refusal")

	// Forced, the voter is added, and the node loses its quorum as the
	// refusal said it would.
	if err := n.Join("ghost", ghost, true); err != nil && !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("forced join: %v", err)
	}
	waitFor(t, "2 voters and no leader", func() bool {
		st := n.Status()
		return st.Voters == 2 && st.Role != "leader"
	})
}

func TestNode_Join_RefusedWithoutNetworkTransport(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 1)
	err := c.Leader().Join("n2", "127.0.0.1:1", false)
	if !errors.Is(err, raft.ErrQuorumRisk) || !strings.Contains(err.Error(), "no network transport") {
		t.Fatalf("join on a node without a network transport: %v, want ErrQuorumRisk saying so", err)
	}
	if got := c.Leader().Status().Voters; got != 1 {
		t.Fatalf("voters = %d, want 1", got)
	}
}

func TestNode_Join_AddsReachableNodeOnce(t *testing.T) {
	t.Parallel()
	addrs := rafttest.FreeAddrs(t, 2)
	base := t.TempDir()
	n1 := rafttest.OpenTCP(t, "n1", filepath.Join(base, "n1"), addrs[0], func(o *raft.Options) { o.Bootstrap = true })
	rafttest.WaitLeader(t, n1)
	push(t, n1, "q", "before join")
	n2 := rafttest.OpenTCP(t, "n2", filepath.Join(base, "n2"), addrs[1], nil)
	if err := n1.Join("n2", addrs[1], false); err != nil {
		t.Fatalf("join of a running node: %v", err)
	}
	rafttest.WaitLeader(t, n1, n2)
	push(t, n1, "q", "after join")
	rafttest.WaitApplied(t, n1.Status().Applied, n1, n2)
	if got := n2.Status().Voters; got != 2 {
		t.Fatalf("n2 sees %d voters, want 2", got)
	}
	// Joining again is a no-op: nothing is appended to the log. On a busy
	// machine the two nodes may hold an election meanwhile (a transient
	// error, and the new leader's own entry moves the index): try again
	// then, within a bound.
	for deadline := time.Now().Add(30 * time.Second); ; {
		leader := rafttest.WaitLeader(t, n1, n2)
		st := leader.Status()
		err := leader.Join("n2", addrs[1], false)
		if err == nil {
			err = leader.Join("n2", addrs[1], true)
		}
		after := leader.Status()
		if (err != nil && raft.Transient(err)) || after.Term != st.Term || after.Role != "leader" {
			if time.Now().After(deadline) {
				t.Fatalf("no quiet moment for a second join in 30 s: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("second join: %v", err)
		}
		if after.Applied != st.Applied {
			t.Fatalf("a repeated join moved the applied index from %d to %d", st.Applied, after.Applied)
		}
		break
	}
}

// stopFollower stops one follower of c and waits until the leader knows
// its heartbeats fail.
func stopFollower(t *testing.T, c *rafttest.Cluster) (leader, stopped, alive *raft.Node) {
	t.Helper()
	leader = c.Leader()
	fs := c.Followers()
	stopped, alive = fs[0], fs[1]
	c.Stop(c.Index(stopped))
	waitFor(t, "the leader to see 2 live voters", func() bool { return leader.Status().LiveVoters == 2 })
	return leader, stopped, alive
}

func TestNode_Leave_RefusesLosingQuorum(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	if got := c.Leader().Status().LiveVoters; got != 3 {
		t.Fatalf("live voters of a healthy cluster = %d, want 3", got)
	}
	leader, stopped, alive := stopFollower(t, c)
	aliveID, stoppedID := alive.Status().ID, stopped.Status().ID

	err := leader.Leave(aliveID, false)
	if !errors.Is(err, raft.ErrQuorumRisk) || !strings.Contains(err.Error(), "force") {
		t.Fatalf("leave of a live voter with another voter down: %v, want ErrQuorumRisk", err)
	}
	if st := leader.Status(); st.Voters != 3 || st.Role != "leader" {
		t.Fatalf("after a refused leave: %+v", st)
	}
	push(t, leader, "q", "still writable")

	// Removing the dead voter leaves two live voters of two: allowed.
	if err := leader.Leave(stoppedID, false); err != nil {
		t.Fatalf("leave of the stopped voter: %v", err)
	}
	waitFor(t, "2 voters on both live nodes", func() bool {
		return leader.Status().Voters == 2 && alive.Status().Voters == 2
	})
	push(t, leader, "q", "after leave")
}

func TestNode_Leave_ForcedProceeds(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	leader, _, alive := stopFollower(t, c)
	err := leader.Leave(alive.Status().ID, true)
	if err != nil && !errors.Is(err, raft.ErrLeadershipLost) {
		t.Fatalf("forced leave: %v", err)
	}
	// The change went through, and the cluster lost its quorum as the
	// unforced refusal said it would.
	waitFor(t, "the old leader to hold 2 voters and lead no more", func() bool {
		st := leader.Status()
		return st.Voters == 2 && st.Role != "leader"
	})
}

func TestNode_Leave_RefusesTheLastVoter(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 1)
	n := c.Leader()
	for _, force := range []bool{false, true} {
		err := n.Leave(n.Status().ID, force)
		if !errors.Is(err, raft.ErrQuorumRisk) || !strings.Contains(err.Error(), "last voter") {
			t.Fatalf("leave of the last voter (force %v): %v, want ErrQuorumRisk", force, err)
		}
	}
	if st := n.Status(); st.Voters != 1 || st.Role != "leader" {
		t.Fatalf("after refusals: %+v", st)
	}
	push(t, n, "q", "still writable")
}

// Removing a server the configuration does not hold answers
// ErrUnknownMember (the edge's 404 unknown_member) and commits nothing.
func TestNode_Leave_NotAMemberIsRefused(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 1)
	n := c.Leader()
	before := n.Status()
	for _, force := range []bool{false, true} {
		if err := n.Leave("never-joined", force); !errors.Is(err, raft.ErrUnknownMember) || !strings.Contains(err.Error(), "never-joined") {
			t.Fatalf("leave of a server never in the configuration (force %v): %v, want ErrUnknownMember naming it", force, err)
		}
	}
	if st := n.Status(); st.Applied != before.Applied || st.Voters != 1 {
		t.Fatalf("after leaves of a non-member: applied %d voters %d, want %d and 1", st.Applied, st.Voters, before.Applied)
	}
}

// TestNode_JoinNonvoter_ThenPromoted: a node joins as a non-voter, which
// receives the log but counts in no quorum: stopped, the leader still
// commits alone. Promoted by Join, it is a voter. Joining again as a
// non-voter changes nothing, even a voter's suffrage; an address that
// accepts no Raft connection is refused.
func TestNode_JoinNonvoter_ThenPromoted(t *testing.T) {
	t.Parallel()
	addrs := rafttest.FreeAddrs(t, 2)
	base := t.TempDir()
	n1 := rafttest.OpenTCP(t, "n1", filepath.Join(base, "n1"), addrs[0], func(o *raft.Options) { o.Bootstrap = true })
	rafttest.WaitLeader(t, n1)
	push(t, n1, "q", "before join")
	if err := n1.JoinNonvoter("ghost", closedAddr(t), false); !errors.Is(err, raft.ErrQuorumRisk) {
		t.Fatalf("non-voter join of an unreachable address: %v, want it refused", err)
	}
	n2 := rafttest.OpenTCP(t, "n2", filepath.Join(base, "n2"), addrs[1], nil)
	if err := n1.JoinNonvoter("n2", addrs[1], false); err != nil {
		t.Fatalf("non-voter join: %v", err)
	}
	push(t, n1, "q", "after join")
	rafttest.WaitApplied(t, n1.Status().Applied, n1, n2)
	if st := n1.Status(); st.Voters != 1 || n2.Status().Role != "follower" {
		t.Fatalf("after a non-voter join: n1 %+v, n2 role %s; want one voter and n2 following", st, n2.Status().Role)
	}
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}
	push(t, n1, "q", "with the non-voter down") // one voter of one: still a quorum

	n2 = rafttest.OpenTCP(t, "n2", filepath.Join(base, "n2"), addrs[1], nil)
	rafttest.WaitApplied(t, n1.Status().Applied, n1, n2)
	if err := n1.Join("n2", addrs[1], false); err != nil {
		t.Fatalf("promotion: %v", err)
	}
	waitFor(t, "two voters", func() bool { return n1.Status().Voters == 2 && n2.Status().Voters == 2 })
	leader := rafttest.WaitLeader(t, n1, n2)
	if err := leader.JoinNonvoter("n2", addrs[1], false); err != nil {
		t.Fatalf("non-voter join of a voter: %v", err)
	}
	if got := leader.Status().Voters; got != 2 {
		t.Fatalf("a non-voter join of a voter left %d voters, want 2", got)
	}
	push(t, leader, "q", "after promotion")
}
