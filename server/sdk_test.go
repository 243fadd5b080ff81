package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
)

// These tests drive the API the way the official SDKs do (docs/api.md §1.5, §4-§9):
// their headers, bodies, query strings and path escaping, and they assert
// the fields each SDK reads.

// TestSDK_JavaScript follows client-v2: configure with null namespace/task
// and the default options, push with a client UUIDv7 transactionId, pop
// (wait=true is its default), ack single and batch, renew with {}, DLQ read
// with every builder parameter, a transaction, moveMessageToDLQ,
// retryMessage and queue deletion.
func TestSDK_JavaScript(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.header = http.Header{"Content-Type": {"application/json"}}

	options := map[string]any{"leaseTime": 300, "retryLimit": 3, "priority": 0, "delayedProcessing": 0,
		"windowBuffer": 0, "maxSize": 0, "retentionSeconds": 0, "completedRetentionSeconds": 0, "encryptionEnabled": false}
	cfg := c.do("POST", "/api/v1/configure", map[string]any{"queue": "orders", "namespace": nil, "task": nil, "options": options}).
		expect(t, 200).object(t)
	if cfg["configured"] != true || cfg["queue"] != "orders" {
		t.Fatalf("configure reply %v", cfg)
	}
	if _, ok := cfg["namespace"].(string); !ok {
		t.Fatalf("namespace %v, want a string", cfg["namespace"])
	}
	got := cfg["options"].(map[string]any)
	for k, v := range options {
		if want, _ := json.Marshal(v); string(mustJSON(t, got[k])) != string(want) {
			t.Fatalf("options.%s = %v, sent %v", k, got[k], v)
		}
	}
	for _, k := range []string{"ttl", "retryDelay", "deadLetterQueue", "dlqAfterMaxRetries", "retentionEnabled", "maxWaitTimeSeconds"} {
		if _, ok := got[k]; !ok {
			t.Fatalf("options lacks %s: %v", k, got)
		}
	}

	txn := uuid.Must(uuid.NewV7()).String()
	var pushed []pushResult
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "orders", "partition": "Default", "payload": map[string]any{"id": 1}, "transactionId": txn},
		map[string]any{"queue": "orders", "partition": "Default", "payload": map[string]any{"id": 1}, "transactionId": txn},
		map[string]any{"queue": "orders", "partition": "Default", "payload": map[string]any{"id": 2}, "transactionId": uuid.Must(uuid.NewV7()).String()},
	}}).expect(t, 201).decode(t, &pushed)
	if pushed[0].Status != "queued" || pushed[1].Status != "duplicate" || pushed[1].MessageID != pushed[0].MessageID {
		t.Fatalf("push reply %+v", pushed)
	}

	p := c.mustPop("/api/v1/pop/queue/orders?batch=1&wait=true&timeout=30000&consumerGroup=billing")
	m := p.Messages[0]
	if m.TransactionID != txn || m.PartitionID == "" || m.LeaseID == "" || m.ConsumerGroup != "billing" || string(m.Data) != `{"id":1}` {
		t.Fatalf("popped %+v", m)
	}
	var renewed struct {
		LeaseID        string `json:"leaseId"`
		NewExpiresAt   string `json:"newExpiresAt"`
		LeaseExpiresAt string `json:"lease_expires_at"`
	}
	c.do("POST", "/api/v1/lease/"+m.LeaseID+"/extend", `{}`).expect(t, 200).decode(t, &renewed)
	if renewed.LeaseID != m.LeaseID || renewed.NewExpiresAt == "" || renewed.LeaseExpiresAt != renewed.NewExpiresAt {
		t.Fatalf("renew reply %+v", renewed)
	}

	var single []ackResult
	c.do("POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"status": "completed", "error": nil, "consumerGroup": "billing", "leaseId": m.LeaseID}).expect(t, 200).decode(t, &single)
	if len(single) != 1 || !single[0].Success {
		t.Fatalf("single ack reply %+v", single)
	}

	p = c.mustPop("/api/v1/pop/queue/orders?batch=1&wait=true&timeout=30000&consumerGroup=billing")
	m = p.Messages[0]
	var batch []ackResult
	c.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": "dlq", "error": "unknown payload version", "leaseId": m.LeaseID},
	}, "consumerGroup": "billing"}).expect(t, 200).decode(t, &batch)
	if !batch[0].DLQ || batch[0].QueueName == nil || *batch[0].QueueName != "orders" {
		t.Fatalf("batch ack reply %+v", batch)
	}

	from := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"))
	to := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"))
	page := c.dlq("queue=orders&limit=10&offset=0&consumerGroup=billing&partition=Default&from=" + from + "&to=" + to)
	if page.Total != 1 || len(page.Messages) != 1 || page.Messages[0].ErrorMessage != "unknown payload version" {
		t.Fatalf("dlq page %+v", page)
	}

	// Replay (admin.retryMessage posts {}), then move it back (docs/decisions.md B3).
	var replay struct {
		Success    bool       `json:"success"`
		ReplayedAs pushResult `json:"replayedAs"`
	}
	c.do("POST", "/api/v1/messages/"+m.PartitionID+"/"+m.TransactionID+"/retry", `{}`).expect(t, 200).decode(t, &replay)
	if !replay.Success {
		t.Fatalf("replay %+v", replay)
	}
	moved := c.do("POST", "/api/v1/messages/"+m.PartitionID+"/"+replay.ReplayedAs.TransactionID+"/dlq", map[string]any{"consumerGroup": "billing"}).
		expect(t, 200).object(t)
	if moved["success"] != true || moved["dlq"] != true {
		t.Fatalf("moveMessageToDLQ reply %v", moved)
	}

	// A transaction as the JS builder sends it: acks without leaseId, push
	// items without transactionId, requiredLeases.
	c.pushOne("inbox", "", "in", 1)
	in := c.mustPop("/api/v1/pop/queue/inbox?batch=1&wait=true&timeout=30000").Messages[0]
	tx := c.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": in.TransactionID, "partitionId": in.PartitionID, "status": "completed"},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "shipments", "payload": map[string]any{"order": 1}}}},
	}, "requiredLeases": []string{in.LeaseID}}).expect(t, 200).object(t)
	if tx["success"] != true {
		t.Fatalf("transaction reply %v", tx)
	}

	del := c.do("DELETE", "/api/v1/resources/queues/orders", nil).expect(t, 200).object(t)
	if del["deleted"] != true {
		t.Fatalf("delete reply %v", del)
	}
}

// TestSDK_Python follows the Python client: no Content-Type on bodyless
// requests, and POSTs whose {} body it drops (lease extend, retry).
func TestSDK_Python(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.header = http.Header{"Content-Type": {"application/json"}}
	c.do("POST", "/api/v1/configure", map[string]any{"queue": "jobs", "namespace": nil, "task": nil,
		"options": map[string]any{"leaseTime": 60, "retryLimit": 1, "deadLetterQueue": true}}).expect(t, 200)
	c.pushOne("jobs", "", "j1", map[string]any{"x": 1})

	p := c.mustPop("/api/v1/pop/queue/jobs?batch=1&wait=true&timeout=30000")
	m := p.Messages[0]
	renewed := c.do("POST", "/api/v1/lease/"+m.LeaseID+"/extend", nil).expect(t, 200).object(t)
	if renewed["newExpiresAt"] == nil || renewed["success"] != true {
		t.Fatalf("bodyless renew reply %v", renewed)
	}
	var res []ackResult
	c.do("POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"status": "failed", "error": "boom", "consumerGroup": nil}).expect(t, 200).decode(t, &res)
	if !res[0].Success || res[0].Error != nil {
		t.Fatalf("result[0] %+v", res[0])
	}
	m = c.mustPop("/api/v1/pop/queue/jobs?batch=1&wait=true&timeout=30000").Messages[0]
	c.do("POST", "/api/v1/ack", map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
		"status": "failed", "error": "boom again"}).expect(t, 200).decode(t, &res)
	if !res[0].DLQ {
		t.Fatalf("exhausting nack %+v", res[0])
	}
	r := c.do("POST", "/api/v1/messages/"+m.PartitionID+"/"+m.TransactionID+"/retry", nil).expect(t, 200).object(t)
	if r["success"] != true || r["dlqRowRemoved"] != true {
		t.Fatalf("bodyless retry reply %v", r)
	}
}

// TestSDK_Go follows the Go client and queenctl: Accept and Content-Type
// headers, configure with only non-zero options, escaped path segments,
// wait=false pops, batch acks with a top-level group, renew with {} parsed
// as RFC 3339, DLQ rows, and /health as `queenctl ping` reads it.
func TestSDK_Go(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	cfg := c.do("POST", "/api/v1/configure", map[string]any{"queue": "orders.eu", "options": map[string]any{"leaseTime": 30, "retryLimit": 2}}).
		expect(t, 200).object(t)
	if cfg["configured"] != true || cfg["namespace"] != "orders" || cfg["task"] != "eu" {
		t.Fatalf("configure reply %v", cfg)
	}
	for _, part := range []string{"ord:42", "eu west/1"} {
		c.do("POST", "/api/v1/push", map[string]any{"items": []any{
			map[string]any{"queue": "orders.eu", "partition": part, "payload": map[string]any{"p": part}, "transactionId": "t-" + part},
		}}).expect(t, 201)
		path := "/api/v1/pop/queue/" + url.PathEscape("orders.eu") + "/partition/" + url.PathEscape(part) +
			"?batch=1&wait=false&timeout=30000&consumerGroup=queenctl-tail&autoAck=false"
		p := c.mustPop(path)
		m := p.Messages[0]
		if m.Partition != part || m.Queue != "orders.eu" || m.CreatedAt == "" {
			t.Fatalf("popped %+v from %q", m, part)
		}
		if _, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err != nil {
			t.Fatalf("createdAt %q: %v", m.CreatedAt, err)
		}
		var renewed map[string]any
		c.do("POST", "/api/v1/lease/"+url.PathEscape(m.LeaseID)+"/extend", `{}`).expect(t, 200).decode(t, &renewed)
		if _, err := time.Parse(time.RFC3339, renewed["newExpiresAt"].(string)); err != nil {
			t.Fatalf("newExpiresAt %v: %v", renewed["newExpiresAt"], err)
		}
		var res []ackResult
		c.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
			map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID, "status": "failed", "error": "nope"},
		}, "consumerGroup": "queenctl-tail"}).expect(t, 200).decode(t, &res)
		if !res[0].Success || res[0].Error != nil {
			t.Fatalf("ack %+v", res[0])
		}
	}
	// The Go SDK's DLQ view.
	p := c.mustPop("/api/v1/pop/queue/orders.eu/partition/ord:42?batch=1&wait=false&timeout=30000&consumerGroup=queenctl-tail")
	c.do("POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID, "partitionId": p.Messages[0].PartitionID,
		"leaseId": p.Messages[0].LeaseID, "status": "dlq", "error": "bad", "consumerGroup": "queenctl-tail"}).expect(t, 200)
	var raw map[string]any
	c.do("GET", "/api/v1/dlq?queue=orders.eu&consumerGroup=queenctl-tail&limit=50", nil).expect(t, 200).decode(t, &raw)
	rows := raw["messages"].([]any)
	if raw["total"] != float64(1) || len(rows) != 1 {
		t.Fatalf("dlq %v", raw)
	}
	row := rows[0].(map[string]any)
	for _, k := range []string{"transactionId", "partitionId", "queue", "partition", "data", "createdAt", "errorMessage", "retryCount", "failedAt", "consumerGroup"} {
		if _, ok := row[k]; !ok {
			t.Fatalf("dlq row lacks %s: %v", k, row)
		}
	}
	if _, ok := row["data"].(map[string]any); !ok {
		t.Fatalf("dlq data is not an object: %v", row["data"])
	}
	// queenctl ping.
	health := c.do("GET", "/health", nil).expect(t, 200).object(t)
	if health["status"] != "healthy" || health["database"] != "connected" || health["version"] == "" {
		t.Fatalf("health %v", health)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
