package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/diskspace"
	"github.com/queenmq/queen/server/servertest"
)

// The tests here run three nodes in process with queues spread over three
// Raft groups (servertest.Groups): real Hosts over loopback TCP, real
// Servers over real HTTP.

// nodeClient is a client of one node of c.
func nodeClient(t *testing.T, c *servertest.Groups, i int) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, base: c.Nodes[i].URL, http: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}}
}

// refusedCodes are the codes of the 503s that say the request was not
// applied (server/errors.go): no leader, not the leader, a leadership
// transfer, a queue moving, a relayed request that expired. An election or
// a move on a busy machine answers them.
var refusedCodes = []string{"no_leader", "not_leader", "leadership_transfer", "queue_moving", "forward_expired"}

// doAgain is do, sent again, up to 30 s, while it is answered a 503 that
// a retry may change and that cannot hide a change made: for a GET (a
// read, which changes nothing) any 503, for any other method a refusal
// (refusedCodes), never an outcome unknown. The last answer is returned,
// for the test to check as it would do's.
func (c *client) doAgain(method, path string, body any) *response {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := c.do(method, path, body)
		if r.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return r
		}
		var e struct {
			Code string `json:"code"`
		}
		if method != http.MethodGet && (json.Unmarshal(r.body, &e) != nil || !slices.Contains(refusedCodes, e.Code)) {
			return r
		}
		c.t.Logf("%s %s answered %d %s; asking again", method, path, r.status, r.body)
	}
}

// pushedAgain pushes item, which names its transactionId, through c, and
// sends it again, up to 30 s, while it is answered 503: a refusal
// (refusedCodes: nothing stored) or an outcome unknown (an election lost
// the answer), after which an answer duplicate is the earlier try's push,
// stored once (the transaction id makes the repeat a duplicate), and is
// returned as queued: the client pushed it once. The push must be answered
// 201 with one result; the caller checks it, and what is stored.
func (c *client) pushedAgain(item map[string]any) pushResult {
	c.t.Helper()
	if item["transactionId"] == nil {
		c.t.Fatalf("pushedAgain: %v names no transactionId, which makes a repeat safe", item)
	}
	uncertain := false
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := c.do("POST", "/api/v1/push", map[string]any{"items": []any{item}})
		if r.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
			var e struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(r.body, &e)
			uncertain = uncertain || !slices.Contains(refusedCodes, e.Code)
			c.t.Logf("push %v answered %d %s; pushing again", item, r.status, r.body)
			continue
		}
		var res []pushResult
		r.expect(c.t, http.StatusCreated).decode(c.t, &res)
		if len(res) != 1 {
			c.t.Fatalf("push %v: %d results", item, len(res))
		}
		if uncertain && res[0].Status == "duplicate" {
			res[0].Status = "queued"
		}
		return res[0]
	}
}

// configureIn configures queue in group g through c and returns the group
// the answer names; asked again while refused (doAgain), as a
// configuration is the same however often it is applied.
func configureIn(t *testing.T, c *client, queue string, g int) int {
	t.Helper()
	body := map[string]any{"queue": queue}
	if g != 0 {
		body["raftGroup"] = g
	}
	var out struct {
		Configured bool `json:"configured"`
		RaftGroup  int  `json:"raftGroup"`
	}
	c.doAgain("POST", "/api/v1/configure", body).expect(t, 200).decode(t, &out)
	if !out.Configured {
		t.Fatalf("configure %s: not configured", queue)
	}
	return out.RaftGroup
}

// waitPlaced polls, up to 20 s, until every node places queue in g.
func waitPlaced(t *testing.T, c *servertest.Groups, queue string, g uint32) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var seen []string
		for _, n := range c.Nodes {
			if p := n.Host.Placement(queue); p != g {
				seen = append(seen, fmt.Sprintf("%s: %d", n.ID, p))
			}
		}
		if len(seen) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s is not placed in group %d everywhere: %s", queue, g, strings.Join(seen, ", "))
		}
	}
}

func TestGroups_ConfigurePlacesQueues(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 3, nil)
	n3 := nodeClient(t, c, 2)
	if g := configureIn(t, n3, "placed-two", 2); g != 2 {
		t.Fatalf("configure in group 2 answered group %d", g)
	}
	waitPlaced(t, c, "placed-two", 2)

	n2 := nodeClient(t, c, 1)
	g := configureIn(t, n2, "placed-anywhere", 0)
	if g < 1 || g > 3 {
		t.Fatalf("configure without a group answered group %d, want 1 to 3", g)
	}
	waitPlaced(t, c, "placed-anywhere", uint32(g))

	// A queue keeps its group; a group that does not exist is bad input.
	n2.do("POST", "/api/v1/configure", map[string]any{"queue": "placed-two", "raftGroup": 3}).
		expectError(t, http.StatusConflict, "placed_elsewhere")
	n2.do("POST", "/api/v1/configure", map[string]any{"queue": "placed-nowhere", "raftGroup": 4}).
		expectError(t, http.StatusBadRequest, "invalid_argument")
	if g := configureIn(t, n2, "placed-two", 0); g != 2 {
		t.Fatalf("reconfigure answered group %d, want 2", g)
	}
}

func TestGroups_FollowerForwardsToTheGroupLeader(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 3, nil)
	f := c.Follower(2)
	fc := nodeClient(t, c, f)
	configureIn(t, fc, "forwarded", 2)
	waitPlaced(t, c, "forwarded", 2)

	// A push goes to the group's leader on the cluster path.
	var items []map[string]any
	for i := range 10 {
		items = append(items, map[string]any{"queue": "forwarded", "payload": map[string]int{"i": i}})
	}
	var pushed []struct {
		Status string `json:"status"`
	}
	fc.do("POST", "/api/v1/push", map[string]any{"items": items}).expect(t, 201).decode(t, &pushed)
	if len(pushed) != 10 {
		t.Fatalf("push answered %d results, want 10", len(pushed))
	}
	for i, r := range pushed {
		if r.Status != "queued" {
			t.Fatalf("item %d: %s, want queued", i, r.Status)
		}
	}

	// A pop (a command without a result codec) is relayed whole.
	var popped struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
			LeaseID       string `json:"leaseId"`
		} `json:"messages"`
	}
	fc.do("GET", "/api/v1/pop/queue/forwarded?batch=10", nil).expect(t, 200).decode(t, &popped)
	if len(popped.Messages) != 10 {
		t.Fatalf("pop through a follower took %d messages, want 10", len(popped.Messages))
	}
	var acks []map[string]any
	for _, m := range popped.Messages {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"leaseId": m.LeaseID, "status": "completed"})
	}
	fc.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks}).expect(t, 200)
	var again struct {
		Messages []any `json:"messages"`
	}
	if r := fc.do("GET", "/api/v1/pop/queue/forwarded?batch=10", nil); r.status == 200 {
		r.decode(t, &again)
		if len(again.Messages) != 0 {
			t.Fatalf("acked messages popped again: %d", len(again.Messages))
		}
	} else {
		r.expect(t, 204)
	}
}

func TestGroups_APushIsCountedOnce(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 3, nil)
	f := c.Follower(3)
	fc := nodeClient(t, c, f)
	configureIn(t, fc, "counted", 3)
	waitPlaced(t, c, "counted", 3)
	const pushes = 20
	for i := range pushes {
		// 503 (no leader: an election on a busy machine) stores nothing
		// and says retry: the push is sent again.
		var r *response
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r = fc.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
				{"queue": "counted", "payload": map[string]int{"i": i}}}})
			if r.status != 503 || time.Now().After(deadline) {
				break
			}
		}
		r.expect(t, 201)
	}
	const series = `queen_push_messages_total{status="queued"}`
	var sum float64
	var each []string
	for i := range c.Nodes {
		v := nodeClient(t, c, i).metricOr(series, 0)
		sum += v
		each = append(each, fmt.Sprintf("%s: %v", c.Nodes[i].ID, v))
	}
	if sum != pushes {
		t.Fatalf("%s summed over the nodes = %v, want %d (%s)", series, sum, pushes, strings.Join(each, ", "))
	}
}

func TestGroups_StorageReportsReachEveryGroupLeader(t *testing.T) {
	t.Parallel()
	spaces := make([]*servertest.InmemSpace, 3)
	c := servertest.StartGroups(t, 3, 3, func(i int, o *server.Options) {
		spaces[i] = &servertest.InmemSpace{}
		o.Storage = spaces[i].Guard(t, 64<<20, 1<<20, t.TempDir())
	})
	low := c.Follower(1)
	spaces[low].SetFree(0)
	lowID := c.Nodes[low].ID
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		leaders := c.WaitLeaders()
		var missing []string
		for g, l := range leaders {
			if g == 0 || l == low {
				continue // the directory takes no data; a node does not report to itself
			}
			if !reportsLow(t, nodeClient(t, c, l), lowID) {
				missing = append(missing, fmt.Sprintf("group %d's leader %s", g, c.Nodes[l].ID))
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's low disk did not reach %s", lowID, strings.Join(missing, ", "))
		}
	}
}

// On R of N a node reports its disk to the leaders of the groups it holds
// a replica of, not to the others: a low disk holds up the groups that
// append to it, and a leader of none of them goes on taking data.
func TestGroups_StorageReportsReachOnlyTheLeadersOfItsGroups(t *testing.T) {
	t.Parallel()
	spaces := make([]*servertest.InmemSpace, 4)
	c := servertest.StartGroupsOf(t, 4, 4, 3, func(i int, o *server.Options) {
		spaces[i] = &servertest.InmemSpace{}
		o.Storage = spaces[i].Guard(t, 64<<20, 1<<20, t.TempDir())
	})
	// The low node: one outside some group whose leader leads no group
	// the low node holds (four nodes, four groups of three: each node is
	// outside one group, and the leaders are spread).
	low, outside, other := -1, uint32(0), -1
	var ofLow []uint32
	for deadline := time.Now().Add(30 * time.Second); low < 0; time.Sleep(100 * time.Millisecond) {
		leaders := c.WaitLayout()
	pick:
		for i := range c.Nodes {
			hosted := hostedBy(c, i)
			for g, l := range leaders {
				if g == 0 || slices.Contains(hosted, int(g)) || l == i {
					continue
				}
				for h, hl := range leaders {
					if h != 0 && hl == l && slices.Contains(hosted, int(h)) {
						continue pick // l leads a group of i's too
					}
				}
				low, outside, other = i, g, l
				ofLow = nil
				for _, h := range hosted {
					ofLow = append(ofLow, uint32(h))
				}
				break pick
			}
		}
		if low < 0 && time.Now().After(deadline) {
			t.Fatalf("no node is outside a group whose leader leads none of its groups: leaders %v", leaders)
		}
	}
	// The queue is configured first: configuring adds data, and the
	// directory may be led by the low node.
	configureIn(t, nodeClient(t, c, other), "elsewhere", int(outside))
	waitPlaced(t, c, "elsewhere", outside)
	lowID := c.Nodes[low].ID
	spaces[low].SetFree(0)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		leaders := c.WaitLayout()
		var missing []string
		for _, g := range ofLow {
			if l := leaders[g]; l != low && !reportsLow(t, nodeClient(t, c, l), lowID) {
				missing = append(missing, fmt.Sprintf("group %d's leader %s", g, c.Nodes[l].ID))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's low disk did not reach %s", lowID, strings.Join(missing, ", "))
		}
	}
	// Every leader of a group of the low node has heard of it (above).
	// The leader of the group outside, once it has led none of the low
	// node's groups for longer than a report lives (leaderships may move
	// on a busy machine), holds no report of it, and takes data there.
	var alone time.Time // since when the group outside's leader has led none of the low node's groups
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader of group %d never led it alone for %v", outside, diskspace.ReportTTL)
		}
		leaders := c.WaitLayout()
		l := leaders[outside]
		if l == low || slices.ContainsFunc(ofLow, func(g uint32) bool { return leaders[g] == l }) || l != other {
			alone, other = time.Time{}, l
			continue
		}
		if alone.IsZero() {
			alone = time.Now()
		}
		if time.Since(alone) < diskspace.ReportTTL+time.Second {
			continue
		}
		oc := nodeClient(t, c, l)
		if reportsLow(t, oc, lowID) {
			t.Fatalf("%s, leader of group %d which %s holds no replica of, holds its low report", c.Nodes[l].ID, outside, lowID)
		}
		r := oc.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "elsewhere", "payload": 1}}})
		if r.status == http.StatusServiceUnavailable {
			continue // an election: nothing stored, asked again
		}
		r.expect(t, http.StatusCreated)
		return
	}
}

// reportsLow reports whether the node c serves holds a fresh report from
// node id that it is below its reserve.
func reportsLow(t *testing.T, c *client, id string) bool {
	var h struct {
		Storage struct {
			Nodes []struct {
				ID string `json:"id"`
				OK bool   `json:"ok"`
			} `json:"nodes"`
		} `json:"storage"`
	}
	c.do("GET", "/health", nil).decode(t, &h)
	for _, n := range h.Storage.Nodes {
		if n.ID == id && !n.OK {
			return true
		}
	}
	return false
}

// metricOr reads one series of /metrics/prometheus, or, when the node has
// not written it (nothing counted yet), absent.
func (c *client) metricOr(name string, absent float64) float64 {
	c.t.Helper()
	for _, line := range strings.Split(string(c.do("GET", "/metrics/prometheus", nil).expect(c.t, 200).body), "\n") {
		if _, ok := strings.CutPrefix(line, name+" "); ok {
			return c.metric(name)
		}
	}
	return absent
}

// A queue made encrypted through one node is sealed by a push through
// another right after, even when that node's replica has not applied the
// configure yet: a node that does not lead the queue's group confirms a
// queue it sees as plain with the leader before it leaves a payload
// unsealed. (Without that check most of these pushes were stored in
// plaintext: the follower applies the configure a heartbeat later.)
func TestGroups_PushRightAfterEncryptionIsOnIsSealedOnEveryNode(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 2, func(_ int, o *server.Options) { o.EncryptionKey = testKey })
	leaders := c.WaitLeaders()
	leader := nodeClient(t, c, leaders[1])
	follower := nodeClient(t, c, c.Follower(1))
	for i := range 20 {
		q := fmt.Sprintf("sealed-%d", i)
		leader.do("POST", "/api/v1/configure", map[string]any{"queue": q, "raftGroup": 1,
			"options": map[string]any{"encryptionEnabled": true}}).expect(t, 200)
		var res []pushResult
		follower.do("POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": q, "transactionId": "t", "payload": map[string]any{"card": "PLAIN-MARKER"}}}}).
			expect(t, http.StatusCreated).decode(t, &res)
		if len(res) != 1 || res[0].Status != "queued" {
			t.Fatalf("push %d: %+v", i, res)
		}
		raw := stored(t, c.Nodes[leaders[1]].Host, res[0].PartitionID, "t")
		if !isEnvelope(raw) || strings.Contains(string(raw), "MARKER") {
			t.Fatalf("push %d through a follower right after encryption was turned on is stored as %s", i, raw)
		}
	}
}

// TestGroups_APushNothingStoredForATransientReasonIs503: with --groups, a
// push whose items lie in two groups, neither of which has a leader (two
// of three nodes gone), stores nothing; it is answered as one group
// answers it, 503 no_leader with Retry-After, which the SDKs retry, not a
// 201 whose every item is failed (which they hand to the application's
// error handler).
func TestGroups_APushNothingStoredForATransientReasonIs503(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 2, nil)
	c0 := nodeClient(t, c, 0)
	configureIn(t, c0, "ga", 1)
	configureIn(t, c0, "gb", 2)
	waitPlaced(t, c, "ga", 1)
	waitPlaced(t, c, "gb", 2)
	for _, i := range []int{1, 2} {
		if err := c.Nodes[i].Host.Close(); err != nil {
			t.Fatal(err)
		}
	}
	h := c.Nodes[0].Host
	for deadline := time.Now().Add(20 * time.Second); h.GroupStatus(1).Leader != "" || h.GroupStatus(2).Leader != ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the groups still have leaders: %q %q", h.GroupStatus(1).Leader, h.GroupStatus(2).Leader)
		}
	}
	r := c0.do("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "ga", "transactionId": "a1", "payload": 1},
		map[string]any{"queue": "gb", "transactionId": "b1", "payload": 2},
	}})
	r.expectError(t, 503, "no_leader")
	if r.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", r.header)
	}
}
