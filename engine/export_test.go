package engine_test

import (
	"fmt"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// Messages pages a partition oldest first across segments, from any
// offset, and starts at the oldest retained offset.
func TestMessages_PagesAPartitionOldestFirst(t *testing.T) {
	h := enginetest.MustOpen(t)
	var want []string
	for batch := range 4 { // one segment per push
		var items []engine.PushItem
		for i := range 5 {
			txn := fmt.Sprintf("t%d-%d", batch, i)
			want = append(want, txn)
			items = append(items, engine.PushItem{Queue: "q", Partition: "p", TransactionID: txn, Payload: []byte(`{}`)})
		}
		h.Push(items...)
		h.Advance(1e6)
	}
	h.PushOne("q", "other", "x", `{}`)
	q, err := h.Queue("q")
	if err != nil {
		t.Fatal(err)
	}
	var part engine.ID
	for _, p := range q.Partitions {
		if p.Name == "p" {
			part = p.ID
		}
	}
	for _, limit := range []int{1, 3, 7, 100} {
		var got []string
		for from := engine.Offset(0); from >= 0; {
			msgs, next, err := h.Messages(part, from, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) > limit || (next >= 0 && len(msgs) != limit) {
				t.Fatalf("limit %d from %d: %d messages, next %d", limit, from, len(msgs), next)
			}
			for _, m := range msgs {
				if m.Offset != engine.Offset(len(got)) || m.Partition != "p" || m.Queue != "q" {
					t.Fatalf("limit %d: message %+v at position %d", limit, m, len(got))
				}
				got = append(got, m.TransactionID)
			}
			from = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d: got %v, want %v", limit, got, want)
		}
	}
	if msgs, next, err := h.Messages(part, 12, 100); err != nil || len(msgs) != 8 || msgs[0].TransactionID != "t2-2" || next != -1 {
		t.Fatalf("from 12: %d messages, next %d, err %v", len(msgs), next, err)
	}
	if _, _, err := h.Messages(engine.ID{1}, 0, 10); err != engine.ErrPartitionNotFound {
		t.Fatalf("unknown partition: err %v", err)
	}
}
