package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// directoryVoters is the directory's voters and non-voters as h knows them.
func directoryVoters(h *cluster.Host) (voters, nonvoters []string) {
	conf, err := h.Group(raft.Directory).Configuration()
	if err != nil {
		return nil, nil
	}
	for _, p := range conf {
		if p.NonVoter {
			nonvoters = append(nonvoters, p.ID)
		} else {
			voters = append(voters, p.ID)
		}
	}
	slices.Sort(voters)
	slices.Sort(nonvoters)
	return voters, nonvoters
}

// TestHost_DirectoryKeepsItsMostVoters: the directory takes at most
// DirectoryVoters voters (three here), the other nodes follow it as
// non-voters and hold replicas as any node. Four founders: the directory's
// leader demotes one; a fifth host that joins stays a non-voter; a voter
// lost for ReplaceAfter is replaced by promoting the non-voter with the
// lowest id. The voters /health lists (Members) are every group's, so they
// name a non-voter that is a data group's voter. Nothing acknowledged is
// lost under load throughout.
func TestHost_DirectoryKeepsItsMostVoters(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 4, 4, 3, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	}, func(c *hosts) {
		c.replaceAfter = 2 * time.Second
		c.tune = func(o *cluster.HostOptions) { o.DirectoryVoters = 3 }
	})
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(3)
	queues := []string{"a", "b", "c", "d"}
	for g, q := range queues {
		c.place(q, uint32(g+1))
	}
	done := pushLoadRunning(t, c, queues)

	// Four founders, at most three voters: one is demoted, never the leader.
	var voters, nonvoters []string
	waitForLong(t, "the directory to demote one of four voters", 30*time.Second, func() bool {
		voters, nonvoters = directoryVoters(c.running())
		return len(voters) == 3 && len(nonvoters) == 1
	})
	demoted := nonvoters[0]
	t.Logf("directory voters %v, non-voters %v", voters, nonvoters)
	per := c.spread(3, "")
	if per[demoted] == 0 {
		t.Fatalf("the directory non-voter %s holds no replica: %v", demoted, per)
	}
	for i, h := range c.h {
		if !slices.Contains(h.Members(), demoted) {
			t.Fatalf("%s's members %v lack %s, a data group's voter", c.peers[i].ID, h.Members(), demoted)
		}
	}

	// A fifth joins: the directory has its voters, so it joins as a
	// non-voter, and it takes replicas.
	j := c.join()
	joiner := c.peers[j].ID
	if c.running().Voter(raft.Directory, joiner) {
		t.Fatalf("%s joined a directory of three voters as a voter", joiner)
	}
	per = c.spread(3, "")
	if per[joiner] == 0 {
		t.Fatalf("the joiner %s holds no replica: %v", joiner, per)
	}
	voters, nonvoters = directoryVoters(c.running())
	if len(voters) != 3 || !slices.Contains(nonvoters, joiner) {
		t.Fatalf("after the join: voters %v, non-voters %v", voters, nonvoters)
	}

	// A voter that is not the directory's leader is lost: its replicas are
	// re-created, it is removed, and the non-voter with the lowest id takes
	// its vote.
	victim := -1
	for i, p := range c.peers {
		if slices.Contains(voters, p.ID) && c.h[i].Group(raft.Directory).Status().Role != "leader" {
			victim = i
			break
		}
	}
	lost := c.peers[victim].ID
	c.stop(victim)
	c.spread(3, lost)
	want := slices.Min(append(slices.Clone(nonvoters), "~"))
	waitForLong(t, "the directory to promote a non-voter in the lost voter's place", 60*time.Second, func() bool {
		v, nv := directoryVoters(c.running())
		return len(v) == 3 && !slices.Contains(v, lost) && slices.Contains(v, want) &&
			!slices.Contains(nv, lost) && len(nv) == len(nonvoters)-1
	})
	voters, nonvoters = directoryVoters(c.running())
	t.Logf("after losing %s: directory voters %v, non-voters %v", lost, voters, nonvoters)

	acked := done()
	checkAllStored(t, acked, storedVia(t, c, c.running(), queues))
	if _, err := c.again(c.running(), engine.ConfigureCmd{Queue: "after"}); err != nil {
		t.Fatalf("a directory write after the changes: %v", err)
	}
}

// TestHost_ADeadDirectoryVoterHandsItsVoteToALiveNode: with no
// ReplaceAfter, a directory voter that stops answering for VoterSwapAfter
// is demoted and the live non-voter takes its vote, so the directory keeps
// its voters live; started again, the old voter follows as a non-voter.
func TestHost_ADeadDirectoryVoterHandsItsVoteToALiveNode(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 4, 4, 3, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	}, func(c *hosts) {
		c.tune = func(o *cluster.HostOptions) { o.DirectoryVoters, o.VoterSwapAfter = 3, time.Second }
	})
	c.relayInProcess()
	c.leaders(nil)
	c.layoutRecorded(3)
	var voters, nonvoters []string
	waitForLong(t, "the directory to demote one of four voters", 30*time.Second, func() bool {
		voters, nonvoters = directoryVoters(c.running())
		return len(voters) == 3 && len(nonvoters) == 1
	})
	standby := nonvoters[0]
	victim := -1
	for i, p := range c.peers {
		if slices.Contains(voters, p.ID) && c.h[i].Group(raft.Directory).Status().Role != "leader" {
			victim = i
			break
		}
	}
	dead := c.peers[victim].ID
	c.stop(victim)
	waitForLong(t, "the live non-voter to take the dead voter's vote", 60*time.Second, func() bool {
		v, nv := directoryVoters(c.running())
		return len(v) == 3 && slices.Contains(v, standby) && slices.Equal(nv, []string{dead})
	})
	c.start(victim)
	c.relayInProcess()
	waitForLong(t, "the old voter to follow the directory again", 30*time.Second, func() bool {
		v, nv := directoryVoters(c.h[victim])
		return len(v) == 3 && slices.Equal(nv, []string{dead}) && c.h[victim].Group(raft.Directory).Leader() != ""
	})
	// Back, the old voter may be the voter a data group's leadership is
	// spread to: until the hand-overs are done, a group's leader refuses
	// writes while it hands over (a transfer in progress), and one that
	// fails under load is tried again. The write is made once every group
	// is led by its wanted voter, and asked again while it is refused.
	c.spreadSettled()
	if _, err := c.again(c.h[victim], engine.ConfigureCmd{Queue: "after"}); err != nil {
		t.Fatalf("a directory write through the old voter: %v", err)
	}
}

// TestHost_AFounderRestartedBeforeRIsRecordedKeepsIt: R is recorded in the
// directory only once the cluster version allows it (never, here: these
// hosts read no versions). A founder restarted before then, given no
// --replicas as a restart is, still knows R from its store; before, it took
// R for 0 and a cluster whose founders restarted early ran every group on
// every node for good (TestChaos_Joins seed 639236697).
func TestHost_AFounderRestartedBeforeRIsRecordedKeepsIt(t *testing.T) {
	t.Parallel()
	c := openHostsOf(t, 3, 2, 3, nil)
	c.leaders(nil)
	if r := c.h[0].ReplicaCount(); r != 3 {
		t.Fatalf("a founder's R %d, want 3", r)
	}
	c.stop(0)
	c.replicas = 0 // a restart gives no --replicas
	h := c.start(0)
	if r := h.ReplicaCount(); r != 3 {
		t.Fatalf("a founder restarted before R was recorded has R %d, want the 3 it started the cluster with", r)
	}
}
