package engine_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

func TestEngine_SnapshotRestore(t *testing.T) {
	src := enginetest.MustOpen(t)
	src.PushOne("q", "p1", "t1", `{"n":1}`)
	src.PushOne("q", "p1", "t2", `{"n":2}`)
	res := src.Pop(engine.PopCmd{Queue: "q", Partition: "p1", Batch: 1, Group: "g"})
	src.Ack(enginetest.AckMessages(res, "dlq")...)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Close()
	// Later writes to the source are not in the snapshot.
	src.PushOne("q", "p1", "t3", `{"n":3}`)

	dst := enginetest.MustOpen(t)
	dst.PushOne("other", "", "x", `{}`) // replaced by the restore
	if err := dst.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := dst.Queue("other"); !errors.Is(err, engine.ErrQueueNotFound) {
		t.Fatalf("queue from before the restore survived: %v", err)
	}
	rows, total, err := dst.ListDLQ(engine.DLQFilter{Queue: "q"})
	if err != nil || total != 1 || rows[0].TransactionID != "t1" {
		t.Fatalf("DLQ after restore = %+v, %d, %v", rows, total, err)
	}
	got := dst.Pop(engine.PopCmd{Queue: "q", Partition: "p1", Batch: 10, Group: "g"})
	if len(got.Messages) != 1 || got.Messages[0].TransactionID != "t2" {
		t.Fatalf("pop after restore = %+v", got.Messages)
	}
}

func TestEngine_RestoreCorrupt(t *testing.T) {
	src := enginetest.MustOpen(t)
	src.PushOne("q", "", "t1", `{}`)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	snap.WriteTo(&buf)
	snap.Close()
	b := buf.Bytes()
	b[len(b)/2] ^= 0xff

	dir := t.TempDir()
	e, err := engine.Open(dir, enginetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(bytes.NewReader(b)); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("restore of a corrupt stream: err = %v, want ErrCorrupt", err)
	}
	if _, err := e.Queues(); err == nil {
		t.Fatal("engine serves reads after a failed restore")
	}
	e.Close()
	// Read-only (queen check), the store is reported, not wiped.
	ro := enginetest.Options()
	ro.ReadOnly = true
	if _, err := engine.Open(dir, ro); !errors.Is(err, engine.ErrRestoreCut) {
		t.Fatalf("read-only open of a cut-off restore: %v, want ErrRestoreCut", err)
	}
	// The interrupted restore is wiped at the next open.
	h := enginetest.MustOpenDir(t, dir, enginetest.Options())
	if qs, err := h.Queues(); err != nil || len(qs) != 0 {
		t.Fatalf("queues after reopening a failed restore = %v, %v", qs, err)
	}
}
