package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/servertest"
)

// A write through a follower is answered once its group's leader answers
// it; what the follower reads next must see it all the same (issue 41).
// hashicorp/raft tells a follower that an entry committed only with the
// entries its leader sends next, or CommitTimeout later in a quiet group:
// these tests raise CommitTimeout past every wait of the broker (5 s), so
// a follower that relied on it would not have learnt its write in time,
// and the write would be missing from what it read.

// quietCommits is the Hosts' options of a cluster whose leaders tell their
// followers a commit only with their next entries: CommitTimeout a minute,
// and none of the leaders' periodic entries (retention sweeps in every
// group, load reports in the directory).
func quietCommits(o *cluster.HostOptions) {
	o.Node.CommitTimeout = time.Minute
	o.Node.RetentionInterval = 0
	o.LoadInterval = time.Hour
}

// TestGroups_APushToANewQueueThroughAFollowerPlacesItThere: a queue's
// first push through a follower of the directory places the queue with a
// directory command relayed to the directory's leader, and the follower
// routes the push, and every later request for the queue, by its own
// replica of the directory. So it waits until that replica has applied the
// placement, which the directory's leader publishes (cluster.Host.ProposeEntry
// appends a barrier), so that the wait ends within a round trip. Without
// the publish the follower's replica would not apply the placement before
// its wait gave up (5 s): the queue would be unplaced there when the push
// was answered.
func TestGroups_APushToANewQueueThroughAFollowerPlacesItThere(t *testing.T) {
	c := servertest.StartGroupsTuned(t, 3, 3, quietCommits, nil)
	f := c.Follower(raft.Directory)
	fc := nodeClient(t, c, f)
	for i := range 5 {
		q := fmt.Sprintf("fresh-%d", i)
		pushOne(t, fc, q, q)
		if g := c.Nodes[f].Host.Placement(q); g == 0 {
			t.Fatalf("push %d: %s placed nowhere on %s, the follower it was pushed through, once answered", i, q, c.Nodes[f].ID)
		}
	}
}

// TestGroups_AStaleReadThroughAFollowerSeesItsWrite: a push through a
// follower of its queue's group is answered as soon as the group's leader
// answers, and a stale read through the same follower right after waits
// until the follower has applied the push (relay.Reads.Settle). The
// follower asks the leader's read index meanwhile, which makes the leader
// publish its applied index. Without the ask the stale read would wait up
// to 5 s, then answer from a replica without the push: 404.
func TestGroups_AStaleReadThroughAFollowerSeesItsWrite(t *testing.T) {
	c := servertest.StartGroupsTuned(t, 3, 3, quietCommits, nil)
	const g = 2
	f := c.Follower(g)
	fc := nodeClient(t, c, f)
	if got := configureIn(t, fc, "stale-rw", g); got != g {
		t.Fatalf("configure placed stale-rw in group %d, want %d", got, g)
	}
	for i := range 3 {
		txn := fmt.Sprintf("rw-%d", i)
		part := pushOne(t, fc, "stale-rw", txn)
		r := fc.do("GET", "/api/v1/messages/"+part+"/"+txn+"?consistency=stale", nil)
		if r.status != 200 || !strings.Contains(string(r.body), txn) {
			t.Fatalf("stale read of %s through %s right after pushing it there: %d %s", txn, c.Nodes[f].ID, r.status, r.body)
		}
	}
}

// pushOne pushes one message to queue through c and returns its
// partition's id.
func pushOne(t *testing.T, c *client, queue, txn string) string {
	t.Helper()
	var pushed []pushResult
	c.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
		{"queue": queue, "transactionId": txn, "payload": map[string]string{"t": txn}}}}).expect(t, 201).decode(t, &pushed)
	if len(pushed) != 1 || pushed[0].Status != "queued" {
		t.Fatalf("push %s to %s: %+v, want one queued", txn, queue, pushed)
	}
	return pushed[0].PartitionID
}
