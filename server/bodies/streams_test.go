package bodies_test

import (
	"encoding/json"
	"testing"

	"github.com/queenmq/queen/server/bodies"
)

const (
	queryID = "01980000-0000-7000-8000-000000000001"
	partID  = "01980000-0000-7000-8000-000000000002"
)

// text is the edge's client-facing text of an error, as far as these
// tests need it.
func text(err error) string { return err.Error() }

// A registration needs its three names; reset is read as PostgreSQL casts
// it, and anything else there is a 400.
func TestStreamQuery(t *testing.T) {
	cmd, err := bodies.StreamQuery([]byte(`{"name":"n","source_queue":"q","config_hash":"h","sink_queue":"s","reset":"yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Name != "n" || cmd.SourceQueue != "q" || cmd.ConfigHash != "h" || !cmd.HasSink || cmd.SinkQueue != "s" || !cmd.Reset {
		t.Fatalf("got %+v", cmd)
	}
	if cmd, err := bodies.StreamQuery([]byte(`{"name":"n","source_queue":"q","config_hash":"h","sink_queue":"","reset":null}`)); err != nil || cmd.HasSink || cmd.Reset {
		t.Fatalf("empty sink and null reset: got %+v, %v", cmd, err)
	}
	for _, body := range []string{
		`{"source_queue":"q","config_hash":"h"}`,
		`{"name":"","source_queue":"q","config_hash":"h"}`,
		`{"name":"n","config_hash":"h"}`,
		`{"name":"n","source_queue":"q"}`,
		`{"name":"n","source_queue":"q","config_hash":"h","reset":"maybe"}`,
		`{"name":"n","source_queue":"q","config_hash":"h","reset":1}`,
	} {
		if _, err := bodies.StreamQuery([]byte(body)); !isBadRequest(err) {
			t.Errorf("%s: err %v, want a 400", body, err)
		}
	}
}

// A state read needs both ids as UUIDs; a filter member of the wrong type
// filters nothing, and windowEnd counts only as a finite number.
func TestStreamState(t *testing.T) {
	f, err := bodies.StreamState([]byte(`{"query_id":"` + queryID + `","partition_id":"` + partID +
		`","keys":["a",1,"b"],"key_prefix":"p","ripe_at_or_before":60000}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(f.Keys), 2; got != want || f.Keys[0] != "a" || f.Keys[1] != "b" {
		t.Fatalf("keys %q", f.Keys)
	}
	if f.Prefix != "p" || !f.HasRipe || f.Ripe != 60000 {
		t.Fatalf("got %+v", f)
	}
	f, err = bodies.StreamState([]byte(`{"query_id":"` + queryID + `","partition_id":"` + partID + `","keys":"a","key_prefix":3,"ripe_at_or_before":"1"}`))
	if err != nil || f.Keys != nil || f.Prefix != "" || f.HasRipe {
		t.Fatalf("wrong types: got %+v, %v", f, err)
	}
	for _, body := range []string{`{"partition_id":"` + partID + `"}`, `{"query_id":"` + queryID + `"}`, `{"query_id":"x","partition_id":"` + partID + `"}`} {
		if _, err := bodies.StreamState([]byte(body)); !isBadRequest(err) {
			t.Errorf("%s: err %v, want a 400", body, err)
		}
	}
}

// What Queen answers as a failed cycle is Fail, the first failure only,
// a bad push item's in the words text gives it; a malformed body is a 400.
func TestStreamCycle_Fail(t *testing.T) {
	ids := `"query_id":"` + queryID + `","partition_id":"` + partID + `"`
	for _, tc := range []struct{ body, want string }{
		{`{` + ids + `,"state_ops":[{"type":"merge","key":"k"},{"key":"k"}]}`, "Unknown state_op type: merge"},
		{`{` + ids + `,"state_ops":[{"key":"k"}]}`, "Unknown state_op type: null"},
		{`{` + ids + `,"state_ops":{}}`, "state_ops must be an array"},
		{`{` + ids + `,"ack":{"transactionId":"t","status":"maybe"}}`, "Unknown ack.status: maybe"},
		{`{` + ids + `,"ack":{"status":"failed"}}`, "ack.transactionId is required"},
		{`{` + ids + `,"ack":{"transactionId":"t","leaseId":"x"}}`, "Invalid or expired lease"},
		{`{` + ids + `,"push_items":[{"queue":"q"},{"payload":1}]}`, "push_items[1]: "},
		{`{` + ids + `,"state_ops":[{"type":"upsert","key":"k"}],"release_lease":false}`, ""},
	} {
		req, err := bodies.StreamCycle([]byte(tc.body), text)
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if got := req.Fail; tc.want == "" && got != "" || tc.want != "" && (len(got) < len(tc.want) || got[:len(tc.want)] != tc.want) {
			t.Errorf("%s: fail %q, want %q", tc.body, got, tc.want)
		}
	}
	req, err := bodies.StreamCycle([]byte(`{`+ids+`,"state_ops":[{"type":"upsert","key":"k"}],"release_lease":false}`), text)
	if err != nil || !req.Cmd.KeepLease || string(req.Cmd.Ops[0].Value) != "{}" {
		t.Fatalf("got %+v, %v", req.Cmd, err)
	}
	for _, body := range []string{`{"partition_id":"` + partID + `"}`, `{"query_id":"` + queryID + `"}`, `{"query_id":"x","partition_id":"` + partID + `"}`, `[]`} {
		if _, err := bodies.StreamCycle([]byte(body), text); err == nil {
			t.Errorf("%s: decoded, want an error", body)
		}
	}
}

// FuzzStreamCycle: the cycle body decoder never panics, and what it accepts
// is consistent: a body it decodes without error has both ids, every op has
// a key unless the cycle is failed, and an upsert's windowEnd is the number
// encoding/json finds at the value's top level.
func FuzzStreamCycle(f *testing.F) {
	for _, s := range []string{
		`{"query_id":"01980000-0000-7000-8000-000000000001","partition_id":"01980000-0000-7000-8000-000000000002"}`,
		`{"query_id":"01980000-0000-7000-8000-000000000001","partition_id":"01980000-0000-7000-8000-000000000002",` +
			`"consumer_group":"streams.q","state_ops":[{"type":"upsert","key":"tumb:60\u001fw\u001fu","value":{"acc":{"count":1},"windowEnd":60000}},` +
			`{"type":"delete","key":"x"}],"push_items":[{"queue":"sink","payload":{"a":1}}],` +
			`"ack":{"transactionId":"t","leaseId":"01980000-0000-7000-8000-000000000003","count":3},"release_lease":false}`,
		`{"query_id":"x","partition_id":"y","state_ops":null,"push_items":null,"ack":null}`,
		`{"query_id":"01980000-0000-7000-8000-000000000001","partition_id":"01980000-0000-7000-8000-000000000002","state_ops":[{"type":"merge"}]}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := bodies.StreamCycle(body, text)
		if err != nil {
			return
		}
		if req.QueryID == "" || req.PartitionID == "" {
			t.Fatalf("decoded without ids: %q", body)
		}
		if req.Fail != "" {
			return
		}
		for _, op := range req.Cmd.Ops {
			if op.Delete || !json.Valid(op.Value) {
				if !op.Delete {
					t.Fatalf("upsert value %q is not JSON", op.Value)
				}
				continue
			}
			var top map[string]any
			want, has := 0.0, false
			if json.Unmarshal(op.Value, &top) == nil {
				if n, ok := top["windowEnd"].(float64); ok {
					want, has = n, true
				}
			}
			if has != op.HasWindowEnd || has && want != op.WindowEnd {
				t.Fatalf("value %s: windowEnd %v %v, encoding/json says %v %v", op.Value, op.WindowEnd, op.HasWindowEnd, want, has)
			}
		}
	})
}
