package command_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/segment"
	"github.com/queenmq/queen/raft/command"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// goldenStamp is every golden command's stamp.
var goldenStamp = engine.Stamp{Time: 1_754_000_000_123_456, Seed: engine.ID{0x01, 0x98, 0x6a, 0x2b, 0, 0, 0x70, 0, 0x80, 1, 2, 3}}

// preparedBody is frames as a segment body stored raw (codec none), so the
// golden bytes do not depend on the zstd compressor.
func preparedBody(frames []segment.Frame) segment.Body {
	enc, err := segment.EncodeCodec(nil, segment.CodecNone, 0, 0, frames)
	if err != nil {
		panic(err)
	}
	const headerLen, crcLen = 30, 4
	return segment.Body{Codec: segment.CodecNone, RawLen: uint32(len(enc) - headerLen - crcLen),
		Count: uint32(len(frames)), Data: enc[headerLen : len(enc)-crcLen]}
}

// v1Commands are one command of every type, every field set, as format
// version 1 wrote them before any later extension: the bytes they encode to
// (testdata/entry-v1.golden) must keep decoding to them.
func v1Commands() []command.Stamped {
	st := goldenStamp
	push := engine.PushItem{Queue: "orders", Partition: "eu", TransactionID: "t-1", HasTrace: true,
		TraceID: engine.ID{0xaa, 0xbb}, ProducerSub: "auth0|u1", Payload: []byte(`{"orderId":1}`)}
	plain := engine.PushItem{Queue: "orders", Payload: []byte(`[1,2]`)}
	ack := engine.AckItem{TransactionID: "t-1", PartitionID: engine.ID{0xcc}, Group: "billing",
		Status: cursor.DeadLetter, Lease: engine.ID{0xdd}, Error: "poison"}
	msg1, msg2 := engine.ID{0x01, 0x98, 1}, engine.ID{0x01, 0x98, 2}
	pp := &engine.PreparedPush{
		Items: []engine.PreparedItem{
			{TransactionID: "t-1", MessageID: msg1, DuplicateOf: -1},
			{TransactionID: "t-1", MessageID: engine.ID{0x01, 0x98, 3}, DuplicateOf: 0},
			{TransactionID: engine.FormatID(msg2), MessageID: msg2, Minted: true, DuplicateOf: -1},
			{TransactionID: "t-4", MessageID: engine.ID{0x01, 0x98, 4}, DuplicateOf: -1, Reject: "bad queue name"},
		},
		Groups: []engine.PreparedGroup{{Queue: "orders", Partition: "Default", Items: []int{0, 2}, Body: preparedBody([]segment.Frame{
			{MessageID: msg1, TransactionID: []byte("t-1"), TraceID: engine.ID{0xaa}, HasTrace: true, ProducerSub: []byte("sub"), Payload: []byte(`{"a":1}`)},
			{MessageID: msg2, TransactionID: []byte(engine.FormatID(msg2)), Payload: []byte(`"b"`)},
		})}},
	}
	return []command.Stamped{
		{Stamp: st, Cmd: engine.ConfigureCmd{Queue: "orders", Namespace: "shop", NamespaceSet: true,
			Task: "bill", TaskSet: true, Replace: true, Set: []engine.OptionValue{{Option: engine.OptRetryLimit, Value: 5}, {Option: engine.OptEncryptionEnabled, Value: 1}},
			Reset: []engine.Option{engine.OptLeaseTime}}},
		{Stamp: st, Cmd: engine.DeleteQueueCmd{Queue: "orders"}},
		{Stamp: st, Cmd: engine.PushCmd{Items: []engine.PushItem{push, plain}}},
		{Stamp: st, Cmd: engine.PopCmd{Queue: "orders", Partition: "eu", Namespace: "shop", Task: "bill",
			Group: "billing", Batch: 10, Partitions: 2, AutoAck: true, SubscriptionMode: engine.SubFrom, SubscriptionFrom: 1_754_000_000_000_000, LeaseSeconds: 30}},
		{Stamp: st, Cmd: engine.AckCmd{Items: []engine.AckItem{ack, {TransactionID: "t-2", PartitionID: engine.ID{0xcc}}}}},
		{Stamp: st, Cmd: engine.ExtendLeaseCmd{Lease: engine.ID{0xdd}, Seconds: 60}},
		{Stamp: st, Cmd: engine.TransactionCmd{Ops: []engine.TxOp{{Push: &push}, {Ack: &ack}, {Push: &plain}}, RequiredLeases: []engine.ID{{0xdd}}}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1", Group: "billing", Payload: []byte(`{"fixed":true}`)}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1"}},
		{Stamp: st, Cmd: engine.DeleteDLQCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1", Group: "billing"}},
		{Stamp: st, Cmd: engine.MoveToDLQCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1", Group: "billing", Error: "by hand"}},
		{Stamp: st, Cmd: engine.SeekCmd{Group: "billing", Queue: "orders", Partition: "eu", ToEnd: true, Timestamp: 9}},
		{Stamp: st, Cmd: engine.DeleteGroupCmd{Group: "billing", Queue: "orders", DeleteMetadata: true}},
		{Stamp: st, Cmd: engine.UpdateSubscriptionCmd{Group: "billing", Timestamp: 77}},
		{Stamp: st, Cmd: command.Announce{NodeID: "n1", HTTP: "10.0.0.1:6632"}},
		{Stamp: st, Cmd: engine.SweepCmd{}},
		{Stamp: st, Cmd: pp},
		{Stamp: st, Cmd: command.Maintenance{Pop: true, Enabled: true}},
	}
}

// sealedCommands are the commands that carry the sealed bit added to
// version 1 (doc.go, "Versions"): push items with flag bit 1, replays of
// payload kind 2, and a prepared push whose frames carry segment flag bit 2.
func sealedCommands() []command.Stamped {
	st := goldenStamp
	envelope := []byte(`{"encrypted":"","iv":"AAAAAAAAAAAAAAAAAAAAAA==","authTag":"AAAAAAAAAAAAAAAAAAAAAA=="}`)
	sealed := engine.PushItem{Queue: "secret", TransactionID: "t-s", Payload: envelope, Sealed: true}
	traced := engine.PushItem{Queue: "secret", Partition: "eu", TransactionID: "t-st", HasTrace: true, TraceID: engine.ID{0xaa},
		ProducerSub: "auth0|u1", Payload: envelope, Sealed: true}
	msg := engine.ID{0x01, 0x98, 5}
	pp := &engine.PreparedPush{
		Items: []engine.PreparedItem{{TransactionID: "t-s", MessageID: msg, DuplicateOf: -1}},
		Groups: []engine.PreparedGroup{{Queue: "secret", Partition: "Default", Items: []int{0},
			Body: preparedBody([]segment.Frame{{MessageID: msg, TransactionID: []byte("t-s"), Payload: envelope, Sealed: true}})}},
	}
	return []command.Stamped{
		{Stamp: st, Cmd: engine.PushCmd{Items: []engine.PushItem{sealed, traced}}},
		{Stamp: st, Cmd: engine.TransactionCmd{Ops: []engine.TxOp{{Push: &sealed}, {Push: &traced}}}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-s",
			Group: "billing", Payload: envelope, Sealed: true}},
		{Stamp: st, Cmd: pp},
	}
}

// streamCommands are the stream commands (types 18-20), as they were first
// written: a register with a sink, a delete, and a cycle with every part set
// and one with none.
func streamCommands() []command.Stamped {
	st := goldenStamp
	msg := engine.ID{0x01, 0x98, 6}
	pp := &engine.PreparedPush{
		Items: []engine.PreparedItem{{TransactionID: engine.FormatID(msg), MessageID: msg, Minted: true, DuplicateOf: -1}},
		Groups: []engine.PreparedGroup{{Queue: "totals", Partition: "eu", Items: []int{0},
			Body: preparedBody([]segment.Frame{{MessageID: msg, TransactionID: []byte(engine.FormatID(msg)), Payload: []byte(`{"count":3}`)}})}},
	}
	return []command.Stamped{
		{Stamp: st, Cmd: engine.StreamRegisterCmd{Name: "orders.per_customer", SourceQueue: "orders", HasSink: true,
			SinkQueue: "totals", ConfigHash: "9f86d081", Reset: true}},
		{Stamp: st, Cmd: engine.StreamDeleteCmd{Name: "orders.per_customer"}},
		{Stamp: st, Cmd: &engine.PreparedCycle{Cycle: engine.Cycle{QueryID: engine.ID{0xee}, PartitionID: engine.ID{0xcc},
			Group: "streams.orders.per_customer",
			Ops: []engine.StateOp{
				{Key: "tumb:60\x1f2026-01-01T10:00:00.000Z\x1fu1", Value: []byte(`{"acc":{"count":3},"windowStart":1,"windowEnd":60001}`),
					HasWindowEnd: true, WindowEnd: 60001},
				{Key: "__wm__", Value: []byte(`{"eventTimeMs":5}`)},
				{Delete: true, Key: "tumb:60\x1f2026-01-01T09:59:00.000Z\x1fu1"},
			},
			Ack:       &engine.CycleAck{TransactionID: "t-9", Lease: engine.ID{0xdd}, Status: cursor.Completed, Count: 3},
			KeepLease: true, Digest: [32]byte{1, 2, 3, 31: 9}}, Push: pp}},
		{Stamp: st, Cmd: &engine.PreparedCycle{Cycle: engine.Cycle{QueryID: engine.ID{0xee}, PartitionID: engine.ID{0xcc}}}},
	}
}

// goldenEntries are the fixtures in testdata: each file is the hex dump of
// one entry holding its commands.
var goldenEntries = []struct {
	file string
	cmds func() []command.Stamped
}{
	{"entry-v1.golden", v1Commands},
	{"entry-v1-sealed.golden", sealedCommands},
	{"entry-v1-streams.golden", streamCommands},
	{"entry-v1-traces.golden", traceCommands},
	{"entry-v1-directory.golden", directoryCommands},
	{"entry-v1-lookup.golden", lookupCommands},
	{"entry-v1-producer.golden", producerCommands},
	{"entry-v1-outbox.golden", outboxCommands},
	{"entry-v1-move.golden", moveCommands},
	{"entry-v1-freeze.golden", freezeCommands},
	{"entry-v1-layout.golden", layoutCommands},
	{"entry-v1-load.golden", loadCommands},
	{"entry-v1-attempt.golden", attemptCommands},
}

// loadCommands are the directory's load signal (type 38, command version
// 3) as first written: a report with two queues, one pinned, and an empty
// one.
func loadCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: command.GroupLoad{Group: 2, Term: 5, Msgs: 123456, MsgsPerSec: 812.5, BytesPerSec: 416000,
			Queues: []command.QueueLoad{
				{Queue: "orders", Msgs: 100000, MsgsPerSec: 800, BytesPerSec: 409600},
				{Queue: "events", Msgs: 23456, MsgsPerSec: 12.5, BytesPerSec: 6400, Pinned: true},
			}}},
		{Stamp: st, Cmd: command.GroupLoad{Group: 1, Term: 1}},
	}
}

// layoutCommands are the directory's record of where groups live (types
// 35-37 and 39, command version 3) as first written.
func layoutCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: command.Replicas{Count: 3}},
		{Stamp: st, Cmd: command.GroupLayout{Group: 2, Term: 7, Leader: "n2", Voters: []string{"n1", "n2", "n4"}}},
		{Stamp: st, Cmd: command.GroupLayout{Group: 1}},
		{Stamp: st, Cmd: command.ReplicaStep{Group: 3, Add: "n5", Remove: "n2"}},
		{Stamp: st, Cmd: command.ReplicaStep{Group: 3, Add: "n5", Phase: command.StepDone}},
		{Stamp: st, Cmd: command.NodeLeaving{ID: "n2", Leaving: true}},
	}
}

// freezeCommands are a move's freeze and the directory's record of it
// (types 31-34, command version 2) as first written.
func freezeCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: engine.FreezeQueueCmd{Group: 1, Queue: "orders", Epoch: 4}},
		{Stamp: st, Cmd: engine.FreezeQueueCmd{Group: 3, Queue: "orders", Epoch: 4, Thaw: true}},
		{Stamp: st, Cmd: command.BeginMove{Queue: "orders", To: 3}},
		{Stamp: st, Cmd: command.EndMove{Queue: "orders", To: 3, Epoch: 3}},
		{Stamp: st, Cmd: command.AbortMove{Queue: "orders", Epoch: 3}},
	}
}

// attemptCommands are a move's flip and undo naming their attempt (command
// version 4, dirmove.go) as first written.
func attemptCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: command.EndMove{Queue: "orders", To: 3, Epoch: 3, StartedAt: 1_754_000_000_123_456}},
		{Stamp: st, Cmd: command.AbortMove{Queue: "orders", Epoch: 3, StartedAt: 1_754_000_000_123_456}},
	}
}

// moveCommands are the commands that move a queue (types 29-30) as first
// written: an import chunk with keys (one with an empty value), a last
// chunk with none, and a drop.
func moveCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: engine.ImportQueueCmd{Group: 3, Queue: "orders", ID: engine.ID{0x01, 0x98, 7}, Epoch: 4, Seq: 0,
			KVs: []engine.KV{{Key: []byte("\x02orders"), Value: []byte{1, 2, 3}}, {Key: []byte{0x0a, 0, 1, 'o'}, Value: []byte{}}}}},
		{Stamp: st, Cmd: engine.ImportQueueCmd{Group: 3, Queue: "orders", ID: engine.ID{0x01, 0x98, 7}, Epoch: 4, Seq: 9, Last: true}},
		{Stamp: st, Cmd: engine.DropQueueCmd{Group: 1, Queue: "orders", ID: engine.ID{0x01, 0x98, 7}}},
	}
}

// producerCommands are the replays whose corrected payload is stamped with
// the replaying caller's producerSub (payload kind bit 2), as first
// written: plain and sealed, with a subject and anonymous.
func producerCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1", Group: "billing",
			Payload: []byte(`{"fixed":true}`), Restamp: true, ProducerSub: "auth0|mallory"}},
		{Stamp: st, Cmd: engine.ReplayCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-s",
			Payload: []byte(`{"encrypted":""}`), Sealed: true, Restamp: true}},
	}
}

// outboxCommands are the outbox's commands (types 27-28, command version
// 2) as first written: a transaction with an ack, a home push and two away
// pushes (one sealed and traced, one without a transaction id), one with
// nothing but an away push, and a deletion of two rows.
func outboxCommands() []command.Stamped {
	st := goldenStamp
	home := engine.PushItem{Queue: "orders", TransactionID: "t-1", Payload: []byte(`{"orderId":1}`)}
	ack := engine.AckItem{TransactionID: "t-0", PartitionID: engine.ID{0xcc}, Group: "billing", Status: cursor.Completed, Lease: engine.ID{0xdd}}
	away := []engine.PushItem{
		{Queue: "emails", Partition: "eu", TransactionID: "t-2", HasTrace: true, TraceID: engine.ID{0xaa}, ProducerSub: "auth0|u1",
			Payload: []byte(`{"encrypted":""}`), Sealed: true},
		{Queue: "audit", Payload: []byte(`[1]`)},
	}
	return []command.Stamped{
		{Stamp: st, Cmd: engine.OutboxTxCmd{TransactionCmd: engine.TransactionCmd{Ops: []engine.TxOp{{Ack: &ack}, {Push: &home}},
			RequiredLeases: []engine.ID{{0xdd}}}, Away: away}},
		{Stamp: st, Cmd: engine.OutboxTxCmd{Away: away[1:]}},
		{Stamp: st, Cmd: engine.OutboxDeleteCmd{Rows: []engine.ID{{0x01, 0x98, 7}, {0x01, 0x98, 8}}}},
	}
}

// lookupCommands are the lookups (types 24-26) as first written.
func lookupCommands() []command.Stamped {
	return []command.Stamped{
		{Stamp: goldenStamp, Cmd: command.LookupQueue{Queue: "orders"}},
		{Stamp: goldenStamp, Cmd: command.LookupPartition{ID: engine.ID{0xab}}},
		{Stamp: goldenStamp, Cmd: command.LookupLease{ID: engine.ID{0xcd}}},
	}
}

// directoryCommands are the directory's commands (types 22-23) as first
// written.
func directoryCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: command.Groups{Count: 3}},
		{Stamp: st, Cmd: command.PlaceQueue{Queue: "orders", Group: 2}},
		{Stamp: st, Cmd: command.PlaceQueue{Queue: "emails"}},
	}
}

// traceCommands are traces (type 21) as first written: every field set,
// and none.
func traceCommands() []command.Stamped {
	st := goldenStamp
	return []command.Stamped{
		{Stamp: st, Cmd: engine.TraceCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1", Group: "billing", EventType: "step",
			WorkerID: "n1", Data: []byte(`{"at":"charge"}`), Names: []string{"order-42", "tenant-7"}}},
		{Stamp: st, Cmd: engine.TraceCmd{PartitionID: engine.ID{0xcc}, TransactionID: "t-1", Data: []byte(`null`)}},
	}
}

// TestEntry_Golden pins the log format byte for byte: each golden entry
// must encode to its file, and the file must decode to the same commands
// and re-encode to the same bytes. Run with -rewrite only to add a fixture;
// an existing file that changes is a layout changed in place.
func TestEntry_Golden(t *testing.T) {
	for _, g := range goldenEntries {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			cmds := g.cmds()
			got := hex.Dump(command.AppendEntry(nil, cmds))
			if *rewrite {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (create it with -rewrite): %v", err)
			}
			if got != string(want) {
				t.Errorf("encoding changed:\ngot\n%swant\n%s", got, want)
			}
			b := undump(t, string(want))
			dec, err := command.DecodeEntry(b)
			if err != nil {
				t.Fatalf("decode golden: %v", err)
			}
			if len(dec) != len(cmds) {
				t.Fatalf("decoded %d commands, want %d", len(dec), len(cmds))
			}
			for i := range dec {
				if !reflect.DeepEqual(dec[i], cmds[i]) {
					t.Errorf("command %d (%T):\n got %+v\nwant %+v", i, cmds[i].Cmd, dec[i], cmds[i])
				}
			}
			if re := command.AppendEntry(nil, dec); !bytes.Equal(re, b) {
				t.Errorf("the decoded golden re-encodes differently:\n%s", hex.Dump(re))
			}
		})
	}
}

// undump parses the output of hex.Dump.
func undump(t testing.TB, s string) []byte {
	t.Helper()
	var b []byte
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		// "00000000  01 02 ... |....|": the bytes sit between the offset
		// and the ASCII column.
		line, _, _ = strings.Cut(line, "  |")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		b = append(b, h...)
	}
	return b
}
