package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// A pop's messages are read after its batch commits: its result carries
// none until Engine.Finish, which fills exactly the leased offsets, once. A
// replica that applies the same pops and never finishes them (it does not
// answer them) writes an identical store.
func TestPopReads_AfterTheCommit(t *testing.T) {
	proposer, replica := enginetest.MustOpen(t), enginetest.MustOpen(t)
	for _, h := range []*enginetest.Harness{proposer, replica} {
		for i := 0; i < 250; i++ {
			h.PushOne("q", fmt.Sprintf("p%d", i%3), fmt.Sprintf("t%d", i), fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", i)))
		}
	}
	seen := map[string]bool{}
	for round := 0; round < 3; round++ { // 3 x 70 of the 250 messages
		cmd := engine.PopCmd{Queue: "q", Batch: 70, Partitions: 2}
		st := proposer.Stamp()
		replica.Stamp() // the same stamps on both
		var r engine.Result
		proposer.Do(func(b *engine.Batch) { r = b.Apply(st, cmd) })
		replica.Do(func(b *engine.Batch) { b.Apply(st, cmd) })
		if got := r.Value.(engine.PopResult); len(got.Messages) != 0 || len(got.Claims) == 0 {
			t.Fatalf("round %d: before Finish the pop carried %d messages, %d claims", round, len(got.Messages), len(got.Claims))
		}
		if err := proposer.Finish(&r); err != nil {
			t.Fatalf("finish: %v", err)
		}
		if err := proposer.Finish(&r); err != nil { // a second call does nothing
			t.Fatalf("finish again: %v", err)
		}
		got := r.Value.(engine.PopResult)
		if len(got.Messages) != 70 {
			t.Fatalf("round %d: %d messages, want 70", round, len(got.Messages))
		}
		for _, m := range got.Messages {
			stored, err := proposer.MessageAt(m.PartitionID, m.TransactionID)
			if err != nil || stored.Offset != m.Offset || !reflect.DeepEqual(stored.Payload, m.Payload) || seen[m.TransactionID] {
				t.Fatalf("round %d: delivered %s at %d, stored %+v %v (seen before: %v)", round, m.TransactionID, m.Offset, stored.Message, err, seen[m.TransactionID])
			}
			seen[m.TransactionID] = true
		}
	}
	a, _ := proposer.Digest()
	b, _ := replica.Digest()
	if a != b {
		t.Fatal("the replica's store differs from the proposer's")
	}
}
