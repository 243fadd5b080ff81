package raft

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/logstore"
)

// countingStore is a real log store that counts the reads it serves: a
// read the cache answered never reaches it.
type countingStore struct {
	*logstore.Store
	reads int
}

func (s *countingStore) GetLog(idx uint64, l *hraft.Log) error {
	s.reads++
	return s.Store.GetLog(idx, l)
}

func openCountingStore(t *testing.T) *countingStore {
	t.Helper()
	st, err := logstore.Open(t.TempDir(), logstore.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &countingStore{Store: st}
}

func entry(idx uint64, size int, fill byte) *hraft.Log {
	return &hraft.Log{Index: idx, Term: 1, Type: hraft.LogCommand, Data: bytes.Repeat([]byte{fill}, size)}
}

// read gets idx through the cache and reports whether the store was asked.
func read(t *testing.T, c *logCache, st *countingStore, idx uint64) (hraft.Log, bool) {
	t.Helper()
	before := st.reads
	var l hraft.Log
	if err := c.GetLog(idx, &l); err != nil {
		t.Fatalf("GetLog(%d): %v", idx, err)
	}
	return l, st.reads > before
}

// The cache serves the newest entries up to its byte bound and no more;
// older ones come from the store, unchanged.
func TestLogCache_BoundedByBytes(t *testing.T) {
	t.Parallel()
	st := openCountingStore(t)
	c := newLogCache(st, 4<<20)
	for i := uint64(1); i <= 10; i++ {
		if err := c.StoreLogs([]*hraft.Log{entry(i, 1<<20, byte(i))}); err != nil {
			t.Fatal(err)
		}
		if c.bytes > 4<<20 {
			t.Fatalf("after entry %d the cache holds %d bytes, over its bound", i, c.bytes)
		}
	}
	for i := uint64(1); i <= 10; i++ {
		l, fromStore := read(t, c, st, i)
		if len(l.Data) != 1<<20 || l.Data[0] != byte(i) || l.Index != i {
			t.Fatalf("entry %d read back as index %d, %d bytes of %#x", i, l.Index, len(l.Data), l.Data[0])
		}
		if wantStore := i <= 6; fromStore != wantStore {
			t.Errorf("entry %d: read from the store %v, want %v (the newest four MiB are cached)", i, fromStore, wantStore)
		}
	}
	// One entry larger than the bound is still kept: it is the newest.
	if err := c.StoreLogs([]*hraft.Log{entry(11, 5<<20, 11)}); err != nil {
		t.Fatal(err)
	}
	if _, fromStore := read(t, c, st, 11); fromStore || c.n != 1 {
		t.Errorf("an entry over the bound: from store %v, %d cached, want it alone in the cache", fromStore, c.n)
	}
}

// The cache caps entries by count too, however small they are.
func TestLogCache_BoundedByCount(t *testing.T) {
	t.Parallel()
	st := openCountingStore(t)
	c := newLogCache(st, 1<<30)
	var logs []*hraft.Log
	for i := uint64(1); i <= logCacheEntries+100; i++ {
		logs = append(logs, entry(i, 10, 1))
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if _, fromStore := read(t, c, st, 100); !fromStore {
		t.Error("entry 100 of 612 came from the cache, which keeps only the newest 512")
	}
	if _, fromStore := read(t, c, st, 101); fromStore {
		t.Error("entry 101 of 612 came from the store, want the cache")
	}
}

// A truncation or a replaced suffix never leaves a stale entry to be read:
// a follower that drops a conflicting suffix and appends new entries at
// the same indexes reads the new ones.
func TestLogCache_DeleteAndReplace(t *testing.T) {
	t.Parallel()
	st := openCountingStore(t)
	c := newLogCache(st, 1<<20)
	var logs []*hraft.Log
	for i := uint64(1); i <= 5; i++ {
		logs = append(logs, entry(i, 100, 'a'))
	}
	if err := c.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(4, 5); err != nil {
		t.Fatal(err)
	}
	var l hraft.Log
	if err := c.GetLog(5, &l); !errors.Is(err, hraft.ErrLogNotFound) {
		t.Fatalf("GetLog(5) after deleting it: %v, want ErrLogNotFound", err)
	}
	if err := c.StoreLogs([]*hraft.Log{entry(4, 100, 'b'), entry(5, 100, 'b')}); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 5; i++ {
		l, _ := read(t, c, st, i)
		want := byte('a')
		if i >= 4 {
			want = 'b'
		}
		if l.Data[0] != want {
			t.Errorf("entry %d reads %q, want %q", i, l.Data[0], want)
		}
	}
	// An append that does not continue the cached run starts a new one.
	if err := c.StoreLogs([]*hraft.Log{entry(9, 100, 'c')}); err != nil {
		t.Fatal(err)
	}
	if _, fromStore := read(t, c, st, 5); !fromStore {
		t.Error("entry 5 served from the cache after a gap reset it")
	}
	if l, fromStore := read(t, c, st, 9); fromStore || l.Data[0] != 'c' {
		t.Errorf("entry 9: from store %v, data %q; want the cache's c", fromStore, l.Data[0])
	}
}

// A failed append caches nothing and keeps the store's error in the chain
// (and the text Node.mapError reads).
func TestLogCache_FailedAppendCachesNothing(t *testing.T) {
	t.Parallel()
	st := openCountingStore(t)
	c := newLogCache(st, 1<<20)
	if err := st.Store.Close(); err != nil {
		t.Fatal(err)
	}
	err := c.StoreLogs([]*hraft.Log{entry(1, 100, 'a')})
	if err == nil {
		t.Fatal("StoreLogs on a closed store succeeded")
	}
	var inner error = err
	for errors.Unwrap(inner) != nil {
		inner = errors.Unwrap(inner)
	}
	if inner == err || c.n != 0 {
		t.Fatalf("error %v (chain ends at %v), %d cached: want the store's error wrapped and nothing cached", err, inner, c.n)
	}
	if got := fmt.Sprint(err); len(got) < 38 || got[:38] != "unable to store logs within log store," {
		t.Fatalf("error text %q, want the prefix Node.mapError reads", got)
	}
}

// Log compaction after a snapshot deletes entries older than the cached
// run: the run stays and is still served from memory; deleting its front
// or its tail drops exactly those entries.
func TestLogCache_DeleteRangeKeepsWhatItDoesNotCover(t *testing.T) {
	t.Parallel()
	st := openCountingStore(t)
	c := newLogCache(st, 100) // ten entries of ten bytes
	for i := uint64(1); i <= 20; i++ {
		if err := c.StoreLogs([]*hraft.Log{entry(i, 10, byte(i))}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(idx uint64) bool {
		t.Helper()
		l, fromStore := read(t, c, st, idx)
		if l.Data[0] != byte(idx) {
			t.Fatalf("entry %d reads data %d", idx, l.Data[0])
		}
		return !fromStore
	}
	if err := c.DeleteRange(1, 5); err != nil { // older than the run 11..20
		t.Fatal(err)
	}
	for i := uint64(11); i <= 20; i++ {
		if !cached(i) {
			t.Fatalf("entry %d left the cache when 1..5 were deleted", i)
		}
	}
	if err := c.DeleteRange(6, 12); err != nil { // the run's front
		t.Fatal(err)
	}
	if !cached(13) || c.first != 13 || c.n != 8 {
		t.Fatalf("after deleting 6..12 the cache holds %d from %d, want 8 from 13", c.n, c.first)
	}
	if err := c.DeleteRange(18, 20); err != nil { // the tail, as a follower's conflict
		t.Fatal(err)
	}
	if c.n != 5 || !cached(17) {
		t.Fatalf("after deleting 18..20 the cache holds %d, want 13..17", c.n)
	}
	if err := c.StoreLogs([]*hraft.Log{entry(18, 10, 18)}); err != nil {
		t.Fatal(err)
	}
	if !cached(18) || c.n != 6 {
		t.Fatalf("the replaced entry 18 is not cached after 13..17 (%d cached)", c.n)
	}
	if c.bytes != 60 {
		t.Fatalf("the cache counts %d bytes for six entries of ten", c.bytes)
	}
}
