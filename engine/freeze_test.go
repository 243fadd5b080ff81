package engine_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/engine/keyspace"
)

// refused runs c and checks it is refused ErrQueueMoving with a value of
// its answer's type.
func refused[T any](t *testing.T, h *enginetest.Harness, what string, c engine.Command) {
	t.Helper()
	if _, err := enginetest.Run[T](h, c); !errors.Is(err, engine.ErrQueueMoving) {
		t.Errorf("%s on a frozen queue: %v, want ErrQueueMoving", what, err)
	}
}

// TestFreeze_RefusesEveryWrite freezes the move fixture's queue and sends
// it every kind of command that changes a queue: each is refused with
// ErrQueueMoving and nothing is written (the store's keys are what they
// were), while the bystander queue takes writes. Commands over every
// queue skip the frozen one. The mark survives a restart, is not part of
// the queue's export, outlives a drop (a tombstone), and a thaw of its
// epoch lifts it.
func TestFreeze_RefusesEveryWrite(t *testing.T) {
	f := newMoveFixture(t)
	h := f.h
	h.Set("orders", map[engine.Option]int64{engine.OptRetentionEnabled: 1, engine.OptRetentionSeconds: 60})
	if !enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "orders", Epoch: 2}) {
		t.Fatal("freeze changed nothing")
	}
	if enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "orders", Epoch: 2}) {
		t.Fatal("a repeated freeze changed something")
	}
	exported := exportAll(t, h, "orders", engine.ExportChunkBytes)
	p0, p1, p2 := f.parts["p0"], f.parts["p1"], f.parts["p2"]
	lease := f.lease.LeaseID
	held := enginetest.AckMessages(f.lease, "completed")
	pending := popPart(h, "other", "", "billing", 1) // a bystander's message: pops still run elsewhere
	if len(pending.Messages) != 1 {
		t.Fatalf("pop from the bystander: %+v", pending)
	}
	h.Apply(engine.PushCmd{Items: []engine.PushItem{{Queue: "other", Payload: []byte(`1`)}}})
	before := withoutMeta(h.Dump()) // the bystander's writes above are not the frozen queue's
	orderPush := engine.PushItem{Queue: "orders", Partition: "p0", TransactionID: "new", Payload: []byte(`1`)}
	otherPush := engine.PushItem{Queue: "other", TransactionID: "new-o", Payload: []byte(`1`)}
	ack := engine.AckItem{TransactionID: "t-1", PartitionID: p1, Group: "billing", Status: cursor.Completed}

	refused[[]engine.PushResult](t, h, "push", engine.PushCmd{Items: []engine.PushItem{orderPush}})
	refused[[]engine.PushResult](t, h, "push to it and another queue", engine.PushCmd{Items: []engine.PushItem{otherPush, orderPush}})
	refused[engine.PopResult](t, h, "pop", engine.PopCmd{Queue: "orders", Group: "billing", Batch: 5})
	refused[engine.PopResult](t, h, "pop of a partition", engine.PopCmd{Queue: "orders", Partition: "p2", Group: "fresh", Batch: 5})
	refused[engine.PopResult](t, h, "pop in queue mode", engine.PopCmd{Queue: "orders", Batch: 5})
	refused[[]engine.AckResult](t, h, "ack of the held lease", engine.AckCmd{Items: held})
	refused[[]engine.AckResult](t, h, "lease-less ack", engine.AckCmd{Items: []engine.AckItem{ack}})
	refused[engine.ExtendResult](t, h, "lease extension", engine.ExtendLeaseCmd{Lease: lease, Seconds: 60})
	refused[engine.TxResult](t, h, "transaction pushing to it", engine.TransactionCmd{Ops: []engine.TxOp{{Push: &orderPush}}})
	refused[engine.TxResult](t, h, "transaction acking on it", engine.TransactionCmd{Ops: []engine.TxOp{{Push: &otherPush}, {Ack: &ack}}})
	refused[engine.TxResult](t, h, "transaction requiring its lease", engine.TransactionCmd{Ops: []engine.TxOp{{Push: &otherPush}}, RequiredLeases: []engine.ID{lease}})
	refused[engine.TxResult](t, h, "outbox transaction", engine.OutboxTxCmd{TransactionCmd: engine.TransactionCmd{Ops: []engine.TxOp{{Ack: &ack}}}, Away: []engine.PushItem{otherPush}})
	refused[engine.ReplayResult](t, h, "DLQ replay", engine.ReplayCmd{PartitionID: p0, TransactionID: "t-60"})
	refused[int](t, h, "DLQ delete", engine.DeleteDLQCmd{PartitionID: p1, TransactionID: "t-61"})
	refused[engine.AckResult](t, h, "move to the DLQ", engine.MoveToDLQCmd{PartitionID: p2, TransactionID: "t-290", Group: "billing", Error: "x"})
	refused[engine.ID](t, h, "trace", engine.TraceCmd{PartitionID: p0, TransactionID: "t-0", Names: []string{"n"}})
	refused[int](t, h, "seek", engine.SeekCmd{Queue: "orders", Group: "billing", ToEnd: true})
	refused[engine.QueueInfo](t, h, "configure", engine.ConfigureCmd{Queue: "orders", Set: []engine.OptionValue{{Option: engine.OptRetryLimit, Value: 5}}})
	refused[bool](t, h, "delete", engine.DeleteQueueCmd{Queue: "orders"})
	refused[engine.GroupDeleted](t, h, "consumer group deletion on it", engine.DeleteGroupCmd{Group: "billing", Queue: "orders"})
	refused[engine.GroupDeleted](t, h, "consumer group deletion everywhere", engine.DeleteGroupCmd{Group: "audit", DeleteMetadata: true})
	refused[int](t, h, "subscription change", engine.UpdateSubscriptionCmd{Group: "billing", Timestamp: 1})
	if d := enginetest.DiffDumps(before, withoutMeta(h.Dump())); d != "" {
		t.Fatalf("refused commands wrote:\n%s", d)
	}

	// Over every queue: the frozen one is skipped, the others served.
	if res := h.Pop(engine.PopCmd{Namespace: "shop", Group: "billing", Batch: 10}); len(res.Messages) != 0 {
		t.Fatalf("a discovery pop delivered %d messages of the frozen queue", len(res.Messages))
	}
	h.Advance(400 * 24 * 3600 * 1e6)
	h.Sweep()
	if got := exportAll(t, h, "orders", engine.ExportChunkBytes); !reflect.DeepEqual(got, exported) {
		t.Fatal("the queue changed while frozen")
	}
	if n := h.Push(otherPush); n[0].Status != engine.Queued {
		t.Fatalf("a push to the bystander: %+v", n[0])
	}
	for _, c := range exported {
		for _, kv := range c.KVs {
			if keyspace.Family(kv.Key[0]) == keyspace.FamilyMeta {
				t.Fatalf("the export carries meta key %q", kv.Key)
			}
		}
	}

	h.Reopen()
	if ep, ok := h.Frozen("orders"); !ok || ep != 2 {
		t.Fatalf("after a restart: frozen %v at epoch %d", ok, ep)
	}
	refused[[]engine.PushResult](t, h, "push after a restart", engine.PushCmd{Items: []engine.PushItem{orderPush}})

	// The move's own commands run; the mark outlives the drop.
	info, err := h.Queue("orders")
	if err != nil {
		t.Fatal(err)
	}
	if !enginetest.Must[bool](h, engine.DropQueueCmd{Queue: "orders", ID: info.ID}) {
		t.Fatal("the drop of a frozen queue found nothing")
	}
	refused[[]engine.PushResult](t, h, "push after the drop", engine.PushCmd{Items: []engine.PushItem{orderPush}})
	h.Reopen()
	refused[[]engine.AckResult](t, h, "ack of a dropped partition", engine.AckCmd{Items: []engine.AckItem{ack}})
	refused[int](t, h, "DLQ delete of a dropped partition", engine.DeleteDLQCmd{PartitionID: p1, TransactionID: "t-61"})
	if enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "orders", Epoch: 1, Thaw: true}) {
		t.Fatal("a thaw of another epoch lifted the mark")
	}
	if !enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "orders", Epoch: 2, Thaw: true}) {
		t.Fatal("the thaw changed nothing")
	}
	if r := h.Push(orderPush); r[0].Status != engine.Queued {
		t.Fatalf("a push after the thaw: %+v", r[0])
	}
	if r := h.Ack(ack); r[0].Success {
		t.Fatalf("an ack of a partition dropped before the thaw: %+v", r[0])
	}
	if _, ok := h.Frozen("orders"); ok {
		t.Fatal("still frozen")
	}
}

// TestFreeze_ImportRunsIntoAFrozenName: the target of a move is frozen
// too while it imports (nothing reaches its copy before the placement
// flips), and the import's chunks are not refused.
func TestFreeze_ImportRunsIntoAFrozenName(t *testing.T) {
	f := newMoveFixture(t)
	chunks := exportAll(t, f.h, "orders", 64<<10)
	b := enginetest.MustOpen(t)
	enginetest.Must[bool](b, engine.FreezeQueueCmd{Queue: "orders", Epoch: 2})
	for i, c := range chunks {
		enginetest.Must[engine.ImportResult](b, importCmd("orders", 2, i, c))
	}
	refused[engine.ExtendResult](t, b, "lease extension on the imported copy", engine.ExtendLeaseCmd{Lease: f.lease.LeaseID, Seconds: 60})
	enginetest.Must[bool](b, engine.FreezeQueueCmd{Queue: "orders", Epoch: 2, Thaw: true})
	if r := enginetest.Must[engine.ExtendResult](b, engine.ExtendLeaseCmd{Lease: f.lease.LeaseID, Seconds: 60}); r.Renewed == 0 {
		t.Fatalf("extend the carried lease after the thaw: %+v", r)
	}
}

// A replica restored from a snapshot (a follower catching up) holds the
// marks: the frozen queue, and the partitions of a dropped one.
func TestFreeze_TravelsInSnapshots(t *testing.T) {
	f := newMoveFixture(t)
	h := f.h
	enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "orders", Epoch: 3})
	enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "other", Epoch: 4})
	info, err := h.Queue("other")
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Must[bool](h, engine.DropQueueCmd{Queue: "other", ID: info.ID})
	snap, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = snap.WriteTo(&buf)
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	dst := enginetest.MustOpen(t)
	if err := dst.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	if ep, ok := dst.Frozen("orders"); !ok || ep != 3 {
		t.Fatalf("orders after the restore: frozen %v at %d", ok, ep)
	}
	refused[[]engine.PushResult](t, dst, "push to the frozen queue", engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", Payload: []byte(`1`)}}})
	ack := engine.AckItem{TransactionID: "o-0", PartitionID: info.Partitions[0].ID, Group: "g", Status: cursor.Completed}
	refused[[]engine.AckResult](t, dst, "ack of the dropped queue's partition", engine.AckCmd{Items: []engine.AckItem{ack}})
}

// TestFreeze_RefusesStreamsIntoAFrozenQueue: a stream registered with a
// frozen queue as its sink or source, and a cycle that pushes into a
// frozen sink (as the edge builds it and as the proposer prepares it) or
// acks a frozen source, are refused with nothing written; before this
// the cycle's sink push was queued into the queue being exported, and
// lost when the source copy was dropped. A stream that reads and writes
// other queues runs.
func TestFreeze_RefusesStreamsIntoAFrozenQueue(t *testing.T) {
	h := enginetest.MustOpen(t)
	src := h.PushOne("events", "", "e-1", `{"n":1}`)
	h.PushOne("totals", "", "seed", `{"n":0}`)
	h.PushOne("frozen-source", "", "f-1", `{"n":1}`)
	reg := enginetest.Must[engine.StreamRegistered](h, engine.StreamRegisterCmd{Name: "sum", SourceQueue: "events",
		HasSink: true, SinkQueue: "totals", ConfigHash: "h"})
	enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "totals", Epoch: 1})
	enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "frozen-source", Epoch: 1})
	before := withoutMeta(h.Dump())

	refused[engine.StreamRegistered](t, h, "a stream registered with it as sink", engine.StreamRegisterCmd{Name: "late",
		SourceQueue: "events", HasSink: true, SinkQueue: "totals", ConfigHash: "h"})
	refused[engine.StreamRegistered](t, h, "a stream registered with it as source", engine.StreamRegisterCmd{Name: "late2",
		SourceQueue: "frozen-source", ConfigHash: "h"})
	sink := engine.PushItem{Queue: "totals", TransactionID: "sum-1", Payload: []byte(`{"n":1}`)}
	cycle := engine.StreamCycleCmd{Cycle: engine.Cycle{QueryID: reg.ID, PartitionID: src.PartitionID,
		Ops: []engine.StateOp{{Key: "k", Value: []byte(`1`)}}}, Items: []engine.PushItem{sink}}
	refused[engine.StreamCycleResult](t, h, "a cycle pushing into it", cycle)
	prepared, err := cycle.Prepare(engine.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	refused[engine.StreamCycleResult](t, h, "a prepared cycle pushing into it", prepared)
	fs, err := h.Queue("frozen-source")
	if err != nil {
		t.Fatal(err)
	}
	refused[engine.StreamCycleResult](t, h, "a cycle acking its partition", engine.StreamCycleCmd{Cycle: engine.Cycle{QueryID: reg.ID,
		PartitionID: fs.Partitions[0].ID, Ack: &engine.CycleAck{TransactionID: "f-1", Status: cursor.Completed}}})
	if d := enginetest.DiffDumps(before, withoutMeta(h.Dump())); d != "" {
		t.Fatalf("refused stream commands wrote:\n%s", d)
	}

	// Elsewhere streams run: a registration and a cycle with no frozen queue.
	enginetest.Must[engine.StreamRegistered](h, engine.StreamRegisterCmd{Name: "copy", SourceQueue: "events",
		HasSink: true, SinkQueue: "copies", ConfigHash: "h"})
	res := enginetest.Must[engine.StreamCycleResult](h, engine.StreamCycleCmd{Cycle: engine.Cycle{QueryID: reg.ID,
		PartitionID: src.PartitionID, Ops: []engine.StateOp{{Key: "k", Value: []byte(`1`)}}},
		Items: []engine.PushItem{{Queue: "copies", TransactionID: "c-1", Payload: []byte(`1`)}}})
	if !res.Success || len(res.Pushes) != 1 || res.Pushes[0].Status != engine.Queued {
		t.Fatalf("a cycle into a queue not frozen: %+v", res)
	}
}

// rogueCmd is a command type without a footprint (engine.Touches).
type rogueCmd struct{}

func (rogueCmd) Apply(*engine.Batch, engine.Stamp) engine.Result { return engine.Result{Value: true} }

// TestFreeze_RefusesAnUnlistedCommand: while a queue is frozen, a command
// whose type has no footprint is refused (it might write the
// queue), with an error that says so and is retried like ErrQueueMoving;
// with nothing frozen it runs.
func TestFreeze_RefusesAnUnlistedCommand(t *testing.T) {
	h := enginetest.MustOpen(t)
	if _, listed := engine.Touches(rogueCmd{}); listed {
		t.Fatal("an unknown command type has a footprint")
	}
	enginetest.Must[bool](h, rogueCmd{})
	h.PushOne("orders", "", "t", `1`)
	enginetest.Must[bool](h, engine.FreezeQueueCmd{Queue: "orders", Epoch: 1})
	_, err := enginetest.Run[bool](h, rogueCmd{})
	if !errors.Is(err, engine.ErrUnlistedCommand) || !errors.Is(err, engine.ErrQueueMoving) {
		t.Fatalf("an unlisted command while a queue is frozen: %v, want ErrUnlistedCommand", err)
	}
}
