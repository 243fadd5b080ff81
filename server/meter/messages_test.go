package meter

import (
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
)

// The retry budget is charged once per (partition, group) whose call
// carried an applied "failed" that ended in neither a dead letter nor a
// drop (docs/semantics.md §6.3).
func TestMessages_Acked_ChargesTheRetryBudgetOncePerPartitionAndGroup(t *testing.T) {
	m := NewMessages(metrics.NewSet())
	p1, p2, p3 := engine.ID{1}, engine.ID{2}, engine.ID{3}
	items := []engine.AckItem{
		{PartitionID: p1, Group: "g", Status: cursor.Failed},
		{PartitionID: p1, Group: "g", Status: cursor.Failed}, // same (partition, group): one charge
		{PartitionID: p1, Group: "h", Status: cursor.Failed}, // another group: a charge of its own
		{PartitionID: p2, Group: "g", Status: cursor.Failed}, // dead-lettered: no charge
		{PartitionID: p3, Group: "g", Status: cursor.Failed}, // refused: no charge
		{PartitionID: p3, Group: "g", Status: cursor.Completed},
	}
	res := []engine.AckResult{{Success: true}, {Success: true}, {Success: true}, {Success: true, DLQ: true}, {}, {Success: true}}
	m.Acked(items, res)
	for name, c := range map[string]struct{ got, want uint64 }{
		"retry charges":  {m.RetryCharges.Get(), 2},
		"nacks failed":   {m.NackFailed.Get(), 4},
		"acks succeeded": {m.AckSuccess.Get(), 5},
		"acks failed":    {m.AckFailed.Get(), 1},
		"dead letters":   {m.DeadLettersAck.Get(), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", name, c.got, c.want)
		}
	}
}
