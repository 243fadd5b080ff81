package bench

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/logstore"
)

// Log store benchmarks. BenchmarkLogStoreStoreLogs and
// BenchmarkPebbleSyncedWrite write the same entries per op (same count, same
// key and value sizes, one synced batch, the same Pebble settings), so
// StoreLogs throughput divided by the raw synced write is the store's
// efficiency, whatever the disk.

const logEntrySize = 1 << 10 // Data bytes per entry

// logBatchSizes match the batches of BenchmarkPebbleSyncedLimit, so the
// table pairs each row with the limit of the same batch.
var logBatchSizes = []int{1, 100}

// logStoreValueSize is the encoded size of one benchmark entry: 1 KiB of
// Data plus logstore's 42-byte frame (see the logstore package doc).
const logStoreValueSize = logEntrySize + 42

func openLogStore(b *testing.B) *logstore.Store {
	b.Helper()
	opts := logstore.DefaultOptions()
	opts.Logger = b.Logf
	s, err := logstore.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatalf("open log store: %v", err)
	}
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Errorf("close log store: %v", err)
		}
	})
	return s
}

// benchLogs returns n entries with 1 KiB of random Data, to be renumbered
// before each write.
func benchLogs(n int) []*hraft.Log {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, logEntrySize)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	logs := make([]*hraft.Log, n)
	for i := range logs {
		logs[i] = &hraft.Log{Term: 1, Type: hraft.LogCommand, Data: data, AppendedAt: time.Now()}
	}
	return logs
}

// reportEntries reports entries written per second across the whole run.
func reportEntries(b *testing.B, entries int) {
	b.ReportMetric(float64(entries)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkLogStoreStoreLogs measures synced appends: one StoreLogs call of
// batch entries per op, as raft issues them.
func BenchmarkLogStoreStoreLogs(b *testing.B) {
	for _, batch := range logBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openLogStore(b)
			logs := benchLogs(batch)
			next, entries := uint64(1), 0
			b.SetBytes(int64(batch * logEntrySize))
			b.ReportAllocs()
			for b.Loop() {
				for _, l := range logs {
					l.Index = next
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatalf("store logs: %v", err)
				}
				entries += batch
			}
			reportEntries(b, entries)
		})
	}
}

// BenchmarkPebbleSyncedWrite is the limit for BenchmarkLogStoreStoreLogs:
// one synced Pebble batch per op holding the same number of keys and value
// bytes, with nothing encoded or checksummed by us.
func BenchmarkPebbleSyncedWrite(b *testing.B) {
	for _, batch := range logBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			opts := logstore.DefaultOptions()
			cache := pebble.NewCache(opts.CacheSize)
			defer cache.Unref()
			db, err := pebble.Open(b.TempDir(), &pebble.Options{
				FormatMajorVersion: pebble.FormatNewest,
				Cache:              cache,
				MemTableSize:       opts.MemTableSize,
				Logger:             quietLogger{b},
			})
			if err != nil {
				b.Fatalf("open pebble: %v", err)
			}
			defer db.Close()
			value := make([]byte, logStoreValueSize)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range value {
				value[i] = byte(r.Uint32())
			}
			var key [9]byte
			key[0] = 0x01
			next, entries := uint64(1), 0
			b.SetBytes(int64(batch * logEntrySize))
			b.ReportAllocs()
			for b.Loop() {
				wb := db.NewBatch()
				for range batch {
					binary.BigEndian.PutUint64(key[1:], next)
					next++
					if err := wb.Set(key[:], value, nil); err != nil {
						b.Fatalf("batch set: %v", err)
					}
				}
				if err := wb.Commit(pebble.Sync); err != nil {
					b.Fatalf("commit: %v", err)
				}
				wb.Close()
				entries += batch
			}
			reportEntries(b, entries)
		})
	}
}

// BenchmarkLogStoreGetLog measures reads that miss raft's LogCache: random
// indexes over 16 MiB of 1 KiB entries, so both memtable and sstables serve.
func BenchmarkLogStoreGetLog(b *testing.B) {
	const total = 16 << 10
	s := openLogStore(b)
	logs := benchLogs(256)
	next := uint64(1)
	for next <= total {
		for _, l := range logs {
			l.Index = next
			next++
		}
		if err := s.StoreLogs(logs); err != nil {
			b.Fatalf("store logs: %v", err)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	var l hraft.Log
	b.SetBytes(logEntrySize)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.GetLog(1+r.Uint64N(total), &l); err != nil {
			b.Fatalf("get log: %v", err)
		}
	}
}

// quietLogger drops Pebble's info messages, like logstore's own logger.
type quietLogger struct{ b *testing.B }

func (quietLogger) Infof(string, ...any)                {}
func (l quietLogger) Errorf(format string, args ...any) { l.b.Logf(format, args...) }
func (l quietLogger) Fatalf(format string, args ...any) { l.b.Fatalf(format, args...) }
