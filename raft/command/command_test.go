package command_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft/command"
)

func sampleCommands() []command.Stamped {
	st := engine.Stamp{Time: 1_700_000_000_000_000, Seed: engine.ID{1, 2, 3, 4, 5, 6, 0x70, 8, 0x80}}
	push := engine.PushItem{Queue: "q", Partition: "p", TransactionID: "t", HasTrace: true, TraceID: engine.ID{9},
		ProducerSub: "sub", Payload: []byte(`{"a":1}`)}
	sealed := push
	sealed.Sealed = true
	ack := engine.AckItem{TransactionID: "t", PartitionID: engine.ID{7}, Group: "g", Status: cursor.DeadLetter,
		Lease: engine.ID{8}, Error: "bad"}
	pp, err := engine.PushCmd{Items: []engine.PushItem{push, push, {Queue: "q2", Payload: []byte(`[1]`)}, {Queue: ""}}}.
		Prepare(engine.ID{7, 7, 7, 7, 7, 7, 0x70, 7, 0x80})
	if err != nil {
		panic(err)
	}
	return []command.Stamped{
		{Stamp: st, Cmd: pp},
		{Stamp: st, Cmd: engine.ConfigureCmd{Queue: "q", Namespace: "n", NamespaceSet: true,
			Task: "t", TaskSet: true, Replace: true, Set: []engine.OptionValue{{Option: engine.OptRetryLimit, Value: 5}},
			Reset: []engine.Option{engine.OptLeaseTime}}},
		{Stamp: st, Cmd: engine.DeleteQueueCmd{Queue: "q"}},
		{Stamp: st, Cmd: engine.PushCmd{Items: []engine.PushItem{push, {Queue: "q2", Payload: []byte(`null`)}, sealed,
			{Queue: "q2", Payload: []byte(`{}`), Sealed: true}}}},
		{Stamp: st, Cmd: engine.PopCmd{Queue: "q", Partition: "p", Namespace: "n", Task: "t",
			Group: "g", Batch: 100, Partitions: 3, AutoAck: true, SubscriptionMode: engine.SubFrom,
			SubscriptionFrom: 12345, LeaseSeconds: 30}},
		{Stamp: st, Cmd: engine.AckCmd{Items: []engine.AckItem{ack, {TransactionID: "u", PartitionID: engine.ID{1}}}}},
		{Stamp: st, Cmd: engine.ExtendLeaseCmd{Lease: engine.ID{3}, Seconds: 60}},
		{Stamp: st, Cmd: engine.TransactionCmd{Ops: []engine.TxOp{{Push: &push}, {Ack: &ack}, {Push: &sealed}}, RequiredLeases: []engine.ID{{4}}}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t", Group: "g", Payload: []byte(`{}`)}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t", Payload: []byte(`{"e":1}`), Sealed: true}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t"}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t", Payload: []byte(`1`), Restamp: true, ProducerSub: "m"}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t", Payload: []byte(`2`), Sealed: true, Restamp: true}},
		{Stamp: st, Cmd: engine.DeleteDLQCmd{PartitionID: engine.ID{6}, TransactionID: "t", Group: "g"}},
		{Stamp: st, Cmd: engine.MoveToDLQCmd{PartitionID: engine.ID{6}, TransactionID: "t", Group: "g", Error: "e"}},
		{Stamp: st, Cmd: engine.SeekCmd{Group: "g", Queue: "q", Partition: "p", ToEnd: true, Timestamp: 9}},
		{Stamp: st, Cmd: engine.DeleteGroupCmd{Group: "g", Queue: "q", DeleteMetadata: true}},
		{Stamp: st, Cmd: engine.UpdateSubscriptionCmd{Group: "g", Timestamp: 77}},
		{Stamp: st, Cmd: command.Announce{NodeID: "n1", HTTP: "127.0.0.1:6632"}},
		{Stamp: st, Cmd: engine.SweepCmd{}},
		{Stamp: st, Cmd: command.Maintenance{Pop: true, Enabled: true}},
		{Stamp: st, Cmd: command.Groups{Count: 7}},
		{Stamp: st, Cmd: command.PlaceQueue{Queue: "q", Group: 300}},
		{Stamp: st, Cmd: command.LookupQueue{Queue: "q"}},
		{Stamp: st, Cmd: command.LookupPartition{ID: engine.ID{1}}},
		{Stamp: st, Cmd: command.LookupLease{ID: engine.ID{2}}},
	}
}

func TestEntry_RoundTrip(t *testing.T) {
	cmds := sampleCommands()
	got, err := command.DecodeEntry(command.AppendEntry(nil, cmds))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != len(cmds) {
		t.Fatalf("got %d commands, want %d", len(got), len(cmds))
	}
	for i := range cmds {
		if !reflect.DeepEqual(got[i], cmds[i]) {
			t.Errorf("command %d (%T):\n got %+v\nwant %+v", i, cmds[i].Cmd, got[i], cmds[i])
		}
	}
}

func TestEntry_Corrupt(t *testing.T) {
	good := command.AppendEntry(nil, sampleCommands())
	if _, err := command.DecodeEntry(append([]byte{0x51, 9}, good[2:]...)); !errors.Is(err, command.ErrVersion) {
		t.Errorf("unknown version: err = %v, want ErrVersion", err)
	}
	if _, err := command.DecodeEntry(append([]byte{0}, good[1:]...)); !errors.Is(err, command.ErrCorrupt) || !errors.Is(err, engine.ErrCorrupt) {
		t.Errorf("bad magic: err = %v, want command.ErrCorrupt, which engine.ErrCorrupt matches", err)
	}
	// Every truncation must fail cleanly, never panic or succeed.
	for n := 0; n < len(good); n++ {
		if _, err := command.DecodeEntry(good[:n]); !errors.Is(err, command.ErrCorrupt) && !errors.Is(err, command.ErrVersion) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	bad := command.AppendEntry(nil, []command.Stamped{{Cmd: engine.DeleteQueueCmd{Queue: "q"}}})
	bad[4] = 99 // the command type
	if _, err := command.DecodeEntry(bad); !errors.Is(err, command.ErrCorrupt) {
		t.Errorf("unknown type: err = %v, want ErrCorrupt", err)
	}
}

// The bytes grown for the sealed bit reject what no version defines: an old
// decoder meets only values it rejects too, and this one the same for the
// next growth.
func TestEntry_Corrupt_SealedFields(t *testing.T) {
	item := engine.PushItem{Queue: "q", TransactionID: "t", Payload: []byte(`{}`), Sealed: true}
	push := command.AppendEntry(nil, []command.Stamped{{Cmd: engine.PushCmd{Items: []engine.PushItem{item}}}})
	replay := command.AppendEntry(nil, []command.Stamped{{Cmd: engine.ReplayCmd{TransactionID: "t", Payload: []byte(`{}`), Sealed: true}}})
	// header (3) | len (1) | type, time, seed (25) | ...
	const body = 3 + 1 + 25
	pushFlags := body + 1 + 2 + 1 + 0 + 1 + 1 // n | queue "q" | partition "" | txn "t"
	replayKind := body + 16 + 2 + 1           // partition id | txn "t" | group ""
	if push[pushFlags] != 2 || replay[replayKind] != 2 {
		t.Fatalf("offsets: push flags %d, replay kind %d; fix the test's arithmetic", push[pushFlags], replay[replayKind])
	}
	for name, c := range map[string]struct {
		b    []byte
		at   int
		v    byte
		want string
	}{
		"push item flag 2": {push, pushFlags, 4, "push item flags 0x4"},
		"push item flags":  {push, pushFlags, 0xff, "push item flags 0xff"},
		"replay kind 3":    {replay, replayKind, 3, "replay payload kind 3"},
		"replay kind 4":    {replay, replayKind, 4, "replay payload kind 4"}, // a producer without a payload
		"replay kind 7":    {replay, replayKind, 7, "replay payload kind 7"},
		"replay kind 0x80": {replay, replayKind, 0x80, "replay payload kind 128"},
	} {
		b := append([]byte(nil), c.b...)
		b[c.at] = c.v
		if _, err := command.DecodeEntry(b); !errors.Is(err, command.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrCorrupt mentioning %q", name, err, c.want)
		}
	}
}
