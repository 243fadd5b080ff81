package bench

import (
	"fmt"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/bodies"
)

// pushBody is a push of n items of queen bench's 1 KiB JSON to one
// partition, each with a transaction id, as queen bench sends it.
func pushBody(n int) []byte {
	payloads := Payloads(n, 1024, 1)
	b := []byte(`{"items":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"queue":"bench","partition":"p3","transactionId":"r1x-%d-%d","payload":%s}`, i%32, i, payloads[i])
	}
	return append(b, `]}`...)
}

// BenchmarkPushScan is the edge's scan of a push body of 100 items
// (server/bodies over server/wire): what a node spends per request before
// it prepares the push.
func BenchmarkPushScan(b *testing.B) {
	b.Run("batch=100", func(b *testing.B) {
		body := pushBody(100)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			items, err := bodies.PushItems(body)
			if err != nil || len(items) != 100 {
				b.Fatalf("%d items, %v", len(items), err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkPushPrepare is a push of 100 items made ready to propose
// (engine.PushCmd.Prepare: ids, grouping, one segment body with zstd): the
// part of a push a leader does before Raft, without the scan.
func BenchmarkPushPrepare(b *testing.B) {
	b.Run("batch=100", func(b *testing.B) {
		items, err := bodies.PushItems(pushBody(100))
		if err != nil {
			b.Fatal(err)
		}
		cmd := engine.PushCmd{Items: items}
		b.SetBytes(100 * 1024)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := cmd.Prepare(engine.ID{1}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "msgs/s")
	})
}
