package server_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The streams routes over real HTTP (docs/api.md §14.2): what the SDKs of
// Queen call, on the production command path (servertest.LocalBroker).

type registered struct {
	Success    bool   `json:"success"`
	QueryID    string `json:"query_id"`
	Name       string `json:"name"`
	ConfigHash string `json:"config_hash"`
	Fresh      bool   `json:"fresh"`
	Reset      bool   `json:"reset"`
	Error      string `json:"error"`
}

type cycleReply struct {
	Success         bool    `json:"success"`
	QueryID         string  `json:"query_id"`
	PartitionID     string  `json:"partition_id"`
	QueueName       *string `json:"queueName"`
	StateOpsApplied int     `json:"state_ops_applied"`
	PushResults     []struct {
		Index         int    `json:"index"`
		TransactionID string `json:"transaction_id"`
		Status        string `json:"status"`
		MessageID     string `json:"message_id"`
		QueueName     string `json:"queueName"`
	} `json:"push_results"`
	AckResult *struct {
		Success       bool `json:"success"`
		Count         int  `json:"count"`
		LeaseReleased bool `json:"lease_released"`
		DLQ           bool `json:"dlq"`
	} `json:"ack_result"`
	Error string `json:"error"`
}

type stateRow struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	UpdatedAt string          `json:"updated_at"`
}

func (c *client) register(name, source, hash string, extra map[string]any) (int, registered) {
	c.t.Helper()
	body := map[string]any{"name": name, "source_queue": source, "config_hash": hash}
	for k, v := range extra {
		body[k] = v
	}
	r := c.do("POST", "/streams/v1/queries", body)
	var reg registered
	r.decode(c.t, &reg)
	return r.status, reg
}

func (c *client) cycle(body map[string]any) cycleReply {
	c.t.Helper()
	var out cycleReply
	c.do("POST", "/streams/v1/cycle", body).expect(c.t, 200).decode(c.t, &out)
	return out
}

func (c *client) state(query, partition string, filter map[string]any) []stateRow {
	c.t.Helper()
	body := map[string]any{"query_id": query, "partition_id": partition}
	for k, v := range filter {
		body[k] = v
	}
	var out struct {
		Success bool       `json:"success"`
		Rows    []stateRow `json:"rows"`
	}
	c.do("POST", "/streams/v1/state/get", body).expect(c.t, 200).decode(c.t, &out)
	if !out.Success || out.Rows == nil {
		c.t.Fatalf("state/get: %+v, want success with a rows array", out)
	}
	return out.Rows
}

func keysOf(rows []stateRow) []string {
	var ks []string
	for _, r := range rows {
		ks = append(ks, r.Key)
	}
	return ks
}

// Registration: fresh, found again with the same hash (id and state kept,
// reset ignored), refused with 409 on a new hash, and reset wipes the state
// but keeps the id. Missing fields are 400s in Queen's order.
func TestStreams_Register(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	code, first := c.register("orders.per_customer", "orders", "h1", map[string]any{"sink_queue": "never"})
	if code != 200 || !first.Success || !first.Fresh || first.Reset || first.QueryID == "" || first.ConfigHash != "h1" {
		t.Fatalf("fresh register: %d %+v", code, first)
	}
	part := c.pushOne("orders", "", "m1", 1).PartitionID
	c.cycle(map[string]any{"query_id": first.QueryID, "partition_id": part,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": map[string]any{"n": 1}}}})

	code, again := c.register("orders.per_customer", "orders2", "h1", map[string]any{"reset": true})
	if code != 200 || again.QueryID != first.QueryID || again.Fresh || again.Reset {
		t.Fatalf("same hash: %d %+v", code, again)
	}
	if rows := c.state(first.QueryID, part, nil); len(rows) != 1 {
		t.Fatalf("same hash with reset:true wiped the state: %v", keysOf(rows))
	}

	code, mismatch := c.register("orders.per_customer", "orders", "h2", nil)
	if code != 409 || mismatch.Success || mismatch.QueryID != first.QueryID || !strings.HasPrefix(mismatch.Error, "config_hash mismatch") {
		t.Fatalf("mismatch: %d %+v", code, mismatch)
	}
	if rows := c.state(first.QueryID, part, nil); len(rows) != 1 {
		t.Fatal("a refused registration changed the state")
	}

	code, reset := c.register("orders.per_customer", "orders", "h2", map[string]any{"reset": "t"})
	if code != 200 || !reset.Reset || reset.Fresh || reset.QueryID != first.QueryID {
		t.Fatalf("reset: %d %+v", code, reset)
	}
	if rows := c.state(first.QueryID, part, nil); len(rows) != 0 {
		t.Fatalf("reset kept %v", keysOf(rows))
	}

	for _, tc := range []struct {
		body any
		want string
	}{
		{[]any{1}, "request body must be a JSON object"},
		{map[string]any{"source_queue": "q", "config_hash": "h"}, "name is required"},
		{map[string]any{"name": "", "source_queue": "q", "config_hash": "h"}, "name is required"},
		{map[string]any{"name": "n", "config_hash": "h", "source_queue": 5}, "source_queue is required"},
		{map[string]any{"name": "n", "source_queue": "q"}, "config_hash is required"},
		{map[string]any{"name": "n", "source_queue": "q", "config_hash": "h", "reset": "maybe"}, "reset must be a boolean"},
	} {
		r := c.do("POST", "/streams/v1/queries", tc.body)
		if r.status != 400 || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("register %v: %d %s, want 400 %q", tc.body, r.status, r.body, tc.want)
		}
	}
}

// A cycle applies its state ops in order, its sink pushes (which wake and
// are popped like any message) and its ack, and answers with their results.
func TestStreams_Cycle_AppliesAllParts(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	_, q := c.register("agg", "src", "h", map[string]any{"sink_queue": "sink"})
	part := c.pushOne("src", "", "a", 1).PartitionID
	c.pushOne("src", "", "b", 2)
	p := c.mustPop(popPath("src", "batch=10&consumerGroup=streams.agg"))
	if len(p.Messages) != 2 {
		t.Fatalf("popped %d", len(p.Messages))
	}
	last := p.Messages[1]
	res := c.cycle(map[string]any{"query_id": q.QueryID, "partition_id": part, "consumer_group": "streams.agg",
		"state_ops": []any{
			map[string]any{"type": "upsert", "key": "x", "value": map[string]any{"acc": 1}},
			map[string]any{"type": "upsert", "key": "x", "value": map[string]any{"acc": 3}},
			map[string]any{"type": "delete", "key": "never-there"},
			map[string]any{"type": "upsert", "key": "y"},
		},
		"push_items": []any{map[string]any{"queue": "sink", "payload": map[string]any{"sum": 3}}, map[string]any{"queue": "sink"}},
		"ack":        map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID, "count": 2},
	})
	if !res.Success || res.StateOpsApplied != 4 || len(res.PushResults) != 2 || res.PushResults[0].Status != "queued" ||
		res.PushResults[1].Index != 1 || res.AckResult == nil || !res.AckResult.LeaseReleased || res.AckResult.Count != 2 ||
		res.QueueName == nil || *res.QueueName != "src" || res.PartitionID != part {
		t.Fatalf("cycle: %+v", res)
	}
	rows := c.state(q.QueryID, part, nil)
	if got := keysOf(rows); !slices.Equal(got, []string{"x", "y"}) || string(rows[0].Value) != `{"acc":3}` || string(rows[1].Value) != `{}` {
		t.Fatalf("state %v %s %s", got, rows[0].Value, rows[1].Value)
	}
	sink := c.mustPop(popPath("sink", "batch=10"))
	if len(sink.Messages) != 2 || string(sink.Messages[0].Data) != `{"sum":3}` || string(sink.Messages[1].Data) != `{}` {
		t.Fatalf("sink %+v", sink.Messages)
	}
	// The source is consumed for the group: nothing is delivered again.
	c.mustBeEmpty(popPath("src", "batch=10&consumerGroup=streams.agg"))
}

// A cycle that fails anywhere applies nothing of what came before the
// failure: not its state ops, not its pushes, not its ack.
func TestStreams_Cycle_AllOrNothing(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	_, q := c.register("agg", "src", "h", nil)
	part := c.pushOne("src", "", "a", 1).PartitionID
	p := c.mustPop(popPath("src", "batch=1&consumerGroup=streams.agg"))
	m := p.Messages[0]
	ops := []any{map[string]any{"type": "upsert", "key": "x", "value": map[string]any{"windowEnd": 10}}}
	push := []any{map[string]any{"queue": "sink", "payload": 1}}
	for name, tc := range map[string]struct {
		body map[string]any
		want string
	}{
		"a wrong lease": {map[string]any{"state_ops": ops, "push_items": push,
			"ack": map[string]any{"transactionId": m.TransactionID, "leaseId": "01980000-0000-7000-8000-000000000001"}}, "Invalid or expired lease"},
		"a message that is not there": {map[string]any{"state_ops": ops, "push_items": push,
			"ack": map[string]any{"transactionId": "nope"}}, "Message not found"},
		"an unknown op after good ones": {map[string]any{"state_ops": append(slices.Clone(ops), map[string]any{"type": "merge", "key": "z"}),
			"push_items": push}, "Unknown state_op type: merge"},
		"an op without a type": {map[string]any{"state_ops": append(slices.Clone(ops), map[string]any{"key": "z"})}, "Unknown state_op type: null"},
		"an unknown ack status": {map[string]any{"state_ops": ops,
			"ack": map[string]any{"transactionId": m.TransactionID, "status": "maybe"}}, "Unknown ack.status: maybe"},
		"an ack without its transaction": {map[string]any{"state_ops": ops, "ack": map[string]any{"leaseId": m.LeaseID}}, "ack.transactionId is required"},
		"a bad sink queue":               {map[string]any{"state_ops": ops, "push_items": []any{map[string]any{"queue": ""}}}, "push_items[0]"},
		"state_ops not an array":         {map[string]any{"state_ops": "x"}, "state_ops must be an array"},
	} {
		t.Run(name, func(t *testing.T) {
			body := map[string]any{"query_id": q.QueryID, "partition_id": part, "consumer_group": "streams.agg"}
			for k, v := range tc.body {
				body[k] = v
			}
			res := c.cycle(body)
			if res.Success || !strings.Contains(res.Error, tc.want) || res.StateOpsApplied != 0 || len(res.PushResults) != 0 ||
				res.AckResult != nil {
				t.Fatalf("got %+v, want a failure naming %q with nothing applied", res, tc.want)
			}
			if rows := c.state(q.QueryID, part, nil); len(rows) != 0 {
				t.Fatalf("state %v after a failed cycle", keysOf(rows))
			}
			c.mustBeEmpty(popPath("sink", "batch=10"))
		})
	}
	// The lease is still held, and the message still there to be acked.
	c.mustBeEmpty(popPath("src", "batch=1&consumerGroup=streams.agg"))
	res := c.cycle(map[string]any{"query_id": q.QueryID, "partition_id": part, "consumer_group": "streams.agg",
		"ack": map[string]any{"transactionId": m.TransactionID, "leaseId": m.LeaseID}})
	if !res.Success || !res.AckResult.LeaseReleased {
		t.Fatalf("the ack after the failures: %+v", res)
	}
}

// A cycle for a query that is not registered is a 404 and applies nothing
// (docs/decisions.md C14); so is a state read.
func TestStreams_UnknownQuery(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	part := c.pushOne("src", "", "a", 1).PartitionID
	unknown := "01980000-0000-7000-8000-00000000abcd"
	r := c.do("POST", "/streams/v1/cycle", map[string]any{"query_id": unknown, "partition_id": part,
		"push_items": []any{map[string]any{"queue": "sink"}}})
	if r.status != 404 || !strings.Contains(string(r.body), `"code":"query_not_found"`) || !strings.Contains(string(r.body), `"success":false`) {
		t.Fatalf("cycle of an unknown query: %d %s", r.status, r.body)
	}
	c.mustBeEmpty(popPath("sink", "batch=1"))
	r = c.do("POST", "/streams/v1/state/get", map[string]any{"query_id": unknown, "partition_id": part})
	if r.status != 404 {
		t.Fatalf("state of an unknown query: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		body any
		want string
	}{
		{map[string]any{"partition_id": part}, "query_id is required"},
		{map[string]any{"query_id": unknown}, "partition_id is required"},
		{map[string]any{"query_id": "not-a-uuid", "partition_id": part}, "query_id must be a UUID"},
	} {
		for _, path := range []string{"/streams/v1/cycle", "/streams/v1/state/get"} {
			r := c.do("POST", path, tc.body)
			if r.status != 400 || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("%s %v: %d %s, want 400 %q", path, tc.body, r.status, r.body, tc.want)
			}
		}
	}
}

// A cycle whose body is byte-identical to one the shard committed is
// answered with the first answer and applied once (docs/decisions.md B10):
// a flush cycle retried after its reply was lost does not emit twice.
func TestStreams_Cycle_ReplayedBodyAppliesOnce(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	_, q := c.register("agg", "src", "h", nil)
	part := c.pushOne("src", "", "a", 1).PartitionID
	flush := map[string]any{"query_id": q.QueryID, "partition_id": part, "consumer_group": "streams.agg",
		"state_ops":  []any{map[string]any{"type": "delete", "key": "w1"}},
		"push_items": []any{map[string]any{"queue": "sink", "payload": map[string]any{"window": 1}}},
		"ack":        nil}
	first := c.cycle(flush)
	second := c.cycle(flush)
	if !first.Success || !second.Success || len(second.PushResults) != 1 || second.PushResults[0].MessageID != first.PushResults[0].MessageID {
		t.Fatalf("first %+v, replay %+v: want the first answer again", first, second)
	}
	sink := c.mustPop(popPath("sink", "batch=10"))
	if len(sink.Messages) != 1 {
		t.Fatalf("the sink got %d messages, want 1", len(sink.Messages))
	}
	// A different body is a new cycle.
	flush["push_items"] = []any{map[string]any{"queue": "sink", "payload": map[string]any{"window": 2}}}
	if r := c.cycle(flush); !r.Success || r.PushResults[0].MessageID == first.PushResults[0].MessageID {
		t.Fatalf("a new cycle: %+v", r)
	}
}

// release_lease:false moves the cursor and keeps the lease: nothing is
// delivered while it lasts, and after it expires the rest of the batch
// comes again, in order (the gate's partial ack).
func TestStreams_Cycle_PartialAckKeepsTheLease(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("src", map[string]any{"leaseTime": 2})
	_, q := c.register("gate", "src", "h", nil)
	var part string
	for i := range 5 {
		part = c.pushOne("src", "", fmt.Sprint("m", i), i).PartitionID
	}
	p := c.mustPop(popPath("src", "batch=5&consumerGroup=streams.gate"))
	if len(p.Messages) != 5 {
		t.Fatalf("popped %d", len(p.Messages))
	}
	res := c.cycle(map[string]any{"query_id": q.QueryID, "partition_id": part, "consumer_group": "streams.gate",
		"ack": map[string]any{"transactionId": "m1", "leaseId": p.Messages[1].LeaseID, "count": 2}, "release_lease": false})
	if !res.Success || res.AckResult == nil || res.AckResult.LeaseReleased || res.AckResult.Count != 2 {
		t.Fatalf("partial ack: %+v", res)
	}
	c.mustBeEmpty(popPath("src", "batch=5&consumerGroup=streams.gate"))
	c.elapse(3 * time.Second)
	again := c.mustPop(popPath("src", "batch=5&consumerGroup=streams.gate"))
	var got []string
	for _, m := range again.Messages {
		got = append(got, m.TransactionID)
	}
	if !slices.Equal(got, []string{"m2", "m3", "m4"}) {
		t.Fatalf("after the lease expired: %v, want m2 m3 m4", got)
	}
}

// state/get filters by keys, by a literal prefix and by ripeness (a
// numeric windowEnd at or before the bound), together, sorted by key.
func TestStreams_StateGet_Filters(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	_, q := c.register("agg", "src", "h", nil)
	part := c.pushOne("src", "", "a", 1).PartitionID
	const us = "\x1f"
	c.cycle(map[string]any{"query_id": q.QueryID, "partition_id": part, "state_ops": []any{
		map[string]any{"type": "upsert", "key": "tumb:60" + us + "w1", "value": map[string]any{"windowEnd": 1000}},
		map[string]any{"type": "upsert", "key": "tumb:60" + us + "w2", "value": map[string]any{"windowEnd": 2000.5}},
		map[string]any{"type": "upsert", "key": "tumb:60" + us + "w3", "value": map[string]any{"windowEnd": "3000"}},
		map[string]any{"type": "upsert", "key": "sess:5" + us + "open" + us + "u", "value": map[string]any{"lastEventTime": 1}},
		map[string]any{"type": "upsert", "key": "slide:60:30" + us + "w1", "value": map[string]any{"windowEnd": 500}},
		map[string]any{"type": "upsert", "key": "__wm__", "value": map[string]any{"eventTimeMs": 7}},
		map[string]any{"type": "upsert", "key": "t_x", "value": map[string]any{"windowEnd": 1}},
	}})
	// A window moved to a later end leaves the earlier one's ripeness.
	c.cycle(map[string]any{"query_id": q.QueryID, "partition_id": part, "state_ops": []any{
		map[string]any{"type": "upsert", "key": "slide:60:30" + us + "w1", "value": map[string]any{"windowEnd": 9000}},
	}})
	for _, tc := range []struct {
		name   string
		filter map[string]any
		want   []string
	}{
		{"all", nil, []string{"__wm__", "sess:5" + us + "open" + us + "u", "slide:60:30" + us + "w1", "t_x", "tumb:60" + us + "w1", "tumb:60" + us + "w2", "tumb:60" + us + "w3"}},
		{"keys", map[string]any{"keys": []string{"__wm__", "t_x", "absent"}}, []string{"__wm__", "t_x"}},
		{"keys null", map[string]any{"keys": nil}, nil}, // as all
		{"prefix", map[string]any{"key_prefix": "tumb:60" + us}, []string{"tumb:60" + us + "w1", "tumb:60" + us + "w2", "tumb:60" + us + "w3"}},
		{"prefix is literal", map[string]any{"key_prefix": "t_"}, []string{"t_x"}},
		{"ripe", map[string]any{"ripe_at_or_before": 2000}, []string{"t_x", "tumb:60" + us + "w1"}},
		{"ripe fractional", map[string]any{"ripe_at_or_before": 2000.5}, []string{"t_x", "tumb:60" + us + "w1", "tumb:60" + us + "w2"}},
		{"ripe and prefix", map[string]any{"ripe_at_or_before": 99999, "key_prefix": "tumb:60" + us}, []string{"tumb:60" + us + "w1", "tumb:60" + us + "w2"}},
		{"ripe and keys", map[string]any{"ripe_at_or_before": 1500, "keys": []string{"tumb:60" + us + "w1", "tumb:60" + us + "w2", "__wm__"}}, []string{"tumb:60" + us + "w1"}},
		{"ripe not a number is ignored", map[string]any{"ripe_at_or_before": "2000", "key_prefix": "t_"}, []string{"t_x"}},
		{"moved window", map[string]any{"ripe_at_or_before": 600}, []string{"t_x"}},
	} {
		got := keysOf(c.state(q.QueryID, part, tc.filter))
		want := tc.want
		if tc.name == "keys null" {
			want = keysOf(c.state(q.QueryID, part, nil))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", tc.name, got, want)
		}
	}
	// Another partition's shard is another state.
	other := c.pushOne("src", "p2", "b", 1).PartitionID
	if rows := c.state(q.QueryID, other, nil); len(rows) != 0 {
		t.Fatalf("partition p2 sees %v", keysOf(rows))
	}
}

// Deleting a query (ours) removes it and all its state; registering the
// name again is fresh.
func TestStreams_DeleteQuery(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	_, q := c.register("agg", "src", "h", nil)
	part := c.pushOne("src", "", "a", 1).PartitionID
	c.cycle(map[string]any{"query_id": q.QueryID, "partition_id": part,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "x", "value": map[string]any{"windowEnd": 5}}}})
	c.do("DELETE", "/streams/v1/queries/agg", nil).expect(t, 200)
	if r := c.do("POST", "/streams/v1/state/get", map[string]any{"query_id": q.QueryID, "partition_id": part}); r.status != 404 {
		t.Fatalf("state of a deleted query: %d %s", r.status, r.body)
	}
	_, again := c.register("agg", "src", "h", nil)
	if !again.Fresh || again.QueryID == q.QueryID {
		t.Fatalf("registered again: %+v", again)
	}
	if rows := c.state(again.QueryID, part, nil); len(rows) != 0 {
		t.Fatalf("the new query sees %v", keysOf(rows))
	}
}
