package bench

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
)

// The engine benchmarks run a real engine on b.TempDir() with Sync on, as a
// standalone (non-Raft) engine is: every command is one Pebble batch and one
// fsync. BenchmarkPebbleSyncedLimit writes the same payload bytes as one push
// per synced Pebble batch, so the engine's push rate can be quoted as a ratio
// of the raw limit measured in the same run:
//
//	go test ./bench -run '^$' -bench 'Engine|PebbleSynced' -benchmem -benchtime 2s

const enginePayloadBytes = 1024

// enginePayloads returns n distinct realistic JSON documents of 1 KiB each
// (see Payloads), the same bytes on every run.
func enginePayloads(n int) [][]byte { return Payloads(n, enginePayloadBytes, 7) }

// engineStamper hands out command stamps: a clock that moves 1 ms per command and
// a fresh UUIDv7 seed, as a proposing node would.
type engineStamper struct {
	now int64
	rng *rand.Rand
}

func newEngineStamper() *engineStamper {
	return &engineStamper{now: 1_767_323_045_000_000, rng: rand.New(rand.NewPCG(1, 2))}
}

func (s *engineStamper) next() engine.Stamp {
	s.now += 1000
	var id engine.ID
	binary.BigEndian.PutUint64(id[0:8], uint64(s.now/1000)<<16|s.rng.Uint64()&0x0fff)
	binary.BigEndian.PutUint64(id[8:], s.rng.Uint64())
	id[6] = 0x70 | id[6]&0x0f
	id[8] = 0x80 | id[8]&0x3f
	return engine.Stamp{Time: s.now, Seed: id}
}

func openBenchEngine(b *testing.B) *engine.Engine {
	b.Helper()
	opts := engine.DefaultOptions()
	opts.Sync = true
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := engine.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// enginePusher builds push commands of one batch size with unique transaction ids.
type enginePusher struct {
	docs  [][]byte
	items []engine.PushItem
	txns  []byte
	n     int
}

func newEnginePusher(docs [][]byte, batch int) *enginePusher {
	return &enginePusher{docs: docs, items: make([]engine.PushItem, batch)}
}

func (p *enginePusher) next(queue string) []engine.PushItem {
	p.txns = p.txns[:0]
	for i := range p.items {
		start := len(p.txns)
		p.txns = append(p.txns, "txn-"...)
		p.txns = strconv.AppendInt(p.txns, int64(p.n), 10)
		p.items[i] = engine.PushItem{Queue: queue, TransactionID: string(p.txns[start:]), Payload: p.docs[p.n%len(p.docs)]}
		p.n++
	}
	return p.items
}

// runCommand applies one command in its own committed batch and finishes
// it (a pop's messages are read then).
func runCommand(b *testing.B, e *engine.Engine, st engine.Stamp, c engine.Command) engine.Result {
	bt, err := e.Begin()
	if err != nil {
		b.Fatal(err)
	}
	r := bt.Apply(st, c)
	if err := bt.Commit(0); err != nil {
		b.Fatal(err)
	}
	if err := e.Finish(&r); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkEnginePush measures one push command per iteration: batch items
// of 1 KiB JSON to one partition, one synced commit.
func BenchmarkEnginePush(b *testing.B) {
	docs := enginePayloads(1000)
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := openBenchEngine(b)
			st := newEngineStamper()
			p := newEnginePusher(docs, batch)
			b.SetBytes(int64(batch * enginePayloadBytes))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items := p.next("bench")
				s := st.next()
				for _, r := range runCommand(b, e, s, engine.PushCmd{Items: items}).Value.([]engine.PushResult) {
					if r.Status != engine.Queued {
						b.Fatalf("push: status %d, %v", r.Status, r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkEnginePopAck measures one pop of batch messages plus one ack of
// all of them per iteration: two commands, two synced commits. The queue is
// refilled, off the clock, whenever it runs dry.
func BenchmarkEnginePopAck(b *testing.B) {
	docs := enginePayloads(1000)
	const refill = 20_000
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := openBenchEngine(b)
			st := newEngineStamper()
			p := newEnginePusher(docs, 1000)
			left := 0
			fill := func() {
				for n := 0; n < refill; n += 1000 {
					items := p.next("bench")
					s := st.next()
					runCommand(b, e, s, engine.PushCmd{Items: items})
				}
				left += refill
			}
			acks := make([]engine.AckItem, 0, batch)
			b.SetBytes(int64(batch * enginePayloadBytes))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if left < batch {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
				r := runCommand(b, e, st.next(), engine.PopCmd{Queue: "bench", Partition: engine.DefaultPartition, Batch: batch})
				res, err := r.Value.(engine.PopResult), r.Err
				if err != nil || len(res.Messages) != batch {
					b.Fatalf("pop: %d messages, %v", len(res.Messages), err)
				}
				left -= batch
				acks = acks[:0]
				for _, m := range res.Messages {
					acks = append(acks, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID,
						Status: cursor.Completed, Lease: res.LeaseID})
				}
				for _, r := range runCommand(b, e, st.next(), engine.AckCmd{Items: acks}).Value.([]engine.AckResult) {
					if !r.Success {
						b.Fatalf("ack: %+v", r)
					}
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkPebbleSyncedLimit is the raw limit of the push benchmark: per
// iteration one synced Pebble batch holding the same payload bytes as a push
// of that batch size (batch × 1 KiB, uncompressed) under one key.
func BenchmarkPebbleSyncedLimit(b *testing.B) {
	docs := enginePayloads(1000)
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			cache := pebble.NewCache(engine.DefaultOptions().BlockCacheBytes)
			defer cache.Unref()
			db, err := pebble.Open(b.TempDir(), &pebble.Options{
				FormatMajorVersion: pebble.FormatNewest,
				Cache:              cache,
				MemTableSize:       engine.DefaultOptions().MemTableBytes,
				Logger:             engineQuietLogger{},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			value := make([]byte, 0, batch*enginePayloadBytes)
			key := make([]byte, 9)
			key[0] = 0x04
			b.SetBytes(int64(batch * enginePayloadBytes))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				value = value[:0]
				for j := range batch {
					value = append(value, docs[(i*batch+j)%len(docs)]...)
				}
				binary.BigEndian.PutUint64(key[1:], uint64(i))
				bt := db.NewBatch()
				if err := bt.Set(key, value, nil); err != nil {
					b.Fatal(err)
				}
				if err := bt.Commit(pebble.Sync); err != nil {
					b.Fatal(err)
				}
				bt.Close()
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "fsyncs/s")
		})
	}
}

type engineQuietLogger struct{}

func (engineQuietLogger) Infof(string, ...any)  {}
func (engineQuietLogger) Errorf(string, ...any) {}
func (engineQuietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
