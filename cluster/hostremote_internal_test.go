package cluster

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
)

// The reads another node answers cross as JSON (hostremote.go), which
// drops a field an embedded struct shares with its outer one: none of the
// types they carry may have one (a DeadLetter, which does, crosses as
// deadLetterWire).
func TestRemoteRead_TypesKeepEveryField(t *testing.T) {
	t.Parallel()
	for _, v := range []any{engine.QueueInfo{}, engine.PartitionInfo{}, engine.CursorInfo{}, engine.Subscription{},
		deadLetterWire{}, engine.StoredMessage{}, engine.ListedMessage{}, engine.Message{}, engine.StreamQuery{},
		engine.StateRow{}, engine.Trace{}, engine.TraceAt{}, engine.TraceName{},
		engine.DLQFilter{}, engine.MessageFilter{}, engine.StateFilter{}, engine.PopCmd{}} {
		seen := map[string]int{}
		jsonNames(reflect.TypeOf(v), seen)
		for name, k := range seen {
			if k > 1 {
				t.Errorf("%T: %d fields named %s, JSON keeps at most one", v, k, name)
			}
		}
	}
}

// jsonNames counts the names of t's fields as JSON sees them, the fields
// of embedded structs included.
func jsonNames(t reflect.Type, seen map[string]int) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			jsonNames(f.Type, seen)
			continue
		}
		if f.IsExported() {
			seen[f.Name]++
		}
	}
}

// A queue's configuration crosses whole, its unexported values included,
// as does a dead letter.
func TestRemoteRead_ConfigAndDeadLetterRoundTrip(t *testing.T) {
	t.Parallel()
	var info engine.QueueInfo
	if err := json.Unmarshal([]byte(`{"Config":{"leaseTime":7,"encryptionEnabled":1,"dedupWindowSeconds":0}}`), &info); err != nil {
		t.Fatal(err)
	}
	if info.Config.Get(engine.OptLeaseTime) != 7 || !info.Config.Bool(engine.OptEncryptionEnabled) {
		t.Fatalf("config read: lease %d, encryption %v", info.Config.Get(engine.OptLeaseTime), info.Config.Bool(engine.OptEncryptionEnabled))
	}
	for _, cfg := range []engine.Config{{}, engine.DefaultConfig(), info.Config} {
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var back engine.Config
		if err := json.Unmarshal(b, &back); err != nil || back != cfg {
			t.Fatalf("config %s came back %+v, %v", b, back, err)
		}
	}
	dl := []engine.DeadLetter{{FailedAt: 5, Queue: "q", Partition: "p", Group: "g"}}
	dl[0].DeadLetterRecord.Queue, dl[0].DeadLetterRecord.Group, dl[0].Payload, dl[0].PartitionID = "q", "g", []byte("x"), engine.ID{1, 2}
	b, err := json.Marshal(toWire(dl))
	if err != nil {
		t.Fatal(err)
	}
	var back []deadLetterWire
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(fromWire(back), dl) {
		t.Fatalf("dead letter %s came back %+v, %v", b, fromWire(back), err)
	}
}
