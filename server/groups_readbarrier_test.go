package server_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// lostGroup is a choice of nodes for TestGroups_AReadOfAQueueWaitsForItsGroupAlone:
// group lost loses two of its three voters (stop), node reads through its
// third, and group healthy keeps a majority of its voters.
type lostGroup struct {
	lost, healthy uint32
	node          int
	stop          []int
}

// chooseLostGroup picks a lostGroup from c's layout, preferring a node that
// votes in the healthy group too (its read is then served from its own
// replica, caught up by the barrier, not relayed to the group's leader).
func chooseLostGroup(t *testing.T, c *servertest.Groups) lostGroup {
	t.Helper()
	l := c.Nodes[0].Host.Layout()
	index := func(id string) int {
		return slices.IndexFunc(c.Nodes, func(n *servertest.GroupNode) bool { return n.ID == id })
	}
	var found []lostGroup
	for _, lost := range c.Nodes[0].Host.Groups()[1:] {
		members := l.Groups[lost].Members
		for _, reader := range members {
			var stop []int
			for _, m := range members {
				if m != reader {
					stop = append(stop, index(m))
				}
			}
			for _, healthy := range c.Nodes[0].Host.Groups()[1:] {
				if healthy == lost {
					continue
				}
				down := 0
				for _, m := range l.Groups[healthy].Members {
					if slices.Contains(stop, index(m)) {
						down++
					}
				}
				if down <= 1 {
					found = append(found, lostGroup{lost: lost, healthy: healthy, node: index(reader), stop: stop})
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatalf("no group of layout %+v can lose two voters while another keeps its majority", l.Groups)
	}
	for _, f := range found {
		if slices.Contains(l.Groups[f.healthy].Members, c.Nodes[f.node].ID) {
			return f
		}
	}
	return found[0]
}

// TestGroups_AReadOfAQueueWaitsForItsGroupAlone: five nodes, three groups of
// three voters. Two voters of one group stop, so it has no leader; the
// directory (five voters) and another group keep theirs. Through the lost
// group's third voter, a linearizable read of a queue in the healthy group
// waits for the directory and that group alone and answers at once (not
// after the 5 s read index timeout, not 503), while a read of a queue in the
// lost group, and a listing across queues, still answer 503 read_unavailable
// rather than stale state.
func TestGroups_AReadOfAQueueWaitsForItsGroupAlone(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroupsOf(t, 5, 3, 3, nil)
	f := chooseLostGroup(t, c)
	x := c.Nodes[f.node]
	nc := nodeClient(t, c, f.node)
	healthyQ, lostQ := "healthy-queue", "lost-queue"
	for q, g := range map[string]uint32{healthyQ: f.healthy, lostQ: f.lost} {
		if got := configureIn(t, nc, q, int(g)); got != int(g) {
			t.Fatalf("configure %s in group %d answered group %d", q, g, got)
		}
	}
	pushed := nc.pushedAgain(map[string]any{"queue": healthyQ, "transactionId": "healthy-1", "payload": map[string]int{"n": 1}})
	if pushed.Status != "queued" {
		t.Fatalf("push to %s: %+v", healthyQ, pushed)
	}
	nc.pushedAgain(map[string]any{"queue": lostQ, "transactionId": "lost-1", "payload": map[string]int{"n": 1}})
	waitPlaced(t, c, healthyQ, f.healthy)
	waitPlaced(t, c, lostQ, f.lost)

	for _, i := range f.stop {
		c.Stop(i)
	}
	t.Logf("stopped %s and %s: group %d has %s alone, group %d keeps a majority; reading through %s",
		c.Nodes[f.stop[0]].ID, c.Nodes[f.stop[1]].ID, f.lost, x.ID, f.healthy, x.ID)
	for deadline := time.Now().Add(30 * time.Second); x.Host.GroupStatus(f.lost).HasLeader(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("group %d: %s still sees a leader 30 s after two of its three voters stopped", f.lost, x.ID)
		}
	}
	if !x.Host.Hosts(f.lost) {
		t.Fatalf("%s does not host group %d, which it votes in: its reads would not wait for it", x.ID, f.lost)
	}

	// The directory or the healthy group may be electing a new leader (a
	// stopped node led it): a read of the healthy queue is asked again
	// while it is refused. Before reads of one queue were scoped, every try
	// waited for the lost group and answered 503 read_unavailable, for good.
	path := "/api/v1/resources/queues/" + healthyQ
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := nc.do("GET", path, nil)
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s through %s: still %d %s after 60 s", path, x.ID, r.status, r.body)
		}
	}
	type queueRow struct {
		Name      string `json:"name"`
		RaftGroup uint32 `json:"raftGroup"`
		Totals    struct {
			Total int `json:"total"`
		} `json:"totals"`
	}
	var row queueRow
	timed(t, 3*time.Second, "GET "+path, func() { nc.do("GET", path, nil).expect(t, http.StatusOK).decode(t, &row) })
	if row.Name != healthyQ || row.RaftGroup != f.healthy || row.Totals.Total != 1 {
		t.Errorf("GET %s through %s: %+v, want %s in group %d with one message", path, x.ID, row, healthyQ, f.healthy)
	}
	var msgs []struct {
		TransactionID string `json:"transactionId"`
	}
	mpath := "/api/v1/status/queues/" + healthyQ + "/messages"
	timed(t, 3*time.Second, "GET "+mpath, func() { nc.do("GET", mpath, nil).expect(t, http.StatusOK).decode(t, &msgs) })
	if len(msgs) != 1 || msgs[0].TransactionID != pushed.TransactionID {
		t.Errorf("GET %s through %s: %+v, want the one message pushed", mpath, x.ID, msgs)
	}
	var listed struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	qpath := "/api/v1/messages?queue=" + healthyQ
	timed(t, 3*time.Second, "GET "+qpath, func() { nc.do("GET", qpath, nil).expect(t, http.StatusOK).decode(t, &listed) })
	if len(listed.Messages) != 1 || listed.Messages[0].TransactionID != pushed.TransactionID {
		t.Errorf("GET %s through %s: %+v, want the one message pushed", qpath, x.ID, listed)
	}

	// What reads the lost group waits for it, and is refused.
	for _, p := range []string{"/api/v1/resources/queues/" + lostQ, "/api/v1/resources/queues"} {
		r := nc.do("GET", p, nil)
		var e struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(r.body, &e)
		if r.status != http.StatusServiceUnavailable || e.Code != "read_unavailable" {
			t.Errorf("GET %s through %s: %d %s, want 503 read_unavailable (group %d has no leader)", p, x.ID, r.status, r.body, f.lost)
		}
	}
}

// timed runs f and fails t when it took longer than limit.
func timed(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > limit {
		t.Errorf("%s took %v, want under %v (the read index timeout is 5 s)", what, took, limit)
	}
}

// TestGroups_AReadOfOneQueueSeesWritesThroughAnyNode: a read of one queue
// waits for the directory before it looks up the queue's group, then for
// that group: a queue configured and pushed to through one node is read,
// with its message, through every other node right after. The leaders tell
// a commit only with their next entries (quietCommits), so a node that read
// its own directory replica without catching it up first would not know
// where the queue is (404), and one that skipped the queue's group would
// miss the message.
func TestGroups_AReadOfOneQueueSeesWritesThroughAnyNode(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroupsTuned(t, 3, 3, quietCommits, nil)
	for g := 1; g <= 3; g++ {
		w := g % 3 // the group's leader writes; the two others read
		q := "any-node-" + strconv.Itoa(g)
		if got := configureIn(t, nodeClient(t, c, w), q, g); got != g {
			t.Fatalf("configure %s in group %d answered group %d", q, g, got)
		}
		txn := "txn-" + strconv.Itoa(g)
		pushOne(t, nodeClient(t, c, w), q, txn)
		for i := range c.Nodes {
			if i == w {
				continue
			}
			nc := nodeClient(t, c, i)
			var row struct {
				Name      string `json:"name"`
				RaftGroup int    `json:"raftGroup"`
				Totals    struct {
					Total int `json:"total"`
				} `json:"totals"`
			}
			nc.do("GET", "/api/v1/resources/queues/"+q, nil).expect(t, http.StatusOK).decode(t, &row)
			if row.Name != q || row.RaftGroup != g || row.Totals.Total != 1 {
				t.Errorf("%s through %s right after the push through %s: %+v, want group %d with one message",
					q, c.Nodes[i].ID, c.Nodes[w].ID, row, g)
			}
			var msgs []struct {
				TransactionID string `json:"transactionId"`
			}
			nc.do("GET", "/api/v1/status/queues/"+q+"/messages", nil).expect(t, http.StatusOK).decode(t, &msgs)
			if len(msgs) != 1 || msgs[0].TransactionID != txn {
				t.Errorf("messages of %s through %s right after the push through %s: %+v, want %s", q, c.Nodes[i].ID, c.Nodes[w].ID, msgs, txn)
			}
		}
	}
}

// TestGroups_APushWithAKeyWaitsForItsQueuesGroupAlone: on a node with an
// encryption key, a push to a queue its state says is not encrypted, through
// a node that holds no replica of the queue's group, confirms that first
// (confirmConfig: encryption may just have been turned on through another
// node): it waits for the directory and the queue's group, not for every
// replica of the node. Through the last voter of a group that lost its
// quorum, a push to a queue of a healthy group it is no member of is
// answered at once; waiting for every replica, it waited for the lost group
// and answered 503 read_unavailable after the 5 s read index timeout.
func TestGroups_APushWithAKeyWaitsForItsQueuesGroupAlone(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroupsOf(t, 5, 3, 3, func(_ int, o *server.Options) { o.EncryptionKey = testKey })
	l := c.Nodes[0].Host.Layout()
	index := func(id string) int {
		return slices.IndexFunc(c.Nodes, func(n *servertest.GroupNode) bool { return n.ID == id })
	}
	var f *lostGroup
	for _, lost := range c.Nodes[0].Host.Groups()[1:] {
		for _, reader := range l.Groups[lost].Members {
			var stop []int
			for _, m := range l.Groups[lost].Members {
				if m != reader {
					stop = append(stop, index(m))
				}
			}
			for _, healthy := range c.Nodes[0].Host.Groups()[1:] {
				members := l.Groups[healthy].Members
				if f == nil && healthy != lost && !slices.Contains(members, reader) &&
					len(slices.DeleteFunc(slices.Clone(members), func(m string) bool { return !slices.Contains(stop, index(m)) })) <= 1 {
					f = &lostGroup{lost: lost, healthy: healthy, node: index(reader), stop: stop}
				}
			}
		}
	}
	if f == nil {
		t.Fatalf("no node of layout %+v votes in a group that can lose its quorum and not in one that keeps it", l.Groups)
	}
	x := c.Nodes[f.node]
	nc := nodeClient(t, c, f.node)
	q := "plain-healthy"
	if g := configureIn(t, nc, q, int(f.healthy)); g != int(f.healthy) {
		t.Fatalf("configure %s in group %d answered group %d", q, f.healthy, g)
	}
	waitPlaced(t, c, q, f.healthy)
	for _, i := range f.stop {
		c.Stop(i)
	}
	t.Logf("stopped %s and %s: group %d has %s alone; pushing to %s (group %d, not on %s) through it",
		c.Nodes[f.stop[0]].ID, c.Nodes[f.stop[1]].ID, f.lost, x.ID, q, f.healthy, x.ID)
	for deadline := time.Now().Add(30 * time.Second); x.Host.GroupStatus(f.lost).HasLeader(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("group %d: %s still sees a leader 30 s after two of its three voters stopped", f.lost, x.ID)
		}
	}
	if x.Host.Hosts(f.healthy) || !x.Host.Hosts(f.lost) {
		t.Fatalf("%s hosts group %d: %v, group %d: %v; want only the lost one", x.ID, f.healthy, x.Host.Hosts(f.healthy), f.lost, x.Host.Hosts(f.lost))
	}
	// An election of the directory or of the healthy group (a stopped node
	// led it) may refuse the first pushes: pushedAgain asks again. Waiting
	// for the lost group, every push answered 503 read_unavailable.
	if r := nc.pushedAgain(map[string]any{"queue": q, "transactionId": "plain-1", "payload": map[string]int{"n": 1}}); r.Status != "queued" {
		t.Fatalf("push to %s through %s: %+v", q, x.ID, r)
	}
	timed(t, 3*time.Second, "a second push to "+q, func() {
		var res []pushResult
		nc.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": q, "transactionId": "plain-2",
			"payload": map[string]int{"n": 2}}}}).expect(t, http.StatusCreated).decode(t, &res)
		if len(res) != 1 || res[0].Status != "queued" {
			t.Errorf("second push to %s through %s: %+v", q, x.ID, res)
		}
	})
}
