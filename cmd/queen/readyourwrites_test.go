package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCluster_ReadYourWritesThroughAnyNode: on three processes, a change
// made through any node is seen by the very next default read on every
// node, the one that relayed it included (docs/api.md §1.6, "Read
// consistency"). Each step writes through one node and reads through all
// three at once, with no wait between: before read indexes, a queue
// configured through a follower was 404 on that follower 25 times in 25.
// With a cluster secret followers ask the leader for its read index; without
// one they relay each read to the leader: both must hold.
func TestCluster_ReadYourWritesThroughAnyNode(t *testing.T) {
	t.Parallel()
	for _, secret := range []bool{true, false} {
		t.Run(fmt.Sprintf("secret=%v", secret), func(t *testing.T) {
			var extra []string
			if secret {
				extra = []string{"--cluster-secret-file", writeSecret(t, "read your writes")}
			}
			c := startLoopback(t, 3, extra...)
			c.waitConverged(c.nodes, 30*time.Second)
			for round := range 6 {
				readYourWritesRound(t, c, c.nodes[round%3], fmt.Sprintf("ryw%d", round))
			}
		})
	}
}

// readYourWritesRound runs every kind of change once through w, and after
// each reads it back through every node.
func readYourWritesRound(t *testing.T, c *cluster, w *qnode, q string) {
	t.Helper()
	must := func(method, path, body string, want int) []byte {
		t.Helper()
		var raw []byte
		if body != "" {
			raw = []byte(body)
		}
		code, b, err := c.do(15*time.Second, method, w.url(path), raw)
		if err != nil || code != want {
			t.Fatalf("%s %s through %s: %d %v %s, want %d", method, path, w.id, code, err, b, want)
		}
		return b
	}
	// everyNode reads path through every node and checks each answer.
	everyNode := func(what, path string, ok func(code int, body []byte) bool) {
		t.Helper()
		for _, n := range c.nodes {
			code, b, err := c.do(15*time.Second, "GET", n.url(path), nil)
			if err != nil || !ok(code, b) {
				t.Fatalf("%s, written through %s, read through %s: GET %s = %d %v %s", what, w.id, n.id, path, code, err, b)
			}
		}
	}

	must("POST", "/api/v1/configure", `{"queue":"`+q+`","options":{"retryLimit":0,"leaseTime":300}}`, 200)
	everyNode("a configured queue", "/api/v1/resources/queues/"+q, func(code int, _ []byte) bool { return code == 200 })
	everyNode("a configured queue in the list", "/api/v1/resources/queues", func(code int, b []byte) bool {
		return code == 200 && strings.Contains(string(b), `"`+q+`"`)
	})

	for _, on := range []bool{true, false} {
		must("POST", "/api/v1/system/maintenance/pop", fmt.Sprintf(`{"enabled":%v}`, on), 200)
		everyNode(fmt.Sprintf("pop maintenance %v", on), "/api/v1/system/maintenance", func(code int, b []byte) bool {
			var m struct {
				Pop bool `json:"popMaintenanceMode"`
			}
			return code == 200 && json.Unmarshal(b, &m) == nil && m.Pop == on
		})
	}

	// A consumer group with a live lease; a seek to the end releases it.
	must("POST", "/api/v1/push", `{"items":[{"queue":"`+q+`","transactionId":"a","payload":1},{"queue":"`+q+`","transactionId":"b","payload":2}]}`, 201)
	popOne(t, c, w, q, "g")
	var dead string
	leaseActive := func(want bool) func(int, []byte) bool {
		return func(code int, b []byte) bool {
			var g map[string]struct {
				Partitions []struct {
					LeaseActive bool `json:"leaseActive"`
					OffsetLag   int  `json:"offsetLag"`
				} `json:"partitions"`
			}
			if code != 200 || json.Unmarshal(b, &g) != nil || len(g[q].Partitions) != 1 {
				return false
			}
			p := g[q].Partitions[0]
			return p.LeaseActive == want && (want || p.OffsetLag == 0)
		}
	}
	everyNode("a lease taken", "/api/v1/consumer-groups/g", leaseActive(true))
	must("POST", "/api/v1/consumer-groups/g/queues/"+q+"/seek", `{"toEnd":true}`, 200)
	everyNode("a seek to the end", "/api/v1/consumer-groups/g", leaseActive(false))
	must("DELETE", "/api/v1/consumer-groups/g", "", 200)
	everyNode("a deleted consumer group", "/api/v1/consumer-groups", func(code int, b []byte) bool {
		return code == 200 && !strings.Contains(string(b), `"name":"g"`)
	})

	// Dead letters: one deleted, one replayed.
	dlqTotal := func(want int) func(int, []byte) bool {
		return func(code int, b []byte) bool {
			var d struct {
				Total int `json:"total"`
			}
			return code == 200 && json.Unmarshal(b, &d) == nil && d.Total == want
		}
	}
	qd := q + "dlq"
	must("POST", "/api/v1/configure", `{"queue":"`+qd+`","options":{"retryLimit":0,"leaseTime":300}}`, 200)
	must("POST", "/api/v1/push", `{"items":[{"queue":"`+qd+`","transactionId":"c","payload":3},{"queue":"`+qd+`","transactionId":"d","payload":4}]}`, 201)
	for i, txn := range []string{"c", "d"} {
		p := popOne(t, c, w, qd, "")
		if p.TransactionID != txn {
			t.Fatalf("popped %s, want %s", p.TransactionID, txn)
		}
		must("POST", "/api/v1/ack", `{"transactionId":"`+txn+`","partitionId":"`+p.PartitionID+`","leaseId":"`+p.LeaseID+`","status":"failed","error":"no"}`, 200)
		everyNode("a dead letter", "/api/v1/dlq?queue="+qd, dlqTotal(i+1))
		dead = p.PartitionID
	}
	must("DELETE", "/api/v1/messages/"+dead+"/c", "", 200)
	everyNode("a deleted dead letter", "/api/v1/dlq?queue="+qd, dlqTotal(1))
	must("POST", "/api/v1/messages/"+dead+"/d/retry", "", 200)
	everyNode("a replayed dead letter", "/api/v1/dlq?queue="+qd, dlqTotal(0))

	must("DELETE", "/api/v1/resources/queues/"+q, "", 200)
	everyNode("a deleted queue", "/api/v1/resources/queues/"+q, func(code int, _ []byte) bool { return code == 404 })
}

// popped is the part of a popped message the tests read.
type popped struct {
	TransactionID string `json:"transactionId"`
	PartitionID   string `json:"partitionId"`
	LeaseID       string `json:"leaseId"`
}

// popOne pops one message of queue through n (for group, or in queue mode).
func popOne(t *testing.T, c *cluster, n *qnode, queue, group string) popped {
	t.Helper()
	path := "/api/v1/pop/queue/" + queue + "?batch=1"
	if group != "" {
		path += "&consumerGroup=" + group
	}
	code, b, err := c.do(15*time.Second, "GET", n.url(path), nil)
	var r struct {
		Messages []popped `json:"messages"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &r) != nil || len(r.Messages) != 1 {
		t.Fatalf("pop %s through %s: %d %v %s", path, n.id, code, err, b)
	}
	return r.Messages[0]
}

// TestCluster_StaleReads: ?consistency=stale answers from the node's own
// state at once. It may lag the leader but never goes backwards on one node,
// and it sees every write made through that same node (a stale read waits
// until the node has applied the writes it relayed). With no leader, a default read
// answers 503 read_unavailable rather than stale state, and a stale read
// still answers.
func TestCluster_StaleReads(t *testing.T) {
	t.Parallel()
	c := startLoopback(t, 3, "--cluster-secret-file", writeSecret(t, "stale reads"))
	leader, _ := c.waitConverged(c.nodes, 30*time.Second)
	followers := c.others(leader)
	f, watcher := followers[0], followers[1]

	// Writes through the leader while the watcher's stale view is polled:
	// a queue once listed stays listed.
	done := make(chan struct{})
	errs := make(chan string, 1)
	go func() {
		defer close(errs)
		var seen []string
		for {
			select {
			case <-done:
				return
			default:
			}
			code, b, err := c.do(5*time.Second, "GET", watcher.url("/api/v1/resources/queues?consistency=stale"), nil)
			if err != nil || code != 200 {
				errs <- fmt.Sprintf("stale list on %s: %d %v %s", watcher.id, code, err, b)
				return
			}
			for _, q := range seen {
				if !strings.Contains(string(b), `"`+q+`"`) {
					errs <- fmt.Sprintf("stale list on %s went backwards: %s was listed, now %s", watcher.id, q, b)
					return
				}
			}
			for i := range 40 {
				if q := fmt.Sprintf("stale%02d", i); !slices.Contains(seen, q) && strings.Contains(string(b), `"`+q+`"`) {
					seen = append(seen, q)
				}
			}
		}
	}()
	for i := range 40 {
		via := leader
		if i%2 == 1 {
			via = f
		}
		q := fmt.Sprintf("stale%02d", i)
		if code, b, err := c.do(10*time.Second, "POST", via.url("/api/v1/configure"), []byte(`{"queue":"`+q+`"}`)); err != nil || code != 200 {
			t.Fatalf("configure %s through %s: %d %v %s", q, via.id, code, err, b)
		}
		if via == f {
			// A stale read through the node that relayed the write sees it.
			code, b, err := c.do(5*time.Second, "GET", f.url("/api/v1/resources/queues/"+q+"?consistency=stale"), nil)
			if err != nil || code != 200 {
				t.Fatalf("stale read of %s through %s, which relayed its configure: %d %v %s", q, f.id, code, err, b)
			}
		}
	}
	close(done)
	if e := <-errs; e != "" {
		t.Fatal(e)
	}

	code, b, err := c.do(5*time.Second, "GET", f.url("/api/v1/resources/queues?consistency=eventual"), nil)
	if err != nil || code != 400 || !strings.Contains(string(b), "invalid_argument") {
		t.Fatalf("an unknown consistency: %d %v %s, want 400", code, err, b)
	}

	// No quorum: the survivor's default reads refuse, its stale reads answer.
	leader.kill()
	watcher.kill()
	code, b, err = c.do(20*time.Second, "GET", f.url("/api/v1/resources/queues/stale00"), nil)
	if e, ok := c2(b); err != nil || code != 503 || !ok || e.Code != "read_unavailable" {
		t.Fatalf("a default read without a quorum: %d %v %s, want 503 read_unavailable", code, err, b)
	}
	req, _ := http.NewRequest("GET", f.url("/api/v1/resources/queues/stale00"), nil)
	req.Header.Set("X-Queen-Consistency", "stale")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a stale read (by header) without a quorum: %d, want 200", resp.StatusCode)
	}
}

// TestCluster_WriteThroughAFollowerThenRead: a follower answers a write as
// soon as its leader does, without waiting to apply it (a follower learns
// that an entry committed only from its leader's next message), and what
// that node reads next still sees it: the very next read of the message
// through the same node, default and stale, and its next pop, whose
// discovery (--groups) reads its own replica. Each node writes in turn,
// so every write is relayed by followers of the queue's group too; on
// one group and on --groups 3, where each node follows two of the three
// groups.
func TestCluster_WriteThroughAFollowerThenRead(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	for _, groups := range []int{1, 3} {
		t.Run(fmt.Sprintf("groups=%d", groups), func(t *testing.T) {
			extra := []string{"--cluster-secret-file", writeSecret(t, "write then read")}
			if groups > 1 {
				extra = append(extra, "--groups", fmt.Sprint(groups))
			}
			c := startLoopback(t, 3, extra...)
			if groups > 1 {
				c.waitSpread(c.nodes, groups)
			} else {
				c.waitConverged(c.nodes, 30*time.Second)
			}
			queues := []string{"wa", "wb", "wc", "wd", "we", "wf"}
			for k, q := range queues {
				// In one namespace, for the discovery pops.
				body := `{"queue":"` + q + `","namespace":"wns"}`
				if code, b, err := c.do(15*time.Second, "POST", c.nodes[k%3].url("/api/v1/configure"), []byte(body)); err != nil || code != http.StatusOK {
					t.Fatalf("configure %s: %d %v %s", q, code, err, b)
				}
			}
			for round := range 3 {
				for k, q := range queues {
					n := c.nodes[(round+k)%3]
					writeThenRead(t, c, n, q, fmt.Sprintf("%s-%d", q, round), round == 1)
				}
			}
			// A follower's ack went to the leader as a command on the
			// cluster path, not as a request: each ack ran one ack
			// handler, the node's it was sent to (a request relayed
			// whole runs the leader's as well).
			if got, want := c.metricSum(`queen_http_requests_total{route="ack",status="2xx"}`), float64(3*len(queues)); got != want {
				t.Errorf("ack handlers run over the nodes: %v, want %v, one an ack", got, want)
			}
		})
	}
}

// writeThenRead pushes one message to queue through n, then at once reads
// it back through n: by id (stale, then default) and by popping it (queue
// mode), which it acks through n. With pop, the pop comes first, and is a
// discovery pop: where to look, this node's replicas say.
func writeThenRead(t *testing.T, c *cluster, n *qnode, queue, txn string, pop bool) {
	t.Helper()
	code, res, b, err := c.push(n, 15*time.Second, []pushItem{{Queue: queue, TransactionID: txn, Payload: map[string]any{"t": txn}}})
	if err != nil || code != http.StatusCreated || len(res) != 1 || res[0].Status != "queued" {
		t.Fatalf("push %s to %s through %s: %d %v %s", txn, queue, n.id, code, err, b)
	}
	path := "/api/v1/pop/queue/" + queue + "?batch=1"
	if pop {
		path = "/api/v1/pop?namespace=wns&batch=1"
	}
	popIt := func() popped {
		code, b, err := c.do(15*time.Second, "GET", n.url(path), nil)
		var r struct {
			Messages []popped `json:"messages"`
		}
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &r) != nil || len(r.Messages) != 1 || r.Messages[0].TransactionID != txn {
			t.Fatalf("pop through %s right after pushing %s there: GET %s = %d %v %s", n.id, txn, path, code, err, b)
		}
		return r.Messages[0]
	}
	var m popped
	if pop {
		m = popIt()
	}
	for _, mode := range []string{"?consistency=stale", ""} {
		path := "/api/v1/messages/" + res[0].PartitionID + "/" + txn + mode
		code, b, err := c.do(15*time.Second, "GET", n.url(path), nil)
		if err != nil || code != http.StatusOK || !strings.Contains(string(b), txn) {
			t.Fatalf("read %s through %s right after pushing it there: GET %s = %d %v %s", txn, n.id, path, code, err, b)
		}
	}
	if !pop {
		m = popIt()
	}
	body := `{"transactionId":"` + txn + `","partitionId":"` + m.PartitionID + `","leaseId":"` + m.LeaseID + `","status":"completed"}`
	if code, b, err := c.do(15*time.Second, "POST", n.url("/api/v1/ack"), []byte(body)); err != nil || code != http.StatusOK {
		t.Fatalf("ack %s through %s: %d %v %s", txn, n.id, code, err, b)
	}
}
