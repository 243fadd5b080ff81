package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	hraft "github.com/hashicorp/raft"
)

var (
	_ hraft.LogStore          = (*Store)(nil)
	_ hraft.StableStore       = (*Store)(nil)
	_ hraft.MonotonicLogStore = (*Store)(nil)
)

// Store is a hashicorp/raft LogStore, MonotonicLogStore and StableStore kept
// in its own Pebble instance. It is safe for concurrent use.
type Store struct {
	db        *pebble.DB
	writeOpts *pebble.WriteOptions

	// first and last cache the lowest and highest stored log index (0 and 0
	// when the log is empty). They change only under writeMu, and never
	// cover an entry that is not readable: StoreLogs grows them after its
	// batch commits, DeleteRange shrinks them before its batch commits.
	first, last atomic.Uint64

	// writeMu serialises StoreLogs and DeleteRange with their bound updates.
	writeMu sync.Mutex

	// closeMu is held shared by every method and exclusively by Close, so no
	// call reaches a closed Pebble.
	closeMu sync.RWMutex
	closed  bool
}

// Open opens or creates the store in dir, a directory of its own, and
// restores FirstIndex and LastIndex from disk.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref()
	po := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		MemTableSize:       opts.MemTableSize,
		DisableWAL:         false, // the WAL is what makes a synced batch durable
		Logger:             pebbleLogger{logf: opts.Logger},
	}
	// Entries are mostly compressed message bodies: block compression
	// would spend CPU for nothing, and separating them into blob files
	// keeps compactions from rewriting entries that truncation soon drops.
	for i := range po.Levels {
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1024, MaxBlobReferenceDepth: 10,
			RewriteMinimumAge: time.Minute, TargetGarbageRatio: 0.5}
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("open pebble: %w", err)
	}
	s := &Store{db: db, writeOpts: pebble.Sync}
	if opts.NoSync {
		s.writeOpts = pebble.NoSync
	}
	first, last, err := s.bounds()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("read log bounds: %w", err), db.Close())
	}
	s.first.Store(first)
	s.last.Store(last)
	return s, nil
}

// Close closes the Pebble instance. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	// Flushing the memtable makes the next open skip the WAL replay.
	if err := s.db.Flush(); err != nil {
		s.db.Close()
		return fmt.Errorf("flush pebble: %w", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close pebble: %w", err)
	}
	return nil
}

// acquire takes closeMu shared; callers defer s.closeMu.RUnlock() on success.
func (s *Store) acquire() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

// IsMonotonic implements hraft.MonotonicLogStore. It tells raft to delete
// the whole log after restoring a snapshot rather than leave a gap before
// the next append; for this store that is one range tombstone.
func (s *Store) IsMonotonic() bool { return true }

// FirstIndex returns the lowest stored index, or 0 for an empty log.
func (s *Store) FirstIndex() (uint64, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	return s.first.Load(), nil
}

// LastIndex returns the highest stored index, or 0 for an empty log.
func (s *Store) LastIndex() (uint64, error) {
	if err := s.acquire(); err != nil {
		return 0, err
	}
	defer s.closeMu.RUnlock()
	return s.last.Load(), nil
}

// GetLog reads the entry at index into log, replacing every field. A missing
// entry returns hraft.ErrLogNotFound itself, unwrapped, because raft
// compares with ==.
func (s *Store) GetLog(index uint64, log *hraft.Log) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	v, closer, err := s.db.Get(logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return hraft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("get log %d: %w", index, err)
	}
	defer closer.Close()
	if err := decodeLog(v, log); err != nil {
		return fmt.Errorf("get log %d: %w", index, err)
	}
	if log.Index != index {
		return fmt.Errorf("get log %d: %w: key holds entry %d", index, ErrCorrupt, log.Index)
	}
	return nil
}

// StoreLog stores one entry; see StoreLogs.
func (s *Store) StoreLog(log *hraft.Log) error {
	return s.StoreLogs([]*hraft.Log{log})
}

// StoreLogs writes every entry in one Pebble batch and returns after it is
// committed with fsync (unless Options.NoSync). An entry at an index already
// stored is overwritten.
func (s *Store) StoreLogs(logs []*hraft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()

	b := s.db.NewBatch()
	defer b.Close()
	low, high := logs[0].Index, logs[0].Index
	for _, l := range logs {
		if l.Index == 0 {
			return fmt.Errorf("store log: %w", ErrInvalidIndex)
		}
		n, err := encodedLen(l)
		if err != nil {
			return err
		}
		op := b.SetDeferred(logKeyLen, n)
		putLogKey(op.Key, l.Index)
		encodeLog(op.Value, l)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("batch log %d: %w", l.Index, err)
		}
		low, high = min(low, l.Index), max(high, l.Index)
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := b.Commit(s.writeOpts); err != nil {
		return fmt.Errorf("commit logs %d-%d: %w", low, high, err)
	}
	if first := s.first.Load(); first == 0 || low < first {
		s.first.Store(low)
	}
	if high > s.last.Load() {
		s.last.Store(high)
	}
	return nil
}

// DeleteRange deletes the entries from min to max, both inclusive, with one
// range tombstone committed like StoreLogs. Raft deletes only prefixes
// (after a snapshot) and suffixes (on a follower's log conflict); a range in
// the middle is deleted too but leaves FirstIndex and LastIndex unchanged.
//
// The cached bounds shrink before the tombstone commits (StoreLogs grows
// them after its batch commits), so they never claim an entry that is gone:
// a GetLog that misses because of a concurrent delete finds FirstIndex
// already moved on, which is what raft's oldestLog retry expects.
func (s *Store) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()

	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(logKey(min), logEnd(max), nil); err != nil {
		return fmt.Errorf("batch delete logs %d-%d: %w", min, max, err)
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	oldFirst, oldLast := s.first.Load(), s.last.Load()
	first, last := oldFirst, oldLast
	var err error
	switch {
	case oldLast == 0 || max < oldFirst || min > oldLast:
		// Nothing stored in the range.
	case min <= oldFirst && max >= oldLast:
		first, last = 0, 0
	case min <= oldFirst:
		first, err = s.seek(logKey(max+1), true) // max < last: no overflow, and found
	case max >= oldLast:
		last, err = s.seek(logKey(min), false) // min > first: found
	}
	if err != nil {
		return fmt.Errorf("find log bounds after %d-%d: %w", min, max, err)
	}
	s.first.Store(first)
	s.last.Store(last)
	if err := b.Commit(s.writeOpts); err != nil {
		s.first.Store(oldFirst)
		s.last.Store(oldLast)
		return fmt.Errorf("commit delete logs %d-%d: %w", min, max, err)
	}
	return nil
}

// seek returns the index of the first log key >= key (forward) or the last
// log key < key (backward), or 0 if there is none. DeleteRange seeks from
// outside the range it deletes, so it never walks keys under older
// tombstones.
func (s *Store) seek(key []byte, forward bool) (uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLower, UpperBound: logUpper})
	if err != nil {
		return 0, err
	}
	var ok bool
	if forward {
		ok = it.SeekGE(key)
	} else {
		ok = it.SeekLT(key)
	}
	var index uint64
	if ok {
		index, err = parseLogKey(it.Key())
	}
	return index, errors.Join(err, it.Close())
}

// bounds reads the lowest and highest log index from disk.
func (s *Store) bounds() (first, last uint64, err error) {
	if first, err = s.seek(logLower, true); err != nil || first == 0 {
		return 0, 0, err
	}
	if last, err = s.seek(logUpper, false); err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

// Set stores val under key, synced like StoreLogs.
func (s *Store) Set(key, val []byte) error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if err := s.db.Set(stableKey(key), val, s.writeOpts); err != nil {
		return fmt.Errorf("set %q: %w", key, err)
	}
	return nil
}

// Get returns a copy of the value stored under key. A key never set returns
// ErrKeyNotFound, unwrapped, as raft-boltdb does; a key set to an empty
// value returns an empty, non-nil slice.
func (s *Store) Get(key []byte) ([]byte, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	v, closer, err := s.db.Get(stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	defer closer.Close()
	return append(make([]byte, 0, len(v)), v...), nil
}

// SetUint64 stores val under key as 8 big-endian bytes. Set and SetUint64
// share one keyspace, as in raft-boltdb and raft-wal.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value SetUint64 stored under key. A key never set
// returns 0 and ErrKeyNotFound, unwrapped, as raft-boltdb does; a value that
// is not 8 bytes wraps ErrCorrupt.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != uint64ValueLen {
		return 0, fmt.Errorf("get %q: %w: uint64 value of %d bytes", key, ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Check walks the whole log and verifies that every value decodes, that each
// entry sits under its own index, and that FirstIndex and LastIndex match
// the lowest and highest key on disk. Failures wrap ErrCorrupt. It reads
// everything; tests call it on the way out, operators on demand.
func (s *Store) Check() error {
	if err := s.acquire(); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()

	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: logLower, UpperBound: logUpper})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	var first, last uint64
	var l hraft.Log
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		var index uint64
		if index, err = parseLogKey(it.Key()); err != nil {
			break
		}
		var v []byte
		if v, err = it.ValueAndErr(); err != nil {
			break
		}
		if err = decodeLog(v, &l); err != nil {
			err = fmt.Errorf("log %d: %w", index, err)
			break
		}
		if l.Index != index {
			err = fmt.Errorf("%w: key %d holds entry %d", ErrCorrupt, index, l.Index)
			break
		}
		if first == 0 {
			first = index
		}
		last = index
	}
	if err = errors.Join(err, it.Close()); err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if gotFirst, gotLast := s.first.Load(), s.last.Load(); gotFirst != first || gotLast != last {
		return fmt.Errorf("check: %w: cached bounds %d-%d, disk holds %d-%d", ErrCorrupt, gotFirst, gotLast, first, last)
	}
	return nil
}
