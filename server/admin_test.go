package server_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
)

func TestConfigure_MergeNullResetAndReplace(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	opts := func(body string) map[string]any {
		t.Helper()
		r := c.do("POST", "/api/v1/configure", body).expect(t, 200).object(t)
		if r["configured"] != true || r["queueId"] == "" || r["partitionId"] == nil {
			t.Fatalf("reply %v", r)
		}
		return r["options"].(map[string]any)
	}
	o := opts(`{"queue":"q","options":{"leaseTime":10,"retryLimit":7,"deadLetterQueue":false}}`)
	if o["leaseTime"] != float64(10) || o["retryLimit"] != float64(7) || o["deadLetterQueue"] != false || o["dlqAfterMaxRetries"] != true {
		t.Fatalf("after set: %v", o)
	}
	o = opts(`{"queue":"q","options":{"retryLimit":2}}`) // absent keeps (docs/decisions.md C5)
	if o["leaseTime"] != float64(10) || o["retryLimit"] != float64(2) {
		t.Fatalf("after merge: %v", o)
	}
	o = opts(`{"queue":"q","options":{"leaseTime":null}}`) // null resets
	if o["leaseTime"] != float64(300) || o["retryLimit"] != float64(2) {
		t.Fatalf("after reset: %v", o)
	}
	o = opts(`{"queue":"q","replace":true,"options":{"priority":5}}`)
	if o["priority"] != float64(5) || o["retryLimit"] != float64(3) || o["deadLetterQueue"] != true {
		t.Fatalf("after replace: %v", o)
	}
	r := c.do("POST", "/api/v1/configure", `{"queue":"q","namespace":"ns","task":"tk","options":{"unknownKey":1}}`).expect(t, 200).object(t)
	if r["namespace"] != "ns" || r["task"] != "tk" {
		t.Fatalf("labels %v", r)
	}
	// Null labels keep what is set.
	r = c.do("POST", "/api/v1/configure", `{"queue":"q","namespace":null,"task":null}`).expect(t, 200).object(t)
	if r["namespace"] != "ns" || r["task"] != "tk" {
		t.Fatalf("labels after null %v", r)
	}
}

func TestResources_QueuesOverviewNamespacesTasks(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("billing.invoices", nil)
	for i := range 3 {
		c.pushOne("billing.invoices", "p1", string(rune('a'+i)), i)
	}
	p := c.mustPop(popPath("billing.invoices", "batch=1"))
	c.ack(p.Messages[0], "dlq", "bad")

	var list struct {
		Queues []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Messages  struct {
				Total, Pending, Processing int
			} `json:"messages"`
		} `json:"queues"`
	}
	c.do("GET", "/api/v1/resources/queues", nil).expect(t, 200).decode(t, &list)
	if len(list.Queues) != 1 || list.Queues[0].Namespace != "billing" || list.Queues[0].Messages.Total != 3 || list.Queues[0].Messages.Pending != 2 {
		t.Fatalf("queues %+v", list)
	}
	var detail struct {
		Partitions []struct {
			Name  string `json:"name"`
			Stats struct {
				Total, Pending, Completed, DeadLetter int
			} `json:"stats"`
		} `json:"partitions"`
		Totals struct {
			DeadLetter int `json:"deadLetter"`
		} `json:"totals"`
	}
	c.do("GET", "/api/v1/resources/queues/billing.invoices", nil).expect(t, 200).decode(t, &detail)
	if len(detail.Partitions) != 2 || detail.Totals.DeadLetter != 1 {
		t.Fatalf("detail %+v", detail)
	}
	for _, part := range detail.Partitions {
		if part.Name == "p1" && (part.Stats.Total != 3 || part.Stats.Completed != 1 || part.Stats.DeadLetter != 1) {
			t.Fatalf("p1 stats %+v", part.Stats)
		}
	}
	ov := c.do("GET", "/api/v1/resources/overview", nil).expect(t, 200).object(t)
	for _, k := range []string{"queues", "partitions", "namespaces", "tasks", "messages", "lag", "throughput", "timestamp", "statsAge"} {
		if _, ok := ov[k]; !ok {
			t.Fatalf("overview lacks %s: %v", k, ov)
		}
	}
	ns := c.do("GET", "/api/v1/resources/namespaces", nil).expect(t, 200).object(t)["namespaces"].([]any)
	if len(ns) != 1 || ns[0].(map[string]any)["namespace"] != "billing" {
		t.Fatalf("namespaces %v", ns)
	}
	tasks := c.do("GET", "/api/v1/resources/tasks", nil).expect(t, 200).object(t)["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["task"] != "invoices" {
		t.Fatalf("tasks %v", tasks)
	}
}

func TestStatus_ShapesHaveQueensTopLevelKeys(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	for path, keys := range map[string][]string{
		"/api/v1/status":             {"timeRange", "bucketMinutes", "pointCount", "throughput", "queues", "messages", "leases", "deadLetterQueue", "workers", "errors", "statsAge"},
		"/api/v1/status/queues":      {"queues", "pagination"},
		"/api/v1/status/queues/q":    {"queue", "partitions", "totals"},
		"/api/v1/status/analytics":   {"dataPoints", "interval", "from", "to"},
		"/api/v1/status/buffers":     {"pending", "failed", "dbHealthy"},
		"/api/v1/system/maintenance": {"maintenanceMode", "popMaintenanceMode", "bufferedMessages", "bufferHealthy"},
		"/metrics":                   {"uptime", "requests", "messages", "database", "memory", "cpu"},
	} {
		obj := c.do("GET", path, nil).expect(t, 200).object(t)
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				t.Fatalf("%s lacks %s: %v", path, k, obj)
			}
		}
	}
	c.do("GET", "/api/v1/status/queues/nope", nil).expectError(t, 404, "queue_not_found")
}

// docs/semantics.md §12 and the second half of §16.40: with push maintenance on a
// push answers 201 "buffered" and nothing is stored until maintenance ends,
// then the spool is replayed (idempotently); with pop maintenance on a pop
// answers 204 and leaves leases and cursors alone.
func TestMaintenance_PushBuffersAndReplaysPopPauses(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	on := c.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200).object(t)
	if on["maintenanceMode"] != true || on["popMaintenanceMode"] != false {
		t.Fatalf("push maintenance on: %v", on)
	}
	var res []map[string]any
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{
		map[string]any{"queue": "m", "payload": map[string]any{"n": 1}, "transactionId": "t1"},
		map[string]any{"queue": "m", "payload": map[string]any{"n": 2}},
	}}).expect(t, 201).decode(t, &res)
	if len(res) != 2 || res[0]["status"] != "buffered" || res[0]["transactionId"] != "t1" || res[1]["transactionId"] == "" {
		t.Fatalf("buffered push: %v", res)
	}
	c.do("GET", "/api/v1/resources/queues/m", nil).expectError(t, 404, "queue_not_found")
	st := c.do("GET", "/api/v1/system/maintenance", nil).expect(t, 200).object(t)
	if st["bufferedMessages"] != float64(2) {
		t.Fatalf("maintenance status: %v", st)
	}
	c.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).expect(t, 200)
	// Answered "buffered", the items are counted once replayed; the
	// replay may take more than one push, so pop only once both are in
	// (a group's pop between the two would take the first alone).
	c.waitMetric(`queen_push_messages_total{status="queued"}`, 2)
	got := c.mustPop(popPath("m", "batch=10&consumerGroup=g"))
	if len(got.Messages) != 2 || got.Messages[0].TransactionID != "t1" {
		t.Fatalf("replayed in order: %+v", got.Messages)
	}
	// The spool's file goes once its push is answered, a moment after
	// the push is counted.
	waitUntil(t, "the spool empty after the replay", func() bool {
		return c.do("GET", "/api/v1/status/buffers", nil).expect(t, 200).object(t)["pending"] == float64(0)
	})

	c.do("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": true}).expect(t, 200)
	c.pushOne("m", "", "t3", 3)
	if r := c.do("GET", popPath("m", "batch=10"), nil); r.status != 204 {
		t.Fatalf("pop during pop maintenance: %d %s", r.status, r.body)
	}
	c.do("POST", "/api/v1/system/maintenance/pop", map[string]any{"enabled": false}).expect(t, 200)
	if p := c.mustPop(popPath("m", "batch=10")); len(p.Messages) != 3 {
		t.Fatalf("queue mode after pop maintenance: %d messages", len(p.Messages))
	}
	c.do("POST", "/api/v1/system/maintenance", map[string]any{}).expectError(t, 400, "invalid_argument")
}

func TestGroups_ListDetailLaggingSeekSubscriptionDelete(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "a", "m1", 1)
	c.pushOne("q", "b", "m2", 2)
	c.mustPop(popPath("q", "batch=10&consumerGroup=G&subscriptionMode=all"))

	var list []struct {
		Name              string `json:"name"`
		QueueName         string `json:"queueName"`
		Members           int    `json:"members"`
		TotalLag          int    `json:"totalLag"`
		State             string `json:"state"`
		SubscriptionMode  string `json:"subscriptionMode"`
		PartitionsWithLag int    `json:"partitionsWithLag"`
	}
	c.do("GET", "/api/v1/consumer-groups", nil).expect(t, 200).decode(t, &list)
	if len(list) != 1 || list[0].Name != "G" || list[0].QueueName != "q" || list[0].Members != 2 ||
		list[0].TotalLag != 2 || list[0].SubscriptionMode != "all" {
		t.Fatalf("groups %+v", list)
	}
	detail := c.do("GET", "/api/v1/consumer-groups/G", nil).expect(t, 200).object(t)
	if parts := detail["q"].(map[string]any)["partitions"].([]any); len(parts) != 2 {
		t.Fatalf("detail %v", detail)
	}
	if unknown := c.do("GET", "/api/v1/consumer-groups/nobody", nil).expect(t, 200).object(t); len(unknown) != 0 {
		t.Fatalf("unknown group %v", unknown)
	}
	var lagging []map[string]any
	c.do("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=3600", nil).expect(t, 200).decode(t, &lagging)
	if len(lagging) != 0 {
		t.Fatalf("lagging with min 3600 s: %v", lagging)
	}
	c.do("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil).expect(t, 200).decode(t, &lagging)
	if len(lagging) != 2 || lagging[0]["consumer_group"] != "G" {
		t.Fatalf("lagging %v", lagging)
	}

	// Per-partition seek with no body moves to the end.
	seek := c.do("POST", "/api/v1/consumer-groups/G/queues/q/partitions/a/seek", nil).expect(t, 200).object(t)
	if seek["success"] != true || seek["cursorMovedTo"] != "end" || seek["partitionName"] != "a" {
		t.Fatalf("partition seek %v", seek)
	}
	c.do("POST", "/api/v1/consumer-groups/G/queues/q/partitions/zz/seek", nil).expectError(t, 404, "partition_not_found")

	sub := c.do("POST", "/api/v1/consumer-groups/G/subscription", map[string]any{"subscriptionTimestamp": time.Now().UTC().Format(time.RFC3339)}).
		expect(t, 200).object(t)
	if sub["success"] != true || sub["rowsUpdated"] != float64(1) {
		t.Fatalf("subscription %v", sub)
	}
	del := c.do("DELETE", "/api/v1/consumer-groups/G?deleteMetadata=false", nil).expect(t, 200).object(t)
	if del["deletedPartitions"] != float64(2) || del["metadataDeleted"] != false {
		t.Fatalf("delete %v", del)
	}
}

func TestMessages_DetailAndListing(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	res := c.pushOne("q", "", "m", map[string]any{"k": "v"})
	detail := c.do("GET", "/api/v1/messages/"+res.PartitionID+"/m", nil).expect(t, 200).object(t)
	if detail["status"] != "pending" || detail["queue"] != "q" || detail["id"] != res.MessageID {
		t.Fatalf("detail %v", detail)
	}
	p := c.mustPop(popPath("q", "batch=1"))
	if got := c.do("GET", "/api/v1/messages/"+res.PartitionID+"/m", nil).expect(t, 200).object(t)["status"]; got != "processing" {
		t.Fatalf("status while leased %v", got)
	}
	c.ack(p.Messages[0], "dlq", "why")
	detail = c.do("GET", "/api/v1/messages/"+res.PartitionID+"/m", nil).expect(t, 200).object(t)
	if detail["status"] != "dead_letter" || detail["errorMessage"] != "why" {
		t.Fatalf("detail after dlq %v", detail)
	}
	c.do("GET", "/api/v1/messages/"+res.PartitionID+"/nope", nil).expectError(t, 404, "message_not_found")
	c.pushOne("q", "", "m2", map[string]any{"k": "w"})
	c.pushOne("other", "", "o", map[string]any{})
	var list struct {
		Messages []map[string]any `json:"messages"`
		Mode     map[string]any   `json:"mode"`
	}
	c.do("GET", "/api/v1/messages?queue=q", nil).expect(t, 200).decode(t, &list)
	if len(list.Messages) != 2 || list.Messages[0]["transactionId"] != "m2" || list.Messages[1]["transactionId"] != "m" {
		t.Fatalf("listing, newest first: %v", list.Messages)
	}
	if list.Messages[0]["status"] != "pending" || list.Messages[1]["status"] != "dead_letter" ||
		list.Messages[1]["queueStatus"] != "completed" || list.Messages[0]["queuePath"] != "q/Default" {
		t.Fatalf("listing statuses: %v", list.Messages)
	}
	if list.Mode["type"] != "queue" {
		t.Fatalf("listing mode: %v", list.Mode)
	}
	c.do("GET", "/api/v1/messages?queue=q&status=dead_letter", nil).expect(t, 200).decode(t, &list)
	if len(list.Messages) != 1 || list.Messages[0]["transactionId"] != "m" {
		t.Fatalf("dead_letter listing: %v", list.Messages)
	}
	c.do("GET", "/api/v1/messages?queue=q&limit=1&offset=1", nil).expect(t, 200).decode(t, &list)
	if len(list.Messages) != 1 || list.Messages[0]["transactionId"] != "m" {
		t.Fatalf("second page: %v", list.Messages)
	}
	c.do("GET", "/api/v1/messages?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z", nil).expect(t, 200).decode(t, &list)
	if len(list.Messages) != 0 {
		t.Fatalf("listing outside the window: %v", list.Messages)
	}
	c.do("GET", "/api/v1/messages?status=bogus", nil).expectError(t, 400, "invalid_argument")
	// The manual path: delete the row.
	del := c.do("DELETE", "/api/v1/messages/"+res.PartitionID+"/m", nil).expect(t, 200).object(t)
	if del["success"] != true || del["message"] != "Message deleted successfully" {
		t.Fatalf("delete %v", del)
	}
	c.do("DELETE", "/api/v1/messages/"+res.PartitionID+"/m", nil).expectError(t, 404, "no_dead_letter")
}

func TestMoveToDLQ_PendingConsumedAndMissing(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	res := c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2)
	path := "/api/v1/messages/" + res.PartitionID + "/m1/dlq"
	moved := c.do("POST", path, map[string]any{"error": "operator"}).expect(t, 200).object(t)
	if moved["dlq"] != true || moved["consumerGroup"] != "__QUEUE_MODE__" {
		t.Fatalf("move %v", moved)
	}
	c.do("POST", path, nil).expectError(t, 409, "already_consumed")
	c.do("POST", "/api/v1/messages/"+res.PartitionID+"/nope/dlq", nil).expectError(t, 404, "message_not_found")
	if page := c.dlq("queue=q"); page.Total != 1 || page.Messages[0].ErrorMessage != "operator" {
		t.Fatalf("dlq %+v", page)
	}
	if p := c.mustPop(popPath("q", "batch=10")); !equalStrings(txns(p.Messages), []string{"m2"}) {
		t.Fatalf("after move got %v", txns(p.Messages))
	}
}

func TestDLQ_FiltersTotalAndPaging(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, part := range []string{"a", "b"} {
		for i := range 3 {
			c.pushOne("q", part, part+string(rune('0'+i)), i)
		}
	}
	for _, part := range []string{"a", "b"} {
		p := c.mustPop("/api/v1/pop/queue/q/partition/" + part + "?batch=10")
		c.ackBatch("", p.Messages[:1], "dlq")
	}
	all := c.dlq("queue=q&limit=1")
	if all.Total != 2 || len(all.Messages) != 1 || !all.Pagination.HasMore {
		t.Fatalf("page 1 %+v", all)
	}
	if next := c.dlq("queue=q&limit=1&offset=1"); len(next.Messages) != 1 || next.Pagination.HasMore {
		t.Fatalf("page 2 %+v", next)
	}
	if a := c.dlq("queue=q&partition=a"); a.Total != 1 || a.Messages[0].Partition != "a" {
		t.Fatalf("partition filter %+v", a)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if none := c.dlq("queue=q&from=" + future); none.Total != 0 {
		t.Fatalf("from filter %+v", none)
	}
	if d := all.Messages[0]; d.EnqueuedAt == "" || d.CreatedAt != d.FailedAt || d.Deliveries != 1 {
		t.Fatalf("row %+v", d)
	}
}

// noLeader reports a node that knows no leader.
type noLeader struct{ server.Broker }

func (noLeader) Status() raft.Status { return raft.Status{ID: "n2", Role: "candidate"} }

func TestHealth_UnhealthyWithoutLeader(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, noLeader{newBroker(t)}, server.Options{})
	h := c.do("GET", "/health", nil).expect(t, 503).object(t)
	if h["status"] != "unhealthy" || h["role"] != "candidate" {
		t.Fatalf("health %v", h)
	}
}

// faulted reports a node whose Raft log is faulted, and fails pushes as
// such a node does.
type faulted struct{ server.Broker }

func (faulted) Status() raft.Status {
	return raft.Status{ID: "n1", Role: "follower", Leader: "n2", StorageErrors: 7,
		Fault: "raft log: fault: store faulted by an I/O error: no space left on device"}
}

func (f faulted) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	if _, ok := c.(engine.PushCmd); ok {
		return engine.Result{}, fmt.Errorf("raft: append: %w: no space left on device", raft.ErrFaulted)
	}
	return f.Broker.Propose(ctx, c)
}

func TestHealth_UnhealthyOnStorageFault(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, faulted{newBroker(t)}, server.Options{})
	h := c.do("GET", "/health", nil).expect(t, 503).object(t)
	if h["status"] != "unhealthy" || h["database"] != "faulted" || !strings.Contains(fmt.Sprint(h["fault"]), "no space left") {
		t.Fatalf("health %v", h)
	}
	text := string(c.do("GET", "/metrics/prometheus", nil).expect(t, 200).body)
	for _, want := range []string{"queen_storage_errors_total 7\n", "queen_storage_faulted 1\n"} {
		if !strings.Contains(text, want) {
			t.Fatalf("exposition lacks %q:\n%s", want, grep(text, "queen_storage"))
		}
	}
	r := c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": map[string]any{}}}})
	r.expectError(t, 503, "storage_fault")
	if r.header.Get("Retry-After") == "" {
		t.Error("a storage fault answers without Retry-After")
	}
}

func TestMetrics_PrometheusExposition(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2)
	c.push(map[string]any{"queue": "q", "transactionId": "m1"})
	p := c.mustPop(popPath("q", "batch=1&consumerGroup=G"))
	c.ack(p.Messages[0], "dlq", "x")
	r := c.do("GET", "/metrics/prometheus", nil).expect(t, 200)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("content type %q", ct)
	}
	text := string(r.body)
	for _, want := range []string{
		`queen_push_messages_total{status="queued"} 2`,
		`queen_push_messages_total{status="duplicate"} 1`,
		`queen_pop_messages_total 1`,
		`queen_dead_letters_total{reason="ack"} 1`,
		`queen_nacks_total{status="dlq"} 1`,
		`queen_dlq_depth{queue="q"} 1`,
		`queen_dlq_depth_by_group{queue="q",group="G"} 1`,
		`queen_http_requests_total{route="push",status="2xx"} 3`,
		`queen_raft_has_leader 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Fatalf("exposition lacks %q:\n%s", want, grep(text, "queen_"))
		}
	}
	if !regexp.MustCompile(`queen_http_request_duration_seconds_bucket\{route="pop",le="[^"]+"\} 1`).MatchString(text) {
		t.Fatalf("no pop latency histogram:\n%s", grep(text, "duration"))
	}
}

func grep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
