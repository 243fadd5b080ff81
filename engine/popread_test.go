package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// A pop with deferred reads leases the same offsets and, once filled,
// answers the same messages as a pop that reads inside its batch; the store
// written is identical.
func TestDeferredPopReads_SameAnswerAndState(t *testing.T) {
	direct, deferred := enginetest.MustOpen(t), enginetest.MustOpen(t)
	for _, h := range []*enginetest.Harness{direct, deferred} {
		for i := 0; i < 250; i++ {
			h.PushOne("q", fmt.Sprintf("p%d", i%3), fmt.Sprintf("t%d", i), fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", i)))
		}
	}
	for round := 0; round < 3; round++ { // 3 x 70 of the 250 messages
		cmd := engine.PopCmd{Queue: "q", Batch: 70, Partitions: 2}
		want := direct.Pop(cmd)

		var got engine.PopResult
		st := deferred.Stamp()
		deferred.Do(func(b *engine.Batch) {
			b.DeferReads(true)
			var err error
			if got, err = b.Pop(st, cmd); err != nil {
				t.Fatalf("pop: %v", err)
			}
		})
		if len(got.Messages) != 0 {
			t.Fatalf("round %d: a deferred pop carried %d messages before FillPop", round, len(got.Messages))
		}
		if err := deferred.FillPop(&got); err != nil {
			t.Fatalf("fill: %v", err)
		}
		if len(want.Messages) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: deferred pop differs: %d messages (lease %x), want %d (lease %x)",
				round, len(got.Messages), got.LeaseID, len(want.Messages), want.LeaseID)
		}
	}
	a, _ := direct.Digest()
	b, _ := deferred.Digest()
	if a != b {
		t.Fatal("stores differ")
	}
}
