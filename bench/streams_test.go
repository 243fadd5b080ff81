package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
)

// BenchmarkStreamCycle measures stream cycles on a single-voter node (the
// replicated path without HTTP): 16 workers, one source partition each, and
// per iteration one pop of one message then either one cycle (10 state
// upserts, 1 sink push, the ack under the pop's lease: mode=cycle) or the
// same sink message pushed and the source message acked as two plain
// commands (mode=push+ack). The ratio of the two rates in one run is the
// cost of a cycle over what the same messages cost without streams.
func BenchmarkStreamCycle(b *testing.B) {
	const workers = 16
	for _, mode := range []string{"push+ack", "cycle"} {
		b.Run("mode="+mode, func(b *testing.B) {
			node := openBenchNode(b)
			ctx := context.Background()
			reg, err := raft.Propose[engine.StreamRegistered](ctx, node, engine.StreamRegisterCmd{
				Name: "bench", SourceQueue: "src", HasSink: true, SinkQueue: "sink", ConfigHash: "h"})
			if err != nil {
				b.Fatal(err)
			}
			docs := Payloads(64, 1024, 7)
			// Every worker consumes its share of b.N from its own partition,
			// pushed there off the clock.
			share := func(w int) int { return b.N/workers + btoi(w < b.N%workers) }
			for w := range workers {
				per := share(w)
				for from := 0; from < per; from += 500 {
					var items []engine.PushItem
					for i := from; i < min(per, from+500); i++ {
						items = append(items, engine.PushItem{Queue: "src", Partition: "p" + strconv.Itoa(w),
							TransactionID: "m" + strconv.Itoa(i), Payload: docs[i%len(docs)]})
					}
					if _, err := raft.Propose[[]engine.PushResult](ctx, node, engine.PushCmd{Items: items}); err != nil {
						b.Fatal(err)
					}
				}
			}
			var failed atomic.Value
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			for w := range workers {
				wg.Go(func() {
					part := "p" + strconv.Itoa(w)
					for seq := 0; seq < share(w); seq++ {
						if err := streamStep(ctx, node, reg.ID, part, mode, seq, docs[seq%len(docs)]); err != nil {
							failed.Store(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// streamStep pops one message of part and consumes it as mode says.
func streamStep(ctx context.Context, node *raft.Node, query engine.ID, part, mode string, seq int, doc []byte) error {
	pop, err := raft.Propose[engine.PopResult](ctx, node, engine.PopCmd{Queue: "src", Partition: part, Group: "streams.bench", Batch: 1})
	if err != nil || len(pop.Messages) != 1 {
		return fmt.Errorf("pop %s: %d messages, %v", part, len(pop.Messages), err)
	}
	m := pop.Messages[0]
	sink := engine.PushItem{Queue: "sink", Partition: part, Payload: doc}
	if mode == "push+ack" {
		if _, err := raft.Propose[[]engine.PushResult](ctx, node, engine.PushCmd{Items: []engine.PushItem{sink}}); err != nil {
			return err
		}
		res, err := raft.Propose[[]engine.AckResult](ctx, node, engine.AckCmd{Items: []engine.AckItem{{TransactionID: m.TransactionID,
			PartitionID: m.PartitionID, Group: "streams.bench", Status: cursor.Completed, Lease: pop.LeaseID}}})
		if err != nil || !res[0].Success {
			return fmt.Errorf("ack: %+v %v", res, err)
		}
		return nil
	}
	ops := make([]engine.StateOp, 10)
	for i := range ops {
		end := float64(seq*10 + i)
		ops[i] = engine.StateOp{Key: "tumb:60\x1f" + strconv.Itoa(i), HasWindowEnd: true, WindowEnd: end,
			Value: fmt.Appendf(nil, `{"acc":{"count":%d},"windowStart":0,"windowEnd":%d}`, seq, int64(end))}
	}
	c := engine.StreamCycleCmd{Cycle: engine.Cycle{QueryID: query, PartitionID: m.PartitionID, Group: "streams.bench", Ops: ops,
		Ack: &engine.CycleAck{TransactionID: m.TransactionID, Lease: pop.LeaseID, Status: cursor.Completed, Count: 1}},
		Items: []engine.PushItem{sink}}
	var d [8]byte
	binary.BigEndian.PutUint64(d[:], uint64(seq))
	c.Digest = sha256.Sum256(append([]byte(part), d[:]...))
	res, err := raft.Propose[engine.StreamCycleResult](ctx, node, c)
	if err != nil || !res.Success {
		return fmt.Errorf("cycle: %+v %v", res, err)
	}
	return nil
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}
