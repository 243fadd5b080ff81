package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The traces routes over real HTTP (docs/api.md §13).

type traceReply struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transaction_id"`
	PartitionID   string          `json:"partition_id"`
	EventType     string          `json:"event_type"`
	Data          json.RawMessage `json:"data"`
	ConsumerGroup string          `json:"consumer_group"`
	WorkerID      string          `json:"worker_id"`
	CreatedAt     string          `json:"created_at"`
	TraceNames    []string        `json:"trace_names"`
	QueueName     *string         `json:"queue_name"`
	PartitionName *string         `json:"partition_name"`
	Payload       json.RawMessage `json:"message_payload"`
}

func (c *client) trace(body map[string]any) string {
	c.t.Helper()
	var out struct {
		Success bool   `json:"success"`
		TraceID string `json:"traceId"`
	}
	c.do("POST", "/api/v1/traces", body).expect(c.t, 201).decode(c.t, &out)
	if !out.Success || out.TraceID == "" {
		c.t.Fatalf("trace: %+v", out)
	}
	return out.TraceID
}

func (c *client) traces(path string) []traceReply {
	c.t.Helper()
	var out struct {
		Traces []traceReply `json:"traces"`
	}
	c.do("GET", path, nil).expect(c.t, 200).decode(c.t, &out)
	if out.Traces == nil {
		c.t.Fatalf("GET %s: traces is not an array", path)
	}
	return out.Traces
}

// A trace is recorded against a retained message with Queen's defaults
// (queue mode, "info", names as a string or an array, deduplicated and
// sorted) and read back oldest first; bad bodies are 400s and a message that
// does not exist is a 404.
func TestTraces_RecordAndReadByMessage(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	part := c.pushOne("orders", "", "o-1", map[string]any{"id": 1}).PartitionID
	first := c.trace(map[string]any{"transactionId": "o-1", "partitionId": part, "data": map[string]any{"step": "charge"},
		"traceNames": []any{"tenant-7", "order-1", "tenant-7", 5}, "consumerGroup": nil, "eventType": nil})
	c.elapse(time.Millisecond)
	c.trace(map[string]any{"transactionId": "o-1", "partitionId": part, "data": nil, "traceNames": "order-1",
		"consumerGroup": "billing", "eventType": "error"})
	got := c.traces("/api/v1/traces/" + part + "/o-1")
	if len(got) != 2 || got[0].ID != first || got[0].EventType != "info" || got[0].ConsumerGroup != "__QUEUE_MODE__" ||
		string(got[0].Data) != `{"step":"charge"}` || !slices.Equal(got[0].TraceNames, []string{"order-1", "tenant-7"}) ||
		got[1].EventType != "error" || got[1].ConsumerGroup != "billing" || string(got[1].Data) != "null" ||
		!slices.Equal(got[1].TraceNames, []string{"order-1"}) || got[0].WorkerID == "" ||
		!strings.HasSuffix(got[0].CreatedAt, "Z") || len(got[0].CreatedAt) != len("2026-01-01T00:00:00.000Z") {
		t.Fatalf("traces %+v", got)
	}
	if none := c.traces("/api/v1/traces/" + part + "/other"); len(none) != 0 {
		t.Fatalf("an unknown message has traces %+v", none)
	}
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"partitionId": part, "data": 1}, "transactionId and partitionId are required"},
		{map[string]any{"transactionId": "o-1", "data": 1}, "transactionId and partitionId are required"},
		{map[string]any{"transactionId": "o-1", "partitionId": part}, "data is required"},
		{map[string]any{"transactionId": "o-1", "partitionId": "x", "data": 1}, "partitionId must be a UUID"},
		{map[string]any{"transactionId": "o-1", "partitionId": part, "data": 1, "traceNames": strings.Repeat("n", 256)}, "trace names must be"},
	} {
		r := c.do("POST", "/api/v1/traces", tc.body)
		if r.status != 400 || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("trace %v: %d %s, want 400 %q", tc.body, r.status, r.body, tc.want)
		}
	}
	c.do("POST", "/api/v1/traces", map[string]any{"transactionId": "nope", "partitionId": part, "data": 1}).
		expectError(t, 404, "message_not_found")
}

// By name: oldest first, paged with a total, joined with the message's
// queue, partition and payload. The names list counts records and distinct
// transaction ids, newest last_seen first.
func TestTraces_ByNameAndNames(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var part string
	for i := range 5 {
		part = c.pushOne("orders", "eu", fmt.Sprint("o-", i), map[string]any{"i": i}).PartitionID
	}
	for i := range 5 {
		c.trace(map[string]any{"transactionId": fmt.Sprint("o-", i), "partitionId": part, "data": i, "traceNames": "batch"})
		c.elapse(time.Millisecond)
	}
	c.trace(map[string]any{"transactionId": "o-0", "partitionId": part, "data": "again", "traceNames": []any{"batch", "late"}})

	var page struct {
		Traces     []traceReply `json:"traces"`
		Total      int          `json:"total"`
		Pagination struct {
			Limit  int `json:"limit"`
			Offset int `json:"offset"`
		} `json:"pagination"`
	}
	c.do("GET", "/api/v1/traces/by-name/batch?limit=2&offset=1", nil).expect(t, 200).decode(t, &page)
	if page.Total != 6 || page.Pagination.Limit != 2 || page.Pagination.Offset != 1 || len(page.Traces) != 2 ||
		page.Traces[0].TransactionID != "o-1" || page.Traces[1].TransactionID != "o-2" ||
		page.Traces[0].QueueName == nil || *page.Traces[0].QueueName != "orders" || *page.Traces[0].PartitionName != "eu" ||
		string(page.Traces[0].Payload) != `{"i":1}` || page.Traces[0].PartitionID != part {
		t.Fatalf("by name: %+v", page)
	}
	c.do("GET", "/api/v1/traces/by-name/batch?offset=6", nil).expect(t, 200).decode(t, &page)
	if page.Traces == nil || len(page.Traces) != 0 || page.Total != 6 {
		t.Fatalf("past the end: %+v", page)
	}

	var names struct {
		TraceNames []struct {
			Name         string `json:"trace_name"`
			TraceCount   int    `json:"trace_count"`
			MessageCount int    `json:"message_count"`
			LastSeen     string `json:"last_seen"`
		} `json:"trace_names"`
		Total int `json:"total"`
	}
	c.do("GET", "/api/v1/traces/names", nil).expect(t, 200).decode(t, &names)
	if names.Total != 2 || len(names.TraceNames) != 2 {
		t.Fatalf("names %+v", names)
	}
	batch, late := names.TraceNames[0], names.TraceNames[1]
	if batch.LastSeen != late.LastSeen || batch.Name != "batch" || batch.TraceCount != 6 || batch.MessageCount != 5 ||
		late.Name != "late" || late.TraceCount != 1 || late.MessageCount != 1 {
		t.Fatalf("names %+v", names.TraceNames)
	}
}

// Traces go with their message when retention deletes its segment, index
// entries included (engine.Check runs at cleanup); a message holds at most
// 256 of them.
func TestTraces_RemovedByRetentionAndBounded(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("orders", map[string]any{"retentionEnabled": true, "retentionSeconds": 60})
	part := c.pushOne("orders", "", "o-1", 1).PartitionID
	for i := range 256 {
		c.trace(map[string]any{"transactionId": "o-1", "partitionId": part, "data": i, "traceNames": "n"})
	}
	c.do("POST", "/api/v1/traces", map[string]any{"transactionId": "o-1", "partitionId": part, "data": 0}).
		expectError(t, 409, "trace_limit")
	c.elapse(61 * time.Second)
	if res := c.sweep(); res.Messages != 1 {
		t.Fatalf("sweep %+v", res)
	}
	if got := c.traces("/api/v1/traces/" + part + "/o-1"); len(got) != 0 {
		t.Fatalf("%d traces survive their message", len(got))
	}
	var names struct {
		TraceNames []any `json:"trace_names"`
		Total      int   `json:"total"`
	}
	c.do("GET", "/api/v1/traces/names", nil).expect(t, 200).decode(t, &names)
	if names.Total != 0 || len(names.TraceNames) != 0 {
		t.Fatalf("names after retention %+v", names)
	}
}
