package engine_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// TestStreamQueues_NamesEveryQueueAStreamReadsOrWrites: the sources and
// sinks of the registered streams, and no other queue; a deleted stream's
// queues are free again.
func TestStreamQueues_NamesEveryQueueAStreamReadsOrWrites(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("orders", "", "t1", `1`)
	h.PushOne("plain", "", "t2", `1`)
	enginetest.Must[engine.StreamRegistered](h, engine.StreamRegisterCmd{Name: "per_customer", SourceQueue: "orders", HasSink: true, SinkQueue: "totals", ConfigHash: "h"})
	enginetest.Must[engine.StreamRegistered](h, engine.StreamRegisterCmd{Name: "audit", SourceQueue: "payments", ConfigHash: "h"})
	got, err := h.StreamQueues()
	if err != nil {
		t.Fatal(err)
	}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"orders", "payments", "totals"}) {
		t.Fatalf("stream queues %v", names)
	}
	if !enginetest.Must[bool](h, engine.StreamDeleteCmd{Name: "audit"}) {
		t.Fatal("audit was not deleted")
	}
	h.Reopen()
	got, err = h.StreamQueues()
	if err != nil {
		t.Fatal(err)
	}
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"orders", "totals"}) {
		t.Fatalf("stream queues after deleting audit %v", names)
	}
}
