package engine_test

import (
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// sealedPush pushes one item to queue q, sealed as asked, and returns it
// queued.
func sealedPush(h *enginetest.Harness, txn string, sealed bool) engine.PushResult {
	h.T.Helper()
	res := h.Push(engine.PushItem{Queue: "q", TransactionID: txn, Payload: []byte(`"` + txn + `"`), Sealed: sealed})
	if res[0].Status != engine.Queued {
		h.T.Fatalf("push %s: %+v", txn, res[0])
	}
	return res[0]
}

// wantSealed fails unless every message is sealed exactly when want says
// so, with its payload unchanged (the transaction id, quoted).
func wantSealed(t *testing.T, what string, msgs []engine.Message, want map[string]bool) {
	t.Helper()
	if len(msgs) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(msgs), len(want))
	}
	for _, m := range msgs {
		sealed, ok := want[m.TransactionID]
		if !ok || m.Sealed != sealed || string(m.Payload) != `"`+m.TransactionID+`"` {
			t.Fatalf("%s: message %s sealed %v payload %s, want sealed %v", what, m.TransactionID, m.Sealed, m.Payload, sealed)
		}
	}
}

// The sealed bit of a push item is stored with its frame and comes back on
// every read of the message: a pop reading in its batch or deferred,
// MessageAt and ListMessages, after a restart too; and a transaction's
// pushes carry it like a push's.
func TestBatch_Push_SealedBitReadBack(t *testing.T) {
	h := enginetest.MustOpen(t)
	sealedPush(h, "s", true)
	sealedPush(h, "p", false)
	tx := h.Transaction([]engine.TxOp{
		{Push: &engine.PushItem{Queue: "q", TransactionID: "ts", Payload: []byte(`"ts"`), Sealed: true}},
		{Push: &engine.PushItem{Queue: "q", TransactionID: "tp", Payload: []byte(`"tp"`)}},
	})
	if !tx.Success {
		t.Fatalf("transaction: %s", tx.Error)
	}
	want := map[string]bool{"s": true, "p": false, "ts": true, "tp": false}
	pid := partID(h, "q", "Default")

	wantSealed(t, "pop", popQueue(h, "q", "G", 10).Messages, want)

	for _, reopened := range []bool{false, true} {
		var stored []engine.Message
		for txn := range want {
			m, err := h.MessageAt(pid, txn)
			if err != nil {
				t.Fatalf("MessageAt %s: %v", txn, err)
			}
			stored = append(stored, m.Message)
		}
		wantSealed(t, "MessageAt", stored, want)
		listed, err := h.ListMessages(engine.MessageFilter{Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		stored = stored[:0]
		for _, m := range listed {
			stored = append(stored, m.Message)
		}
		wantSealed(t, "ListMessages", stored, want)
		if !reopened {
			h.Reopen()
		}
	}
}

// A dead-letter row keeps its message's sealed bit. Replaying the snapshot
// re-pushes the payload with that bit, as it is (a sealed payload is never
// sealed twice); replaying a corrected payload uses the command's bit,
// whatever the snapshot's was.
func TestBatch_Replay_SealedBit(t *testing.T) {
	h := enginetest.MustOpen(t)
	for _, txn := range []string{"s", "p", "s2p", "p2s"} {
		r := sealedPush(h, txn, txn == "s" || txn == "s2p")
		if res, err := h.MoveToDLQ(r.PartitionID, txn, "G", "bad"); err != nil || !res.DLQ {
			t.Fatalf("move %s: %+v, %v", txn, res, err)
		}
	}
	pid := partID(h, "q", "Default")
	rows, _ := dlq(h, engine.DLQFilter{Queue: "q"})
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for _, d := range rows {
		if want := d.TransactionID == "s" || d.TransactionID == "s2p"; d.Sealed != want {
			t.Fatalf("row %s: sealed %v, want %v", d.TransactionID, d.Sealed, want)
		}
	}

	replays := []struct {
		txn     string
		cmd     engine.ReplayCmd
		payload string
		sealed  bool
	}{
		{"s", engine.ReplayCmd{}, `"s"`, true},
		{"p", engine.ReplayCmd{Sealed: true}, `"p"`, false}, // no payload: the bit is the snapshot's
		{"s2p", engine.ReplayCmd{Payload: []byte(`"fixed"`)}, `"fixed"`, false},
		{"p2s", engine.ReplayCmd{Payload: []byte(`"sealed fix"`), Sealed: true}, `"sealed fix"`, true},
	}
	for _, r := range replays {
		r.cmd.PartitionID, r.cmd.TransactionID = pid, r.txn
		rep, err := h.Replay(r.cmd)
		if err != nil {
			t.Fatalf("replay %s: %v", r.txn, err)
		}
		m, err := h.MessageAt(pid, rep.Push.TransactionID)
		if err != nil {
			t.Fatalf("replayed %s: %v", r.txn, err)
		}
		if m.Sealed != r.sealed || string(m.Payload) != r.payload {
			t.Fatalf("replayed %s: sealed %v payload %s, want %v %s", r.txn, m.Sealed, m.Payload, r.sealed, r.payload)
		}
	}
}
