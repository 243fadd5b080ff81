package command_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft/command"
)

func sampleCommands() []*command.Command {
	st := engine.Stamp{Time: 1_700_000_000_000_000, Seed: engine.ID{1, 2, 3, 4, 5, 6, 0x70, 8, 0x80}}
	push := engine.PushItem{Queue: "q", Partition: "p", TransactionID: "t", HasTrace: true, TraceID: engine.ID{9},
		ProducerSub: "sub", Payload: []byte(`{"a":1}`)}
	ack := engine.AckItem{TransactionID: "t", PartitionID: engine.ID{7}, Group: "g", Status: cursor.DeadLetter,
		Lease: engine.ID{8}, Error: "bad"}
	pp, err := engine.PreparePush([]engine.PushItem{push, push, {Queue: "q2", Payload: []byte(`[1]`)}, {Queue: ""}},
		engine.IDsFrom(engine.ID{7, 7, 7, 7, 7, 7, 0x70, 7, 0x80}))
	if err != nil {
		panic(err)
	}
	return []*command.Command{
		{Type: command.TypePushPrepared, Stamp: st, Prepared: &pp},
		{Type: command.TypeConfigure, Stamp: st, Configure: engine.ConfigureCmd{Queue: "q", Namespace: "n", NamespaceSet: true,
			Task: "t", TaskSet: true, Replace: true, Set: []engine.OptionValue{{Option: engine.OptRetryLimit, Value: 5}},
			Reset: []engine.Option{engine.OptLeaseTime}}},
		{Type: command.TypeDeleteQueue, Stamp: st, Queue: "q"},
		{Type: command.TypePush, Stamp: st, Push: []engine.PushItem{push, {Queue: "q2", Payload: []byte(`null`)}}},
		{Type: command.TypePop, Stamp: st, Pop: engine.PopCmd{Queue: "q", Partition: "p", Namespace: "n", Task: "t",
			Group: "g", Batch: 100, Partitions: 3, AutoAck: true, SubscriptionMode: engine.SubFrom,
			SubscriptionFrom: 12345, LeaseSeconds: 30}},
		{Type: command.TypeAck, Stamp: st, Ack: []engine.AckItem{ack, {TransactionID: "u", PartitionID: engine.ID{1}}}},
		{Type: command.TypeExtendLease, Stamp: st, Lease: engine.ID{3}, Seconds: 60},
		{Type: command.TypeTransaction, Stamp: st, Ops: []engine.TxOp{{Push: &push}, {Ack: &ack}}, Leases: []engine.ID{{4}}},
		{Type: command.TypeReplay, Stamp: st, Replay: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t", Group: "g", Payload: []byte(`{}`)}},
		{Type: command.TypeReplay, Stamp: st, Replay: engine.ReplayCmd{PartitionID: engine.ID{5}, TransactionID: "t"}},
		{Type: command.TypeDeleteDLQ, Stamp: st, Address: command.Address{PartitionID: engine.ID{6}, TransactionID: "t", Group: "g"}},
		{Type: command.TypeMoveToDLQ, Stamp: st, Address: command.Address{PartitionID: engine.ID{6}, TransactionID: "t", Group: "g", Error: "e"}},
		{Type: command.TypeSeek, Stamp: st, Seek: engine.SeekCmd{Group: "g", Queue: "q", Partition: "p", ToEnd: true, Timestamp: 9}},
		{Type: command.TypeDeleteGroup, Stamp: st, Group: command.GroupCmd{Group: "g", Queue: "q", DeleteMetadata: true}},
		{Type: command.TypeUpdateSub, Stamp: st, Group: command.GroupCmd{Group: "g", Timestamp: 77}},
		{Type: command.TypeAnnounce, Stamp: st, Announce: command.Announce{NodeID: "n1", HTTP: "127.0.0.1:6632"}},
		{Type: command.TypeSweep, Stamp: st},
		{Type: command.TypeMaintenance, Stamp: st, Maintenance: command.Maintenance{Pop: true, Enabled: true}},
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
		if !reflect.DeepEqual(&got[i], cmds[i]) {
			t.Errorf("command %d (type %d):\n got %+v\nwant %+v", i, cmds[i].Type, got[i], *cmds[i])
		}
	}
}

func TestEntry_Corrupt(t *testing.T) {
	good := command.AppendEntry(nil, sampleCommands())
	if _, err := command.DecodeEntry(append([]byte{0x51, 9}, good[2:]...)); !errors.Is(err, command.ErrVersion) {
		t.Errorf("unknown version: err = %v, want ErrVersion", err)
	}
	if _, err := command.DecodeEntry(append([]byte{0}, good[1:]...)); !errors.Is(err, command.ErrCorrupt) {
		t.Errorf("bad magic: err = %v, want ErrCorrupt", err)
	}
	// Every truncation must fail cleanly, never panic or succeed.
	for n := 0; n < len(good); n++ {
		if _, err := command.DecodeEntry(good[:n]); !errors.Is(err, command.ErrCorrupt) && !errors.Is(err, command.ErrVersion) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
	bad := command.AppendEntry(nil, []*command.Command{{Type: command.TypeDeleteQueue, Queue: "q"}})
	bad[4] = 99 // the command type
	if _, err := command.DecodeEntry(bad); !errors.Is(err, command.ErrCorrupt) {
		t.Errorf("unknown type: err = %v, want ErrCorrupt", err)
	}
}
