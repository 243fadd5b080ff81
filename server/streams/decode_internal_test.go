package streams

import (
	"encoding/json"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// inmemItems reads every push item as an empty one: the cycle decoder's
// own members are what the fuzz target checks, not package server's push
// item format.
type inmemItems struct{}

func (inmemItems) DecodePushItem(sc *wire.Scanner, _ []engine.PushItem) (engine.PushItem, error) {
	return engine.PushItem{}, sc.Skip()
}
func (inmemItems) PublicText(err error) string { return err.Error() }

// FuzzDecodeCycle: the cycle body decoder never panics, and what it accepts
// is consistent: a body it decodes without error has both ids, every op has
// a key unless the cycle is failed, and an upsert's windowEnd is the number
// encoding/json finds at the value's top level.
func FuzzDecodeCycle(f *testing.F) {
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
		req, err := decodeCycle(body, inmemItems{})
		if err != nil {
			return
		}
		if req.queryID == "" || req.partID == "" {
			t.Fatalf("decoded without ids: %q", body)
		}
		if req.fail != "" {
			return
		}
		for _, op := range req.cmd.Ops {
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
