package logstore_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/logstore"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests; 0 picks one from the clock")

// seed returns the seed of a randomized test and logs it so a failure can be
// replayed with -seed.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	return s
}

// mustOpen opens a Store in dir and registers a cleanup that checks it and
// closes it, unless the test closed it already.
func mustOpen(t *testing.T, dir string) *logstore.Store {
	t.Helper()
	opts := logstore.DefaultOptions()
	opts.Logger = t.Logf
	s, err := logstore.Open(dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { mustClose(t, s) })
	return s
}

// mustClose runs Check, then Close. A store closed before is left alone.
func mustClose(t *testing.T, s *logstore.Store) {
	t.Helper()
	if err := s.Check(); errors.Is(err, logstore.ErrClosed) {
		return
	} else if err != nil {
		t.Errorf("check: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// stores is one opened implementation: the log and stable store raft would
// be given, and how to close them (nil for in-memory ones).
type stores struct {
	logs   hraft.LogStore
	stable hraft.StableStore
	close  func()
}

// target is one implementation the conformance suite runs over.
type target struct {
	name string
	// durable targets keep their content across close and open on dir.
	durable bool
	open    func(t *testing.T, dir string) stores
}

func targets() []target {
	return []target{
		{name: "pebble", durable: true, open: func(t *testing.T, dir string) stores {
			s := mustOpen(t, dir)
			return stores{logs: s, stable: s, close: func() { mustClose(t, s) }}
		}},
		{name: "pebble+logcache", durable: true, open: func(t *testing.T, dir string) stores {
			s := mustOpen(t, dir)
			c, err := hraft.NewLogCache(16, s)
			if err != nil {
				t.Fatalf("new log cache: %v", err)
			}
			return stores{logs: c, stable: s, close: func() { mustClose(t, s) }}
		}},
		// Another group's log beside group 1's, which holds entries and
		// stable keys of the same numbers and names.
		{name: "pebble group 2", durable: true, open: func(t *testing.T, dir string) stores {
			s := mustOpen(t, dir)
			if err := s.StoreLogs(entries(1, 60, 9)); err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
				t.Fatal(err)
			}
			g, err := s.Group(2)
			if err != nil {
				t.Fatal(err)
			}
			return stores{logs: g, stable: g, close: func() {
				if err := g.Check(); err != nil {
					t.Errorf("check group 2: %v", err)
				}
				if first, last := mustBounds(t, s.Log); first != 1 || last != 60 {
					t.Errorf("group 1 holds %d-%d, want 1-60 whatever group 2 did", first, last)
				}
				if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
					t.Errorf("group 1's CurrentTerm = %d, %v, want 9", v, err)
				}
				mustClose(t, s)
			}}
		}},
		{name: "inmem", open: func(*testing.T, string) stores {
			s := hraft.NewInmemStore()
			return stores{logs: s, stable: s}
		}},
	}
}

// TestStore_Conformance runs one suite over every implementation, with
// raft's InmemStore as the reference.
func TestStore_Conformance(t *testing.T) {
	cases := []struct {
		name    string
		durable bool // only for durable targets
		run     func(t *testing.T, tg target)
	}{
		{name: "EmptyLog", run: testEmptyLog},
		{name: "StoreLog", run: testStoreLog},
		{name: "StoreLogs", run: testStoreLogs},
		{name: "GetLog_OutOfOrder", run: testGetLogOutOfOrder},
		{name: "GetLog_NotFound", run: testGetLogNotFound},
		{name: "DeleteRange_Prefix", run: testDeleteRangePrefix},
		{name: "DeleteRange_Suffix", run: testDeleteRangeSuffix},
		{name: "DeleteRange_All", run: testDeleteRangeAll},
		{name: "LargeData", run: testLargeData},
		{name: "Fields", run: testFields},
		{name: "Stable", run: testStable},
		{name: "Stable_Missing", run: testStableMissing},
		{name: "Reopen", durable: true, run: testReopen},
	}
	for _, tg := range targets() {
		t.Run(tg.name, func(t *testing.T) {
			for _, c := range cases {
				if c.durable && !tg.durable {
					continue
				}
				t.Run(c.name, func(t *testing.T) { c.run(t, tg) })
			}
		})
	}
}

// entry returns a deterministic log entry for index in term.
func entry(index, term uint64) *hraft.Log {
	return &hraft.Log{
		Index:      index,
		Term:       term,
		Type:       hraft.LogCommand,
		Data:       fmt.Appendf(nil, "data-%d-%d", index, term),
		AppendedAt: time.Unix(1_700_000_000+int64(index), int64(index)),
	}
}

// entries returns entry(i, term) for i in [from, to].
func entries(from, to, term uint64) []*hraft.Log {
	var ls []*hraft.Log
	for i := from; i <= to; i++ {
		ls = append(ls, entry(i, term))
	}
	return ls
}

func mustStore(t *testing.T, logs hraft.LogStore, ls []*hraft.Log) {
	t.Helper()
	if err := logs.StoreLogs(ls); err != nil {
		t.Fatalf("store logs: %v", err)
	}
}

func mustDelete(t *testing.T, logs hraft.LogStore, min, max uint64) {
	t.Helper()
	if err := logs.DeleteRange(min, max); err != nil {
		t.Fatalf("delete range %d-%d: %v", min, max, err)
	}
}

// assertBounds checks FirstIndex and LastIndex.
func assertBounds(t *testing.T, logs hraft.LogStore, wantFirst, wantLast uint64) {
	t.Helper()
	first, err := logs.FirstIndex()
	if err != nil {
		t.Fatalf("first index: %v", err)
	}
	last, err := logs.LastIndex()
	if err != nil {
		t.Fatalf("last index: %v", err)
	}
	if first != wantFirst || last != wantLast {
		t.Errorf("bounds = %d-%d, want %d-%d", first, last, wantFirst, wantLast)
	}
}

// assertLog checks that the entry at want.Index reads back equal to want.
func assertLog(t *testing.T, logs hraft.LogStore, want *hraft.Log) {
	t.Helper()
	var got hraft.Log
	if err := logs.GetLog(want.Index, &got); err != nil {
		t.Fatalf("get log %d: %v", want.Index, err)
	}
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) {
		t.Errorf("get log %d = %+v, want %+v", want.Index, got, *want)
	}
}

// assertNotFound checks that GetLog(index) returns hraft.ErrLogNotFound
// itself: raft compares with ==.
func assertNotFound(t *testing.T, logs hraft.LogStore, index uint64) {
	t.Helper()
	var got hraft.Log
	if err := logs.GetLog(index, &got); err != hraft.ErrLogNotFound {
		t.Errorf("get log %d: err = %v, want hraft.ErrLogNotFound", index, err)
	}
}

func testEmptyLog(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	assertBounds(t, s.logs, 0, 0)
	assertNotFound(t, s.logs, 0)
	assertNotFound(t, s.logs, 1)
	mustDelete(t, s.logs, 1, 10) // deleting from an empty log is a no-op
	assertBounds(t, s.logs, 0, 0)
}

func testStoreLog(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	want := entry(1, 1)
	if err := s.logs.StoreLog(want); err != nil {
		t.Fatalf("store log: %v", err)
	}
	assertBounds(t, s.logs, 1, 1)
	assertLog(t, s.logs, want)
}

func testStoreLogs(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	mustStore(t, s.logs, entries(1, 10, 1))
	mustStore(t, s.logs, entries(11, 20, 2))
	if err := s.logs.StoreLogs(nil); err != nil {
		t.Fatalf("store no logs: %v", err)
	}
	assertBounds(t, s.logs, 1, 20)
	for i := uint64(1); i <= 20; i++ {
		assertLog(t, s.logs, entry(i, 1+(i-1)/10))
	}
}

func testGetLogOutOfOrder(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	for from := uint64(1); from <= 200; from += 25 {
		mustStore(t, s.logs, entries(from, from+24, 3))
	}
	r := rand.New(rand.NewPCG(seed(t), 0))
	for _, i := range r.Perm(200) {
		assertLog(t, s.logs, entry(uint64(i)+1, 3))
	}
}

func testGetLogNotFound(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	mustStore(t, s.logs, entries(5, 10, 1))
	for _, i := range []uint64{0, 1, 4, 11, 1 << 62} {
		assertNotFound(t, s.logs, i)
	}
}

// testDeleteRangePrefix is what raft does after a snapshot.
func testDeleteRangePrefix(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	mustStore(t, s.logs, entries(1, 20, 1))
	mustDelete(t, s.logs, 1, 5)
	assertBounds(t, s.logs, 6, 20)
	assertNotFound(t, s.logs, 5) // max is inclusive
	assertLog(t, s.logs, entry(6, 1))
	mustDelete(t, s.logs, 6, 6) // a single entry
	assertBounds(t, s.logs, 7, 20)
	assertNotFound(t, s.logs, 6)
	mustStore(t, s.logs, entries(21, 25, 2))
	assertBounds(t, s.logs, 7, 25)
}

// testDeleteRangeSuffix is what a follower does on a log conflict: delete
// from the conflict to the end, then append the leader's entries.
func testDeleteRangeSuffix(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	mustStore(t, s.logs, entries(1, 20, 1))
	mustDelete(t, s.logs, 15, 20)
	assertBounds(t, s.logs, 1, 14)
	assertNotFound(t, s.logs, 15) // min is inclusive
	assertLog(t, s.logs, entry(14, 1))
	mustStore(t, s.logs, entries(15, 17, 2))
	assertBounds(t, s.logs, 1, 17)
	assertLog(t, s.logs, entry(15, 2))
	assertNotFound(t, s.logs, 18)
}

// testDeleteRangeAll is what raft does to a MonotonicLogStore after a
// snapshot restore; the next append may start anywhere.
func testDeleteRangeAll(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	mustStore(t, s.logs, entries(1, 20, 1))
	mustDelete(t, s.logs, 1, 20)
	assertBounds(t, s.logs, 0, 0)
	assertNotFound(t, s.logs, 1)
	assertNotFound(t, s.logs, 20)
	mustStore(t, s.logs, entries(1000, 1002, 5))
	assertBounds(t, s.logs, 1000, 1002)
	assertLog(t, s.logs, entry(1001, 5))
}

func testLargeData(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	big := entry(1, 1)
	big.Data = bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16) // 4 MiB
	batch := []*hraft.Log{big, entry(2, 1)}
	batch[1].Data = bytes.Repeat([]byte{0xff}, 64<<10)
	mustStore(t, s.logs, batch)
	assertLog(t, s.logs, batch[0])
	assertLog(t, s.logs, batch[1])
}

// testFields round-trips every field: each LogType, Extensions, empty Data,
// extreme terms and times, and the zero AppendedAt.
func testFields(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	ls := []*hraft.Log{
		{Index: 1, Term: 1, Type: hraft.LogConfiguration, Data: []byte{1, 2, 3}},
		{Index: 2, Term: 1, Type: hraft.LogNoop},
		{Index: 3, Term: 2, Type: hraft.LogBarrier, AppendedAt: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Index: 4, Term: 1<<64 - 1, Type: hraft.LogCommand, Data: []byte("x"), Extensions: []byte("ext"), AppendedAt: time.Now()},
		{Index: 5, Term: 3, Type: hraft.LogCommand, Extensions: []byte{0}, AppendedAt: time.Date(2262, 4, 12, 0, 0, 0, 999_999_999, time.FixedZone("x", 3600))},
		{Index: 6, Term: 3, Type: hraft.LogType(200), Data: []byte{}},
	}
	mustStore(t, s.logs, ls)
	for _, l := range ls {
		assertLog(t, s.logs, l)
	}
	var got hraft.Log
	if err := s.logs.GetLog(1, &got); err != nil {
		t.Fatalf("get log 1: %v", err)
	}
	if !got.AppendedAt.IsZero() {
		t.Errorf("zero AppendedAt read back as %v", got.AppendedAt)
	}
	// GetLog replaces every field of a reused Log.
	if err := s.logs.GetLog(2, &got); err != nil {
		t.Fatalf("get log 2: %v", err)
	}
	if len(got.Data) != 0 || len(got.Extensions) != 0 {
		t.Errorf("reused Log kept Data %q Extensions %q", got.Data, got.Extensions)
	}
}

func testStable(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	if err := s.stable.Set([]byte("LastVoteCand"), []byte("node-a")); err != nil {
		t.Fatalf("set: %v", err)
	}
	if err := s.stable.Set([]byte("LastVoteCand"), []byte("node-b")); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if got, err := s.stable.Get([]byte("LastVoteCand")); err != nil || string(got) != "node-b" {
		t.Errorf("get = %q, %v, want node-b", got, err)
	}
	for _, want := range []uint64{0, 1, 42, 1<<64 - 1} {
		if err := s.stable.SetUint64([]byte("CurrentTerm"), want); err != nil {
			t.Fatalf("set uint64: %v", err)
		}
		if got, err := s.stable.GetUint64([]byte("CurrentTerm")); err != nil || got != want {
			t.Errorf("get uint64 = %d, %v, want %d", got, err, want)
		}
	}
}

// testStableMissing checks what raft accepts for keys never set (api.go
// NewRaft, HasExistingState; raft.go requestVote): a nil or empty value, and
// either no error or one whose message is exactly "not found".
func testStableMissing(t *testing.T, tg target) {
	s := tg.open(t, t.TempDir())
	missing := func(err error) bool { return err == nil || err.Error() == "not found" }
	if got, err := s.stable.Get([]byte("LastVoteCand")); len(got) != 0 || !missing(err) {
		t.Errorf("get missing = %q, %v, want empty and nil or \"not found\"", got, err)
	}
	if got, err := s.stable.GetUint64([]byte("CurrentTerm")); got != 0 || !missing(err) {
		t.Errorf("get uint64 missing = %d, %v, want 0 and nil or \"not found\"", got, err)
	}
}

func testReopen(t *testing.T, tg target) {
	dir := t.TempDir()
	s := tg.open(t, dir)
	mustStore(t, s.logs, entries(1, 30, 1))
	mustStore(t, s.logs, entries(31, 40, 2))
	mustDelete(t, s.logs, 1, 10)
	mustDelete(t, s.logs, 36, 40)
	if err := s.stable.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatalf("set uint64: %v", err)
	}
	if err := s.stable.Set([]byte("LastVoteCand"), []byte("node-a")); err != nil {
		t.Fatalf("set: %v", err)
	}
	s.close()

	s = tg.open(t, dir)
	assertBounds(t, s.logs, 11, 35)
	assertNotFound(t, s.logs, 10)
	assertNotFound(t, s.logs, 36)
	for i := uint64(11); i <= 35; i++ {
		assertLog(t, s.logs, entry(i, 1+i/31))
	}
	if got, err := s.stable.GetUint64([]byte("CurrentTerm")); err != nil || got != 2 {
		t.Errorf("get uint64 = %d, %v, want 2", got, err)
	}
	if got, err := s.stable.Get([]byte("LastVoteCand")); err != nil || string(got) != "node-a" {
		t.Errorf("get = %q, %v, want node-a", got, err)
	}
	s.close()

	// An emptied log reopens empty.
	s = tg.open(t, dir)
	mustDelete(t, s.logs, 11, 35)
	s.close()
	s = tg.open(t, dir)
	assertBounds(t, s.logs, 0, 0)
}

// The tests below cover what only the Pebble store promises.

func TestStore_Get_NotFound(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if _, err := s.Get([]byte("k")); err != logstore.ErrKeyNotFound || err.Error() != "not found" {
		t.Errorf("get missing: err = %v, want logstore.ErrKeyNotFound (\"not found\")", err)
	}
	if got, err := s.GetUint64([]byte("k")); got != 0 || err != logstore.ErrKeyNotFound {
		t.Errorf("get uint64 missing = %d, %v, want 0, logstore.ErrKeyNotFound", got, err)
	}
	if err := s.Set([]byte("k"), nil); err != nil {
		t.Fatalf("set empty: %v", err)
	}
	if got, err := s.Get([]byte("k")); err != nil || got == nil || len(got) != 0 {
		t.Errorf("get empty = %#v, %v, want []byte{}, nil", got, err)
	}
}

func TestStore_GetUint64_Corrupt(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if err := s.Set([]byte("k"), []byte{1, 2, 3}); err != nil {
		t.Fatalf("set: %v", err)
	}
	if _, err := s.GetUint64([]byte("k")); !errors.Is(err, logstore.ErrCorrupt) {
		t.Errorf("get uint64 of 3 bytes: err = %v, want ErrCorrupt", err)
	}
}

func TestStore_StoreLogs_IndexZero(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if err := s.StoreLogs([]*hraft.Log{entry(1, 1), {Index: 0, Term: 1}}); !errors.Is(err, logstore.ErrInvalidIndex) {
		t.Errorf("store index 0: err = %v, want ErrInvalidIndex", err)
	}
	assertBounds(t, s, 0, 0) // nothing of the rejected batch was written
	assertNotFound(t, s, 1)
}

// TestStore_DeleteRange_Middle: raft never deletes inside the log, but the
// contract allows it; the bounds stay and the gap reads as not found.
func TestStore_DeleteRange_Middle(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	mustStore(t, s, entries(1, 20, 1))
	mustDelete(t, s, 5, 15)
	assertBounds(t, s, 1, 20)
	assertNotFound(t, s, 5)
	assertNotFound(t, s, 15)
	assertLog(t, s, entry(4, 1))
	assertLog(t, s, entry(16, 1))
	// Deleting the head now skips the gap.
	mustDelete(t, s, 1, 4)
	assertBounds(t, s, 16, 20)
	// And deleting the tail of a gapped log finds the entry before the gap.
	mustStore(t, s, entries(30, 35, 1))
	mustDelete(t, s, 30, 35)
	assertBounds(t, s, 16, 20)
}

func TestStore_DeleteRange_Edges(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	mustStore(t, s, entries(10, 20, 1))
	mustDelete(t, s, 21, 1<<64-1) // after the log: no-op, and max+1 overflows
	mustDelete(t, s, 1, 9)        // before the log: no-op
	mustDelete(t, s, 9, 5)        // min > max: empty range
	assertBounds(t, s, 10, 20)
	mustDelete(t, s, 0, 12) // overlapping the head
	assertBounds(t, s, 13, 20)
	mustDelete(t, s, 18, 1<<64-1) // overlapping the tail, to the last index
	assertBounds(t, s, 13, 17)
	mustDelete(t, s, 0, 1<<64-1)
	assertBounds(t, s, 0, 0)
}

func TestStore_Closed(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	mustStore(t, s, entries(1, 3, 1))
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	var l hraft.Log
	for name, err := range map[string]error{
		"Close":       s.Close(),
		"FirstIndex":  second(s.FirstIndex()),
		"LastIndex":   second(s.LastIndex()),
		"GetLog":      s.GetLog(1, &l),
		"StoreLogs":   s.StoreLogs(entries(4, 4, 1)),
		"DeleteRange": s.DeleteRange(1, 2),
		"Set":         s.Set([]byte("k"), []byte("v")),
		"Get":         second(s.Get([]byte("k"))),
		"SetUint64":   s.SetUint64([]byte("k"), 1),
		"GetUint64":   second(s.GetUint64([]byte("k"))),
		"Check":       s.Check(),
	} {
		if !errors.Is(err, logstore.ErrClosed) {
			t.Errorf("%s after close: err = %v, want ErrClosed", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestOpen_InvalidOptions(t *testing.T) {
	for name, mutate := range map[string]func(*logstore.Options){
		"CacheSize":       func(o *logstore.Options) { o.CacheSize = 0 },
		"MemTableSizeLow": func(o *logstore.Options) { o.MemTableSize = 1 },
		"MemTableSizeBig": func(o *logstore.Options) { o.MemTableSize = 2 << 30 },
	} {
		opts := logstore.DefaultOptions()
		mutate(&opts)
		if _, err := logstore.Open(t.TempDir(), opts); !errors.Is(err, logstore.ErrInvalidOptions) {
			t.Errorf("%s: err = %v, want ErrInvalidOptions", name, err)
		}
	}
	if err := logstore.DefaultOptions().Validate(); err != nil {
		t.Errorf("default options: %v", err)
	}
}

// TestStore_Concurrent runs raft's access pattern under the race detector:
// one goroutine appends (the raft loop), one deletes prefixes (snapshot
// compaction), and readers fetch anything between the bounds they see.
func TestStore_Concurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	const total, batch = 2000, 20
	done := make(chan struct{})
	errs := make(chan error, 3)
	go func() { // appender
		defer close(done)
		for from := uint64(1); from <= total; from += batch {
			if err := s.StoreLogs(entries(from, from+batch-1, 1)); err != nil {
				errs <- fmt.Errorf("store logs: %w", err)
				return
			}
		}
		errs <- nil
	}()
	go func() { // compactor: keeps the last 100 entries
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if first != 0 && last > first+100 {
				if err := s.DeleteRange(first, last-100); err != nil {
					errs <- fmt.Errorf("delete range: %w", err)
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	go func() { // reader
		r := rand.New(rand.NewPCG(seed(t), 0))
		var l hraft.Log
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			if first == 0 || last < first {
				continue
			}
			index := first + r.Uint64N(last-first+1)
			err := s.GetLog(index, &l)
			if err == hraft.ErrLogNotFound {
				if now, _ := s.FirstIndex(); index >= now {
					errs <- fmt.Errorf("log %d not found while first index is %d", index, now)
					return
				}
				continue // compacted under us; raft's oldestLog retries the same way
			}
			if err != nil || l.Index != index {
				errs <- fmt.Errorf("get log %d = %d, %v", index, l.Index, err)
				return
			}
		}
	}()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if last, _ := s.LastIndex(); last != total {
		t.Errorf("last index = %d, want %d", last, total)
	}
}

// Groups are apart: each has its own bounds, entries and stable keys, a
// deletion in one touches no other, and each reopens as it was closed.
func TestStore_Groups(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	groups := map[uint32]*logstore.Log{1: s.Log}
	for _, id := range []uint32{0, 2, 1 << 31} {
		g, err := s.Group(id)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := s.Group(id); again != g {
			t.Fatalf("Group(%d) twice gave two logs", id)
		}
		groups[id] = g
	}
	if one, _ := s.Group(1); one != s.Log {
		t.Fatal("Group(1) is not the store's own log")
	}
	want := map[uint32][2]uint64{}
	for id, g := range groups {
		term := uint64(id%1000) + 1
		mustStore(t, g, entries(1, 40, term))
		if err := g.SetUint64([]byte("CurrentTerm"), term); err != nil {
			t.Fatal(err)
		}
		want[id] = [2]uint64{1, 40}
	}
	mustDelete(t, groups[2], 1, 40)
	want[2] = [2]uint64{0, 0}
	mustDelete(t, groups[0], 1, 10)
	want[0] = [2]uint64{11, 40}
	mustDelete(t, groups[1<<31], 31, 40)
	want[1<<31] = [2]uint64{1, 30}
	check := func(s *logstore.Store) {
		t.Helper()
		for id, w := range want {
			g, err := s.Group(id)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Check(); err != nil {
				t.Errorf("group %d: %v", id, err)
			}
			if first, last := mustBounds(t, g); first != w[0] || last != w[1] {
				t.Errorf("group %d holds %d-%d, want %d-%d", id, first, last, w[0], w[1])
			}
			term := uint64(id%1000) + 1
			for i := w[0]; w[0] > 0 && i <= w[1]; i++ {
				assertLog(t, g, entry(i, term))
			}
			if v, err := g.GetUint64([]byte("CurrentTerm")); err != nil || v != term {
				t.Errorf("group %d CurrentTerm = %d, %v, want %d", id, v, err, term)
			}
		}
	}
	check(s)
	mustClose(t, s)
	s = mustOpen(t, dir)
	check(s)
	mustClose(t, s)
}

// Appends of several groups run at once (the race detector watches them),
// and every group holds all of its own.
func TestStore_Groups_Concurrent(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer mustClose(t, s)
	var wg sync.WaitGroup
	for id := uint32(1); id <= 4; id++ {
		g, err := s.Group(id)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := uint64(1); i <= 200; i += 10 {
				if err := g.StoreLogs(entries(i, i+9, uint64(id))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for id := uint32(1); id <= 4; id++ {
		g, _ := s.Group(id)
		if first, last := mustBounds(t, g); first != 1 || last != 200 {
			t.Errorf("group %d holds %d-%d, want 1-200", id, first, last)
		}
		for i := uint64(1); i <= 200; i++ {
			assertLog(t, g, entry(i, uint64(id)))
		}
	}
}

// BenchmarkStore_GroupAppends: synced one-entry appends from G groups at
// once. Pebble commits the batches that meet in one WAL fsync, so with the
// disk's fsync as the bound, appends/s should grow with G: G groups cost
// about one fsync per round, as one group does.
func BenchmarkStore_GroupAppends(b *testing.B) {
	for _, groups := range []int{1, 4} {
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			s, err := logstore.Open(b.TempDir(), logstore.DefaultOptions())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			logs := make([]*logstore.Log, groups)
			for i := range logs {
				if logs[i], err = s.Group(uint32(i + 1)); err != nil {
					b.Fatal(err)
				}
			}
			data := bytes.Repeat([]byte("x"), 1024)
			b.ResetTimer()
			var wg sync.WaitGroup
			for i, g := range logs {
				n := b.N / groups
				if i < b.N%groups {
					n++
				}
				wg.Go(func() {
					for j := 1; j <= n; j++ {
						if err := g.StoreLog(&hraft.Log{Index: uint64(j), Term: 1, Data: data}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		})
	}
}

// TestStore_DeleteRange_AfterASnapshotInstall: raft deletes the whole log
// after installing a leader's snapshot, yet keeps believing it holds the
// entries it held above the snapshot (hashicorp/raft#697): the first such
// delete after SnapshotInstalled keeps them, and only that one.
func TestStore_DeleteRange_AfterASnapshotInstall(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	g, err := s.Group(1)
	if err != nil {
		t.Fatal(err)
	}
	mustStore(t, g, entries(1, 20, 1))
	g.SnapshotInstalled(12)
	mustDelete(t, g, 15, 20) // a suffix (a conflict): not the delete after the install
	assertBounds(t, g, 1, 14)
	mustDelete(t, g, 1, 14) // raft's removeOldLogs: the whole log
	assertBounds(t, g, 13, 14)
	assertNotFound(t, g, 12)
	assertLog(t, g, entry(13, 1))
	mustDelete(t, g, 13, 14) // the next whole-log delete is not held back
	assertBounds(t, g, 0, 0)

	// A follower far behind the snapshot loses its whole log, as before.
	mustStore(t, g, entries(30, 40, 2))
	g.SnapshotInstalled(100)
	mustDelete(t, g, 30, 40)
	assertBounds(t, g, 0, 0)
}
