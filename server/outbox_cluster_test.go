package server_test

import (
	"testing"
	"time"

	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/servertest"
)

// A transaction through HTTP that acks a message of a queue in group 1 and
// pushes to a queue of group 2 commits (docs/api.md §8.1, the outbox):
// both results are real, the pushed message is popped from group 2 once,
// and the input is acked. One whose acks lie in two groups is 409
// spans_groups.
func TestGroups_TransactionAcrossGroups(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 3, nil)
	fc := nodeClient(t, c, c.Follower(1))
	configureIn(t, fc, "tx-in", 1)
	configureIn(t, fc, "tx-out", 2)
	configureIn(t, fc, "tx-other", 2)
	for _, q := range []string{"tx-in", "tx-out", "tx-other"} {
		waitPlaced(t, c, q, map[string]uint32{"tx-in": 1, "tx-out": 2, "tx-other": 2}[q])
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ready := true
		for _, n := range c.Nodes {
			ready = ready && n.Host.GroupStatus(1).ClusterVersion == command.MaxVersion
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cluster did not reach command version 2")
		}
	}
	type popped struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
			LeaseID       string `json:"leaseId"`
		} `json:"messages"`
	}
	popOne := func(queue string) map[string]any {
		var p popped
		fc.do("GET", "/api/v1/pop/queue/"+queue+"?batch=1", nil).expect(t, 200).decode(t, &p)
		if len(p.Messages) != 1 {
			t.Fatalf("pop %s: %d messages, want 1", queue, len(p.Messages))
		}
		m := p.Messages[0]
		return map[string]any{"type": "ack", "transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"leaseId": m.LeaseID, "status": "completed"}
	}
	fc.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{{"queue": "tx-in", "transactionId": "in-1", "payload": 1}}}).expect(t, 201)
	var tx struct {
		Success bool `json:"success"`
		Results []struct {
			Type          string `json:"type"`
			Success       bool   `json:"success"`
			Status        string `json:"status"`
			TransactionID string `json:"transactionId"`
			MessageID     string `json:"messageId"`
			PartitionID   string `json:"partitionId"`
			QueueName     string `json:"queueName"`
		} `json:"results"`
	}
	fc.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		popOne("tx-in"),
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "tx-out", "transactionId": "out-1", "payload": 2}}},
	}}).expect(t, 200).decode(t, &tx)
	if !tx.Success || len(tx.Results) != 2 || tx.Results[0].Type != "ack" || !tx.Results[0].Success ||
		tx.Results[1].Status != "queued" || tx.Results[1].QueueName != "tx-out" || tx.Results[1].MessageID == "" || tx.Results[1].PartitionID == "" {
		t.Fatalf("transaction across groups: %+v", tx)
	}
	var out popped
	fc.do("GET", "/api/v1/pop/queue/tx-out?batch=10", nil).expect(t, 200).decode(t, &out)
	if len(out.Messages) != 1 || out.Messages[0].TransactionID != "out-1" {
		t.Fatalf("tx-out holds %+v, want out-1 once", out.Messages)
	}
	if r := fc.do("GET", "/api/v1/pop/queue/tx-in?batch=10", nil); r.status != 204 {
		t.Fatalf("tx-in after its ack committed: %d, want 204", r.status)
	}

	fc.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
		{"queue": "tx-in", "transactionId": "in-2", "payload": 1}, {"queue": "tx-other", "transactionId": "o-1", "payload": 1}}}).expect(t, 201)
	fc.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{popOne("tx-in"), popOne("tx-other")}}).
		expectError(t, 409, "spans_groups")
}
