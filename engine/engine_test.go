package engine_test

import (
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

func TestEngine_PushPopAck(t *testing.T) {
	h := enginetest.MustOpen(t)
	pushed := h.PushOne("q", "", "t1", `{"a":1}`)
	if pushed.Partition != "Default" || pushed.TransactionID != "t1" {
		t.Fatalf("push result = %+v", pushed)
	}
	res := h.Pop(engine.PopCmd{Queue: "q", Partition: "Default", Batch: 10})
	if len(res.Messages) != 1 {
		t.Fatalf("got %d messages, want 1", len(res.Messages))
	}
	m := res.Messages[0]
	if string(m.Payload) != `{"a":1}` || m.TransactionID != "t1" || m.ID != pushed.MessageID || m.Partition != "Default" {
		t.Fatalf("message = %+v", m)
	}
	acks := h.Ack(enginetest.AckMessages(res, "completed")...)
	if !acks[0].Success || !acks[0].LeaseReleased {
		t.Fatalf("ack = %+v", acks[0])
	}
	if res := h.Pop(engine.PopCmd{Queue: "q", Batch: 10}); len(res.Messages) != 0 {
		t.Fatalf("pop after ack got %d messages", len(res.Messages))
	}
	h.Reopen()
	if res := h.Pop(engine.PopCmd{Queue: "q", Batch: 10}); len(res.Messages) != 0 {
		t.Fatalf("pop after reopen got %d messages", len(res.Messages))
	}
}
