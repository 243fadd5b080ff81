package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// outboxRows reads every outbox row of h.
func outboxRows(t *testing.T, h *enginetest.Harness) []engine.OutboxRow {
	t.Helper()
	rows, err := h.Outbox(100)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// An outbox transaction acks and pushes in its home group and writes one
// row per away push, in order, with the client's transaction id or one
// minted from the seed; the rows survive a reopen (they are on disk, not
// in the model), and the transaction's result names them.
func TestOutboxTx_CommitsWithRows(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("in", "", "in-1", `{}`)
	ack := item(t, popQueue(h, "in", "G", 1), "in-1", "completed", "")
	tx := enginetest.Must[engine.TxResult](h, engine.OutboxTxCmd{
		TransactionCmd: engine.TransactionCmd{Ops: []engine.TxOp{
			{Ack: &ack},
			{Push: &engine.PushItem{Queue: "local", TransactionID: "l-1", Payload: []byte(`{"l":1}`)}},
		}},
		Away: []engine.PushItem{
			{Queue: "far", TransactionID: "f-1", Payload: []byte(`{"f":1}`)},
			{Queue: "far", Partition: "eu", Payload: []byte(`{"f":2}`), Sealed: true},
		},
	})
	if !tx.Success || len(tx.Acks) != 1 || !tx.Acks[0].Success || len(tx.Pushes) != 1 || tx.Pushes[0].Status != engine.Queued {
		t.Fatalf("transaction = %+v", tx)
	}
	if len(tx.Outbox) != 2 || tx.Outbox[0].Item.TransactionID != "f-1" ||
		tx.Outbox[1].Item.TransactionID != engine.FormatID(tx.Outbox[1].ID) || tx.Outbox[0].Tx != tx.ID {
		t.Fatalf("outbox rows = %+v", tx.Outbox)
	}
	wantNothing(t, "acked input", popQueue(h, "in", "G", 1))
	wantTxns(t, "local push", popQueue(h, "local", "G", 1), "l-1")
	if q, _ := h.Queue("far"); len(q.Partitions) != 0 {
		t.Fatalf("an away push reached the home group's queue: %+v", q)
	}
	h.Reopen()
	got := outboxRows(t, h)
	if len(got) != 2 || got[0].ID != tx.Outbox[0].ID || got[1].ID != tx.Outbox[1].ID ||
		string(got[1].Item.Payload) != `{"f":2}` || !got[1].Item.Sealed || got[1].Item.Partition != "eu" ||
		got[0].CreatedAt != h.Now {
		t.Fatalf("rows after reopen = %+v, want %+v", got, tx.Outbox)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}

// A transaction that fails at home writes no row; an away push that is
// invalid fails the whole transaction before anything is written.
func TestOutboxTx_FailureWritesNothing(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("in", "", "in-1", `{}`)
	ack := item(t, popQueue(h, "in", "G", 1), "in-1", "completed", "")
	before := h.Dump()
	bad := engine.OutboxTxCmd{TransactionCmd: engine.TransactionCmd{Ops: []engine.TxOp{{Ack: &ack}}},
		Away: []engine.PushItem{{Queue: "", Payload: []byte(`{}`)}}}
	if tx := enginetest.Must[engine.TxResult](h, bad); tx.Success || tx.Error == "" || len(tx.Outbox) != 0 {
		t.Fatalf("invalid away push: %+v, want a failure", tx)
	}
	h.Advance(time.Hour) // the lease expires: the ack fails
	expired := engine.OutboxTxCmd{TransactionCmd: engine.TransactionCmd{Ops: []engine.TxOp{{Ack: &ack}}},
		Away: []engine.PushItem{{Queue: "far", Payload: []byte(`{}`)}}}
	if tx := enginetest.Must[engine.TxResult](h, expired); tx.Success || len(tx.Outbox) != 0 {
		t.Fatalf("expired ack: %+v, want a failure", tx)
	}
	if diff := enginetest.DiffDumps(before, h.Dump()); diff != "" {
		t.Fatalf("failed transactions wrote:\n%s", diff)
	}
}

// Deleting rows removes exactly those named; a repeat, or a row never
// written, deletes nothing.
func TestOutboxDelete_Idempotent(t *testing.T) {
	h := enginetest.MustOpen(t)
	tx := enginetest.Must[engine.TxResult](h, engine.OutboxTxCmd{Away: []engine.PushItem{
		{Queue: "far", TransactionID: "a", Payload: []byte(`1`)},
		{Queue: "far", TransactionID: "b", Payload: []byte(`2`)},
		{Queue: "other", TransactionID: "c", Payload: []byte(`3`)},
	}})
	if !tx.Success || len(tx.Outbox) != 3 {
		t.Fatalf("transaction = %+v", tx)
	}
	del := engine.OutboxDeleteCmd{Rows: []engine.ID{tx.Outbox[0].ID, tx.Outbox[2].ID, {0x42}}}
	if n := enginetest.Must[int](h, del); n != 2 {
		t.Fatalf("deleted %d rows, want 2", n)
	}
	if n := enginetest.Must[int](h, del); n != 0 {
		t.Fatalf("a repeat deleted %d rows, want 0", n)
	}
	got := outboxRows(t, h)
	if len(got) != 1 || got[0].ID != tx.Outbox[1].ID || got[0].Item.TransactionID != "b" {
		t.Fatalf("rows left = %+v, want only b", got)
	}
	// Rows come back oldest first, limited.
	h.Advance(time.Second)
	later := enginetest.Must[engine.TxResult](h, engine.OutboxTxCmd{Away: []engine.PushItem{{Queue: "far", Payload: []byte(`4`)}}})
	ids := func(rows []engine.OutboxRow) []engine.ID {
		var out []engine.ID
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids(outboxRows(t, h)); !slices.Equal(got, []engine.ID{tx.Outbox[1].ID, later.Outbox[0].ID}) {
		t.Fatalf("rows = %v, want the older first", got)
	}
	if rows, err := h.Outbox(1); err != nil || len(rows) != 1 || rows[0].ID != tx.Outbox[1].ID {
		t.Fatalf("Outbox(1) = %+v, %v", rows, err)
	}
}
