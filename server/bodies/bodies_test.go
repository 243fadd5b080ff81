package bodies_test

import (
	"errors"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/bodies"
	"github.com/queenmq/queen/server/wire"
)

// A push body's items come back validated, in order, with the payload
// rules of docs/api.md §5; a missing items array and a bad name are 400s.
func TestPushItems(t *testing.T) {
	items, err := bodies.PushItems([]byte(`{"items":[{"queue":"q","payload":{"a":1}},{"queue":"q","data":null},{"queue":"q"}]}`))
	if err != nil || len(items) != 3 {
		t.Fatalf("items %v, err %v", items, err)
	}
	if string(items[0].Payload) != `{"a":1}` || string(items[1].Payload) != "null" || string(items[2].Payload) != "{}" {
		t.Fatalf("payloads %q %q %q", items[0].Payload, items[1].Payload, items[2].Payload)
	}
	for _, body := range []string{`{}`, `{"items":{}}`, `{"items":[{"payload":1}]}`, `{"items":[{"queue":"a\u200bb"}]}`} {
		if _, err := bodies.PushItems([]byte(body)); !isBadRequest(err) {
			t.Errorf("%s: err %v, want a 400", body, err)
		}
	}
}

// A batch's top-level consumerGroup overrides every item's; an item that
// names no partition UUID is a per-item error, not a 400.
func TestAckBatch(t *testing.T) {
	fields, err := bodies.AckBatch([]byte(`{"consumerGroup":"g","acknowledgments":[
		{"transactionId":"t1","partitionId":"0190b2c0-0000-7000-8000-000000000001","consumerGroup":"other"},
		{"transactionId":"t2","partitionId":"nope"}]}`))
	if err != nil || len(fields) != 2 {
		t.Fatalf("fields %v, err %v", fields, err)
	}
	items, itemErrs := bodies.AckItems(fields)
	if len(items) != 1 || items[0].Group != "g" || items[0].TransactionID != "t1" || itemErrs[0] != "" || itemErrs[1] == "" {
		t.Fatalf("items %+v, itemErrs %q", items, itemErrs)
	}
	if _, err := bodies.AckBatch([]byte(`{"acknowledgments":[{"partitionId":"p"}]}`)); !isBadRequest(err) {
		t.Fatalf("an ack without transactionId: err %v, want a 400", err)
	}
}

// A transaction keeps its operations' request order; an unknown type and
// an empty list are 400s.
func TestTransaction(t *testing.T) {
	tx, err := bodies.Transaction([]byte(`{"operations":[
		{"type":"push","items":[{"queue":"a"},{"queue":"b"}]},
		{"type":"ack","transactionId":"t","partitionId":"0190b2c0-0000-7000-8000-000000000001"},
		{"type":"push","queue":"c"}],"requiredLeases":null}`))
	if err != nil || len(tx.Ops) != 4 || len(tx.Order) != 4 {
		t.Fatalf("tx %+v, err %v", tx, err)
	}
	if tx.Ops[0].Push.Queue != "a" || tx.Ops[2].Ack == nil || tx.Ops[3].Push.Queue != "c" {
		t.Fatalf("ops out of order: %+v", tx.Ops)
	}
	for _, body := range []string{`{"operations":[]}`, `{"operations":[{"type":"pop"}]}`, `{}`} {
		if _, err := bodies.Transaction([]byte(body)); !isBadRequest(err) {
			t.Errorf("%s: err %v, want a 400", body, err)
		}
	}
}

func isBadRequest(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) || errors.Is(err, engine.ErrInvalid)
}

// A push still on its way from a transaction's outbox succeeded: it is
// written pending, with no ids yet.
func TestWriteTxResults_Pending(t *testing.T) {
	tx, err := bodies.Transaction([]byte(`{"operations":[{"type":"push","queue":"a","transactionId":"p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var w wire.Writer
	w.Object("")
	bodies.WriteTxResults(&w, tx.Order, &engine.TxResult{Pushes: []engine.PushResult{{Status: engine.Pending, TransactionID: "p", Queue: "a"}}})
	w.EndObject()
	want := `{"results":[{"index":0,"type":"push","success":true,"transactionId":"p","messageId":null,"partitionId":null,"queueName":"a","status":"pending"}]}`
	if got := string(w.Bytes()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
