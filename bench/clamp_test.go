package bench

import (
	"testing"

	"github.com/queenmq/queen/engine/cursor"
)

// BenchmarkClamp measures one ack call's clamp decision (engine/cursor) and
// reports the cost per ack item. It must not allocate.
func BenchmarkClamp(b *testing.B) {
	batch := func(n int, failAt int) []cursor.Item {
		items := make([]cursor.Item, n)
		for i := range items {
			items[i] = cursor.Item{Offset: cursor.Offset(i), Status: cursor.Completed}
		}
		if failAt >= 0 {
			items[failAt].Status = cursor.Failed
		}
		return items
	}
	p := cursor.Policy{RetryLimit: 3, DeadLetter: true}
	for _, bc := range []struct {
		name  string
		items []cursor.Item
	}{
		{"completed-100", batch(100, -1)},
		{"failed-mid-100", batch(100, 50)},
		{"single", batch(1, -1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := len(bc.items)
			s := cursor.State{Committed: -1, SpanEnd: cursor.Offset(n - 1), BatchEnd: cursor.Offset(n - 1), RetryCount: 1}
			out := make([]cursor.Outcome, n)
			b.ReportAllocs()
			for b.Loop() {
				cursor.Clamp(s, p, bc.items, out)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/item")
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
