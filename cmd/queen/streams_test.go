package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A running aggregation on three nodes, driven the way Queen's streaming
// SDKs drive one (pop with the group streams.<name>, read the shard's state,
// commit one cycle that upserts the new totals and acks under the pop's
// lease), survives kill -9 of the leader between cycles: every message is
// counted exactly once, and the replicas end byte-identical. A cycle whose
// answer was lost is sent again as it was (the SDKs retry 5xx and network
// errors): the shard's memory of recent cycles answers it without applying
// it twice (docs/decisions.md B10).
func TestCluster_StreamAggregationExactlyOnceAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level streams test (about 20 s); skipped with -short")
	}
	c := startLoopback(t, 3)
	c.waitLeader(c.nodes, 30*time.Second)
	const (
		partitions = 6
		perPart    = 60
	)
	// Through any node, retried until one answers (leader changes).
	call := func(method, path string, body any, ok func(int, []byte) bool) []byte {
		t.Helper()
		b, _ := json.Marshal(body)
		deadline := time.Now().Add(60 * time.Second)
		for i := 0; ; i++ {
			n := c.nodes[i%len(c.nodes)]
			if n.running() {
				code, out, err := c.do(5*time.Second, method, n.url(path), b)
				if err == nil && ok(code, out) {
					return out
				}
				if err == nil && code < 500 && code != http.StatusConflict {
					t.Fatalf("%s %s via %s: %d %s", method, path, n.id, code, out)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s: no node answered within 60 s", method, path)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	is := func(want int) func(int, []byte) bool { return func(code int, _ []byte) bool { return code == want } }

	call("POST", "/api/v1/configure", map[string]any{"queue": "src", "options": map[string]any{"leaseTime": 3}}, is(200))
	var reg struct {
		QueryID string `json:"query_id"`
	}
	json.Unmarshal(call("POST", "/streams/v1/queries", map[string]any{"name": "sum", "source_queue": "src", "config_hash": "h1"}, is(200)), &reg)
	want := map[string]int{}
	for p := range partitions {
		var items []pushItem
		for i := 1; i <= perPart; i++ {
			v := p*1000 + i
			items = append(items, pushItem{Queue: "src", Partition: fmt.Sprint("p", p), TransactionID: fmt.Sprintf("m%d-%d", p, i), Payload: map[string]any{"v": v}})
			want[fmt.Sprint("p", p)] += v
		}
		c.mustPush(c.nodes, 30*time.Second, items)
	}

	// The runner.
	type total struct {
		Sum   int `json:"sum"`
		Count int `json:"count"`
	}
	var cycles, retried atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for node := 0; ; node++ {
			select {
			case <-stop:
				return
			default:
			}
			n := c.nodes[node%len(c.nodes)]
			if !n.running() {
				continue
			}
			code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/pop/queue/src?batch=7&partitions=1&consumerGroup=streams.sum"), nil)
			if err != nil || code != http.StatusOK {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			var pr struct {
				Messages []struct {
					TransactionID string          `json:"transactionId"`
					PartitionID   string          `json:"partitionId"`
					Partition     string          `json:"partition"`
					LeaseID       string          `json:"leaseId"`
					Data          json.RawMessage `json:"data"`
				} `json:"messages"`
			}
			if json.Unmarshal(b, &pr) != nil || len(pr.Messages) == 0 {
				continue
			}
			part := pr.Messages[0].PartitionID
			// Full load of the shard, then fold the batch in.
			code, b, err = c.do(5*time.Second, "POST", n.url("/streams/v1/state/get"),
				[]byte(fmt.Sprintf(`{"query_id":%q,"partition_id":%q,"keys":["total"]}`, reg.QueryID, part)))
			if err != nil || code != http.StatusOK {
				continue // the lease expires; the batch comes again
			}
			var st struct {
				Rows []struct {
					Value total `json:"value"`
				} `json:"rows"`
			}
			json.Unmarshal(b, &st)
			var acc total
			if len(st.Rows) == 1 {
				acc = st.Rows[0].Value
			}
			for _, m := range pr.Messages {
				var d struct{ V int }
				json.Unmarshal(m.Data, &d)
				acc.Sum += d.V
				acc.Count++
			}
			last := pr.Messages[len(pr.Messages)-1]
			body, _ := json.Marshal(map[string]any{"query_id": reg.QueryID, "partition_id": part, "consumer_group": "streams.sum",
				"state_ops": []any{map[string]any{"type": "upsert", "key": "total", "value": acc}},
				"ack":       map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID, "count": len(pr.Messages)}})
			// Commit, retrying the very same body on 5xx and network errors
			// through any node, as the SDKs do.
			for attempt := 0; attempt < 40; attempt++ {
				if attempt > 0 {
					retried.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
				m := c.nodes[(node+attempt)%len(c.nodes)]
				if !m.running() {
					continue
				}
				code, b, err := c.do(5*time.Second, "POST", m.url("/streams/v1/cycle"), body)
				if err != nil || code >= 500 {
					continue
				}
				var res struct {
					Success bool   `json:"success"`
					Error   string `json:"error"`
				}
				if code != http.StatusOK || json.Unmarshal(b, &res) != nil {
					t.Errorf("cycle via %s: %d %s", m.id, code, b)
					return
				}
				if res.Success {
					cycles.Add(1)
				} else if !strings.Contains(res.Error, "Invalid or expired lease") {
					t.Errorf("cycle via %s failed: %s", m.id, res.Error)
				}
				break // a lost lease: the batch is delivered again, the state was not touched
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	// Kill the leader once some cycles are in, and bring it back.
	waitFor(t, 30*time.Second, "the first cycles", func() (bool, string) { return cycles.Load() >= 5, fmt.Sprint(cycles.Load()) })
	leader := c.waitLeader(c.nodes, 10*time.Second)
	leader.kill()
	t.Logf("killed leader %s after %d cycles", leader.id, cycles.Load())
	waitFor(t, 30*time.Second, "cycles after the failover", func() (bool, string) { return cycles.Load() >= 15, fmt.Sprint(cycles.Load()) })
	leader.start()

	// Wait until every partition's total has every message in it.
	type got struct{ sum, count int }
	final := map[string]got{}
	waitFor(t, 90*time.Second, "every message to be counted", func() (bool, string) {
		all := true
		for p := range partitions {
			name := fmt.Sprint("p", p)
			q, err := c.queueInfo("src")
			if err != nil {
				return false, err.Error()
			}
			body := fmt.Sprintf(`{"query_id":%q,"partition_id":%q,"keys":["total"]}`, reg.QueryID, q[name])
			out := call("POST", "/streams/v1/state/get", json.RawMessage(body), is(200))
			var st struct {
				Rows []struct {
					Value total `json:"value"`
				} `json:"rows"`
			}
			json.Unmarshal(out, &st)
			if len(st.Rows) == 1 {
				final[name] = got{st.Rows[0].Value.Sum, st.Rows[0].Value.Count}
			}
			if final[name].count < perPart {
				all = false
			}
		}
		return all, fmt.Sprint(final)
	})
	close(stop)
	<-done
	for p := range partitions {
		name := fmt.Sprint("p", p)
		if g := final[name]; g.count != perPart || g.sum != want[name] {
			t.Errorf("%s: counted %d messages summing to %d, want %d summing to %d (exactly once)", name, g.count, g.sum, perPart, want[name])
		}
	}
	t.Logf("%d cycles committed, %d sends of a cycle retried", cycles.Load(), retried.Load())
	c.stopAndCompare(c.nodes, 30*time.Second)
}

// queueInfo returns a queue's partition ids by name, read through any node.
func (c *cluster) queueInfo(queue string) (map[string]string, error) {
	var last error
	for _, n := range c.nodes {
		if !n.running() {
			continue
		}
		code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/resources/queues/"+queue), nil)
		if err != nil || code != http.StatusOK {
			last = fmt.Errorf("queue %s via %s: %d %v", queue, n.id, code, err)
			continue
		}
		var q struct {
			Partitions []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"partitions"`
		}
		if err := json.Unmarshal(b, &q); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, p := range q.Partitions {
			out[p.Name] = p.ID
		}
		return out, nil
	}
	return nil, last
}
