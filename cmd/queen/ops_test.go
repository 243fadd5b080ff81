package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/raft/command"
)

// runCLI runs the queen binary with args and returns its stdout.
func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(queenBinary(t), args...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("queen %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// queen status over a three-node cluster: every node, one leader that all
// name, applied indexes and lags, free disk, version and command version,
// and the cluster's version; a table and JSON; an unreachable URL is a row
// of its own, not a failure. With the cluster secret every node comes to
// know every other's version (the followers relay their addresses, and
// each reads the others' /health).
func TestCLI_StatusOfAThreeNodeCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level CLI test; skipped with -short")
	}
	c := startLoopback(t, 3, "--cluster-secret-file", writeSecret(t, "status secret"))
	leader := c.waitLeader(c.nodes, 30*time.Second)
	c.mustPush(c.nodes, 30*time.Second, []pushItem{{Queue: "q", TransactionID: "a", Payload: 1}})
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, n.url(""))
	}
	dead := fmt.Sprintf("http://127.0.0.1:%d", freePorts(t, 1)[0])
	var nodes []nodeStatus
	// The cluster version is read from the others every 5 s: until the
	// first read that reaches them, a node runs at 1.
	waitFor(t, 30*time.Second, "every node to have applied the push and read the cluster version", func() (bool, string) {
		out := runCLI(t, "status", "--url", strings.Join(urls, ","), "--json")
		nodes = nil
		if err := json.Unmarshal([]byte(out), &nodes); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		for _, n := range nodes {
			if n.Lag != 0 || n.ClusterVersion != command.MaxVersion {
				return false, out
			}
		}
		return true, out
	})
	leaders := 0
	for _, n := range nodes {
		if n.Error != "" || n.Leader != leader.id || n.Term == 0 || n.Applied == 0 || n.Free == 0 || n.Version == "" || !n.Healthy ||
			n.CommandVersion != command.MaxVersion || n.ClusterVersion != command.MaxVersion {
			t.Errorf("node %+v", n)
		}
		if n.Role == "leader" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders in %+v", leaders, nodes)
	}
	for _, n := range c.nodes {
		waitFor(t, 30*time.Second, n.id+" to know every node's version", func() (bool, string) {
			_, b, err := c.do(5*time.Second, "GET", n.url("/health"), nil)
			var h struct {
				Nodes []struct {
					ID, Version    string
					CommandVersion int
					Known          bool
				}
			}
			if err != nil || json.Unmarshal(b, &h) != nil || len(h.Nodes) != 3 {
				return false, string(b)
			}
			for _, v := range h.Nodes {
				if !v.Known || v.CommandVersion != int(command.MaxVersion) || v.Version == "" {
					return false, string(b)
				}
			}
			return true, string(b)
		})
	}
	// Once every node is live, the placement: one group, led by the
	// leader, of every node, holding the one queue.
	table := runCLI(t, "status", "--url", strings.Join(append(urls, dead), ","))
	lines := strings.Split(strings.TrimSpace(table), "\n")
	var ids []string
	for _, n := range c.nodes {
		ids = append(ids, n.id)
	}
	slices.Sort(ids)
	if len(lines) != 13 || !strings.HasPrefix(lines[0], "NODE") || !strings.Contains(lines[0], "CMD VERSION") ||
		!strings.Contains(table, "leader") || !strings.Contains(lines[4], "unreachable") ||
		lines[6] != fmt.Sprintf("cluster version %d (as the leader, %s, reads it)", command.MaxVersion, leader.id) ||
		!regexp.MustCompile(`^cluster id [0-9a-f]{32}$`).MatchString(lines[7]) ||
		!regexp.MustCompile(`^store ids: n\d=[0-9a-f]{32} n\d=[0-9a-f]{32} n\d=[0-9a-f]{32}$`).MatchString(lines[8]) ||
		lines[10] != "placement (as "+leader.id+" knows it)" ||
		strings.Join(strings.Fields(lines[12]), " ") != "1 "+leader.id+" "+strings.Join(ids, ",")+" 1" {
		t.Fatalf("table:\n%s", table)
	}
}

// queen queues and queen dlq list | replay | delete against one node: the
// queue with its counts; the dead letters the filters select; a redrive in
// rounds that replays each row once; a delete of one address.
func TestCLI_QueuesAndDLQ(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := c.addNode("n1", addr, nil, "--http", addr)
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	url := n.url("")
	c.mustConfigure(n, "payments")
	c.do(5*time.Second, "POST", n.url("/api/v1/configure"), []byte(`{"queue":"payments","options":{"retryLimit":0}}`))
	const rows = 150 // more than one replay round
	var items []pushItem
	for i := range rows {
		items = append(items, pushItem{Queue: "payments", TransactionID: fmt.Sprint("p-", i), Payload: map[string]any{"i": i}})
	}
	c.mustPush([]*qnode{n}, 30*time.Second, items)
	c.mustPush([]*qnode{n}, 30*time.Second, []pushItem{{Queue: "orders", TransactionID: "o", Payload: 1}})
	// Fail every payment: with retryLimit 0 each goes to the DLQ (one at a
	// time: a failed ack dead-letters the head of its batch and releases
	// the rest).
	for failed := 0; failed < rows; {
		code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/pop/queue/payments?batch=1"), nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("pop: %d %v %s", code, err, b)
		}
		var pr popResponse
		json.Unmarshal(b, &pr)
		var acks []ackItem
		for _, m := range pr.Messages {
			acks = append(acks, ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "failed"})
		}
		body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
		if code, b, err := c.do(5*time.Second, "POST", n.url("/api/v1/ack/batch"), body); err != nil || code != http.StatusOK {
			t.Fatalf("ack: %d %v %s", code, err, b)
		}
		failed += len(acks)
	}

	queues := runCLI(t, "queues", "--url", url)
	if !strings.Contains(queues, "payments") || !strings.Contains(queues, "orders") || !strings.HasPrefix(queues, "QUEUE") {
		t.Fatalf("queues:\n%s", queues)
	}
	var qj struct {
		Queues []struct{ Name string } `json:"queues"`
	}
	if err := json.Unmarshal([]byte(runCLI(t, "queues", "--url", url, "--json")), &qj); err != nil || len(qj.Queues) != 2 {
		t.Fatalf("queues --json: %+v %v", qj, err)
	}

	list := runCLI(t, "dlq", "list", "--url", url, "--queue", "payments", "--limit", "5")
	if !strings.Contains(list, "5 of 150 dead letters") || strings.Count(list, "payments") != 5 {
		t.Fatalf("dlq list:\n%s", list)
	}
	if none := runCLI(t, "dlq", "list", "--url", url, "--queue", "orders"); !strings.Contains(none, "0 of 0") {
		t.Fatalf("dlq list of orders:\n%s", none)
	}
	var page struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	json.Unmarshal([]byte(runCLI(t, "dlq", "list", "--url", url, "--queue", "payments", "--limit", "1", "--json")), &page)
	if len(page.Messages) != 1 {
		t.Fatalf("dlq list --json: %+v", page)
	}
	del := runCLI(t, "dlq", "delete", "--url", url, "--partition-id", page.Messages[0].PartitionID, "--transaction-id", page.Messages[0].TransactionID)
	if !strings.Contains(del, `"deleted":1`) {
		t.Fatalf("dlq delete: %s", del)
	}

	var res map[string]int
	out := runCLI(t, "dlq", "replay", "--url", url, "--queue", "payments", "--limit", "0", "--json")
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["replayed"] != rows-1 || res["failed"] != 0 {
		t.Fatalf("dlq replay: %s %v", out, err)
	}
	if again := runCLI(t, "dlq", "replay", "--url", url, "--queue", "payments"); !strings.Contains(again, "replayed 0, failed 0") {
		t.Fatalf("a second replay: %s", again)
	}
	// Every replayed payment is back on its queue, once.
	code, b, _ := c.do(5*time.Second, "GET", n.url("/api/v1/resources/queues/payments"), nil)
	var q struct {
		Totals struct {
			Pending int `json:"pending"`
		} `json:"totals"`
	}
	if json.Unmarshal(b, &q); code != http.StatusOK || q.Totals.Pending != rows-1 {
		t.Fatalf("payments after the replay: %d %s", code, b)
	}
}

// queen step-down: the leader hands over its group and another node leads;
// a follower transfers nothing.
func TestCLI_StepDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level CLI test; skipped with -short")
	}
	c := startLoopback(t, 3)
	leader := c.waitLeader(c.nodes, 30*time.Second)
	var follower *qnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	if out := runCLI(t, "step-down", "--url", follower.url("")); !strings.Contains(out, "nothing transferred") {
		t.Fatalf("step-down of a follower: %q, want nothing transferred", out)
	}
	if out := runCLI(t, "step-down", "--url", leader.url(""), "--json"); strings.TrimSpace(out) != `{"transferred":[1]}` {
		t.Fatalf("step-down of the leader: %q, want {\"transferred\":[1]}", out)
	}
	waitFor(t, 30*time.Second, "another node to lead", func() (bool, string) {
		hs, errs, desc := c.healths(c.nodes)
		for i, h := range hs {
			if errs[i] == nil && h.Role == "leader" && c.nodes[i] != leader {
				return true, desc
			}
		}
		return false, desc
	})
}
