package logstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine/fault"
)

var (
	_ hraft.LogStore          = (*Store)(nil)
	_ hraft.StableStore       = (*Store)(nil)
	_ hraft.MonotonicLogStore = (*Store)(nil)
)

// Store is a hashicorp/raft LogStore, MonotonicLogStore and StableStore kept
// in its own Pebble instance: group 1's. Group returns the same for any
// other Raft group, kept in the same instance under a key prefix of its own,
// so that the groups of a node share one WAL and the fsyncs of their
// concurrent appends. It is safe for concurrent use.
type Store struct {
	dir  string
	opts Options
	mon  *fault.Monitor
	// db is replaced when the store reopens after a fault (heal.go), with
	// closeMu held exclusively; it is nil while a reopen has failed.
	db        *pebble.DB
	writeOpts *pebble.WriteOptions

	// Log is group 1's log and stable state: the store's own LogStore and
	// StableStore methods are its.
	*Log
	// logs holds every group's Log handed out, group 1's too: a reopen
	// reconciles each of them with the disk.
	logsMu sync.Mutex
	logs   map[uint32]*Log

	// closeMu is held shared by every method and exclusively by Close and
	// by a reopen, so no call reaches a closed Pebble.
	closeMu  sync.RWMutex
	closed   bool
	readOnly bool // the instance is open read-only (guarded by closeMu)

	// fault is set while writes are refused; readFault while a log read is
	// being retried (heal.go).
	fault     atomic.Pointer[error]
	readFault atomic.Pointer[error]
	healMu    sync.Mutex
	healing   bool
	healed    chan struct{} // closed when the fault ends
	healers   sync.WaitGroup
	stop      chan struct{} // closed by Close
}

// Open opens or creates the store in dir, a directory of its own, and
// restores FirstIndex and LastIndex from disk. When the directory no longer
// takes writes (a full disk), an existing store opens read-only and faulted:
// it serves reads and reopens itself read-write once the directory takes
// writes again.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, opts: opts, mon: fault.NewMonitor(opts.FS, opts.OnError),
		writeOpts: pebble.Sync, stop: make(chan struct{})}
	s.Log = &Log{s: s, ks: newKeyspace(1)}
	s.logs = map[uint32]*Log{1: s.Log}
	if opts.NoSync {
		s.writeOpts = pebble.NoSync
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create dir: %w", err)
	}
	probe := s.mon.Probe(dir, s.roomNeeded())
	if probe != nil {
		if desc, err := pebble.Peek(dir, fs); err != nil || !desc.Exists {
			return nil, fmt.Errorf("create store: %w", probe)
		}
	}
	db, err := s.openPebble(probe != nil)
	if err != nil {
		return nil, fmt.Errorf("open pebble: %w", err)
	}
	s.db, s.readOnly = db, probe != nil
	first, last, err := s.bounds()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("read log bounds: %w", err), db.Close())
	}
	s.first.Store(first)
	s.last.Store(last)
	if probe != nil {
		s.setFault(fmt.Errorf("opened read-only: %w", probe))
	}
	return s, nil
}

// pebbleOptions are the store's Pebble options.
func (s *Store) pebbleOptions(readOnly bool) *pebble.Options {
	po := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              pebble.NewCache(s.opts.CacheSize),
		MemTableSize:       s.opts.MemTableSize,
		DisableWAL:         false, // the WAL is what makes a synced batch durable
		ReadOnly:           readOnly,
	}
	s.mon.Configure(po, s.opts.Logger, s.opts.OnFatal)
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
	return po
}

func (s *Store) openPebble(readOnly bool) (*pebble.DB, error) {
	return fault.Open(s.dir, func() *pebble.Options { return s.pebbleOptions(readOnly) })
}

// roomNeeded is the free space a read-write open needs: Pebble flushes the
// WAL it replays before Open returns, and starts a new one.
func (s *Store) roomNeeded() uint64 { return s.mon.WALBytes(s.dir) + 1<<20 }

// Close closes the Pebble instance. Later calls return ErrClosed. A faulted
// store closes without flushing, and the errors of its broken instance are
// logged, not returned.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return ErrClosed
	}
	s.closed = true
	close(s.stop)
	s.closeMu.Unlock()
	s.healers.Wait()

	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.db == nil {
		return nil
	}
	// Flushing the memtable makes the next open skip the WAL replay. Not on
	// a faulted store, nor on a disk that fails writes: Pebble would retry
	// the flush until it took them (a node shutting down on a full disk
	// would hang), and a flush whose closing WAL fsync fails panics in
	// Pebble; a synced write meets such a WAL first, behind the fault gate
	// (engine.Close says more). The next open replays the WAL instead, and
	// a close error on that disk is logged, not returned.
	var why error
	switch {
	case s.fault.Load() != nil:
		why = errors.New("the store is faulted")
	case s.mon.Failing():
		why = errors.New("writes are failing")
	default:
		if why = s.mon.Probe(s.dir, s.opts.MemTableSize); why == nil {
			why = s.commit(func() error { return s.db.LogData(nil, pebble.Sync) })
		}
	}
	if why != nil {
		if err := s.db.Close(); err != nil {
			s.logf("closed a failing store without a flush (%v): %v", why, err)
		}
		return nil
	}
	if err := s.db.Flush(); err != nil {
		s.db.Close()
		return fmt.Errorf("flush pebble: %w", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close pebble: %w", err)
	}
	return nil
}

// Log is one Raft group's log and stable state in a Store: a
// hashicorp/raft LogStore, MonotonicLogStore and StableStore. A group's
// writes are serialised with its bounds; different groups write
// concurrently, and Pebble commits their synced batches with one fsync when
// they meet. It is safe for concurrent use.
type Log struct {
	s  *Store
	ks keyspace

	// first and last cache the lowest and highest stored log index (0 and 0
	// when the log is empty). They change only under writeMu, and never
	// cover an entry that is not readable: StoreLogs grows them after its
	// batch commits, DeleteRange shrinks them before its batch commits.
	// They record what raft was told: a reopen makes the disk agree.
	first, last atomic.Uint64

	// installed is 1 + the index of the snapshot raft is installing from a
	// leader (SnapshotInstalled), 0 when none: the next DeleteRange of the
	// whole log keeps the entries above it (see DeleteRange).
	installed atomic.Uint64

	// writeMu serialises the group's writes (StoreLogs, DeleteRange, Set)
	// with their bound updates, and so also the check of the monitor's WAL
	// failure with the commit behind it.
	writeMu sync.Mutex
}

var (
	_ hraft.LogStore          = (*Log)(nil)
	_ hraft.StableStore       = (*Log)(nil)
	_ hraft.MonotonicLogStore = (*Log)(nil)
)

// Group returns group id's log and stable state, reading its bounds from
// disk the first time; group 1 is the Store's own. Every call for one id
// returns the same Log.
func (s *Store) Group(id uint32) (*Log, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.closeMu.RUnlock()
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	if g := s.logs[id]; g != nil {
		return g, nil
	}
	if s.db == nil {
		return nil, fmt.Errorf("open group %d: %w", id, s.writable())
	}
	g := &Log{s: s, ks: newKeyspace(id)}
	first, last, err := g.bounds()
	if err != nil {
		return nil, fmt.Errorf("read group %d's log bounds: %w", id, err)
	}
	g.first.Store(first)
	g.last.Store(last)
	s.logs[id] = g
	return g, nil
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
func (g *Log) IsMonotonic() bool { return true }

// FirstIndex returns the lowest stored index, or 0 for an empty log.
func (g *Log) FirstIndex() (uint64, error) {
	if err := g.s.acquire(); err != nil {
		return 0, err
	}
	defer g.s.closeMu.RUnlock()
	return g.first.Load(), nil
}

// LastIndex returns the highest stored index, or 0 for an empty log.
func (g *Log) LastIndex() (uint64, error) {
	if err := g.s.acquire(); err != nil {
		return 0, err
	}
	defer g.s.closeMu.RUnlock()
	return g.last.Load(), nil
}

// GetLog reads the entry at index into log, replacing every field. A missing
// entry returns hraft.ErrLogNotFound itself, unwrapped, because raft
// compares with ==. A read that fails on an I/O error is retried, with a
// growing pause, until it succeeds or the store closes, and Fault reports it
// meanwhile: raft panics when it cannot read a committed entry.
func (g *Log) GetLog(index uint64, log *hraft.Log) error {
	wait := fault.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
	for {
		err := g.getLog(index, log)
		if err == nil || err == hraft.ErrLogNotFound || errors.Is(err, ErrClosed) || errors.Is(err, ErrCorrupt) {
			if g.s.readFault.Load() != nil {
				g.s.readFault.Store(nil)
			}
			return err
		}
		if g.s.readFault.Swap(&err) == nil {
			g.s.logf("read fault, retrying: %v", err)
		}
		select {
		case <-time.After(wait.Next()):
		case <-g.s.stop:
			return err
		}
	}
}

func (g *Log) getLog(index uint64, log *hraft.Log) error {
	if err := g.s.acquire(); err != nil {
		return err
	}
	defer g.s.closeMu.RUnlock()
	if g.s.db == nil {
		return g.s.writable()
	}
	v, closer, err := g.s.db.Get(g.ks.logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return hraft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("get log %d: %w", index, err)
	}
	derr := decodeLog(v, log)
	// Pebble reports a value it failed to read from a blob file only when
	// the closer is closed, handing out an empty value meanwhile: the read
	// error comes before the decoder's verdict on that value.
	if err := closer.Close(); err != nil {
		return fmt.Errorf("get log %d: %w", index, err)
	}
	if derr != nil {
		return fmt.Errorf("get log %d: %w", index, derr)
	}
	if log.Index != index {
		return fmt.Errorf("get log %d: %w: key holds entry %d", index, ErrCorrupt, log.Index)
	}
	return nil
}

// StoreLog stores one entry; see StoreLogs.
func (g *Log) StoreLog(log *hraft.Log) error {
	return g.StoreLogs([]*hraft.Log{log})
}

// StoreLogs writes every entry in one Pebble batch and returns after it is
// committed with fsync (unless Options.NoSync). An entry at an index already
// stored is overwritten. A failed commit faults the store: this call and
// every write until the store has reopened itself fail with an error
// wrapping ErrFaulted (raft's leader then steps down, a follower rejects
// the append).
func (g *Log) StoreLogs(logs []*hraft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if err := g.s.acquire(); err != nil {
		return err
	}
	defer g.s.closeMu.RUnlock()

	b := g.s.db.NewBatch()
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
		op := b.SetDeferred(g.ks.logKeyLen(), n)
		g.ks.putLogKey(op.Key, l.Index)
		encodeLog(op.Value, l)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("batch log %d: %w", l.Index, err)
		}
		low, high = min(low, l.Index), max(high, l.Index)
	}

	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	if err := g.s.writable(); err != nil {
		return fmt.Errorf("commit logs %d-%d: %w", low, high, err)
	}
	if err := g.s.commit(func() error { return b.Commit(g.s.writeOpts) }); err != nil {
		return g.s.setFault(fmt.Errorf("commit logs %d-%d: %w", low, high, err))
	}
	if first := g.first.Load(); first == 0 || low < first {
		g.first.Store(low)
	}
	if high > g.last.Load() {
		g.last.Store(high)
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
//
// After installing a snapshot from a leader, raft (IsMonotonic) deletes the
// whole log, yet keeps believing it holds the entries it held above the
// snapshot's index: a follower whose log ran ahead of the snapshot then
// panics reading them back (hashicorp/raft#697, seen in a chaos run where a
// leader sent a rejoining node the same snapshot twice). So the first
// DeleteRange after SnapshotInstalled that covers the whole log keeps what
// lies above the snapshot, which is what raft still counts on; entries up
// to it, which the snapshot replaces, go.
func (g *Log) DeleteRange(min, max uint64) error {
	if s := g.installed.Load(); s != 0 && min <= g.first.Load() && max >= g.last.Load() {
		g.installed.Store(0)
		if max > s-1 {
			max = s - 1
		}
	}
	if min > max {
		return nil
	}
	if err := g.s.acquire(); err != nil {
		return err
	}
	defer g.s.closeMu.RUnlock()

	b := g.s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(g.ks.logKey(min), g.ks.logEnd(max), nil); err != nil {
		return fmt.Errorf("batch delete logs %d-%d: %w", min, max, err)
	}

	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	if err := g.s.writable(); err != nil {
		return fmt.Errorf("delete logs %d-%d: %w", min, max, err)
	}
	oldFirst, oldLast := g.first.Load(), g.last.Load()
	first, last := oldFirst, oldLast
	var err error
	switch {
	case oldLast == 0 || max < oldFirst || min > oldLast:
		// Nothing stored in the range.
	case min <= oldFirst && max >= oldLast:
		first, last = 0, 0
	case min <= oldFirst:
		first, err = g.seek(g.ks.logKey(max+1), true) // max < last: no overflow, and found
	case max >= oldLast:
		last, err = g.seek(g.ks.logKey(min), false) // min > first: found
	}
	if err != nil {
		return fmt.Errorf("find log bounds after %d-%d: %w", min, max, err)
	}
	g.first.Store(first)
	g.last.Store(last)
	if err := g.s.commit(func() error { return b.Commit(g.s.writeOpts) }); err != nil {
		g.first.Store(oldFirst)
		g.last.Store(oldLast)
		return g.s.setFault(fmt.Errorf("commit delete logs %d-%d: %w", min, max, err))
	}
	return nil
}

// SnapshotInstalled tells the log that raft is installing a snapshot at
// index from a leader; see DeleteRange.
func (g *Log) SnapshotInstalled(index uint64) { g.installed.Store(index + 1) }

// Clear deletes every entry of the log, keeping the stable state (the
// term and vote raft must never forget, the store's identity). Only for a
// log no raft uses: a replica retired from its group (raft.Store).
func (g *Log) Clear() error {
	g.installed.Store(0)
	if last := g.last.Load(); last != 0 {
		return g.DeleteRange(g.first.Load(), last)
	}
	return nil
}

// seek returns the index of the first log key >= key (forward) or the last
// log key < key (backward), or 0 if there is none. DeleteRange seeks from
// outside the range it deletes, so it never walks keys under older
// tombstones.
func (g *Log) seek(key []byte, forward bool) (uint64, error) {
	it, err := g.s.db.NewIter(&pebble.IterOptions{LowerBound: g.ks.lower, UpperBound: g.ks.upper})
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
		index, err = g.ks.parseLogKey(it.Key())
	}
	return index, errors.Join(err, it.Close())
}

// bounds reads the lowest and highest log index from disk.
func (g *Log) bounds() (first, last uint64, err error) {
	if first, err = g.seek(g.ks.lower, true); err != nil || first == 0 {
		return 0, 0, err
	}
	if last, err = g.seek(g.ks.upper, false); err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

// Set stores val under key, synced like StoreLogs. On a faulted store it
// waits until the store has reopened itself (or is closed) instead of
// failing: raft panics when it cannot save its term. A value already
// stored is not written again: raft rewrites its current term at every
// start, and a node whose disk is full must still come up.
func (g *Log) Set(key, val []byte) error {
	if old, err := g.Get(key); err == nil && bytes.Equal(old, val) {
		return nil
	}
	for {
		err := g.set(key, val)
		if err == nil || !errors.Is(err, ErrFaulted) || !g.s.waitHealed() {
			return err
		}
	}
}

func (g *Log) set(key, val []byte) error {
	if err := g.s.acquire(); err != nil {
		return err
	}
	defer g.s.closeMu.RUnlock()
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	if err := g.s.writable(); err != nil {
		return fmt.Errorf("set %q: %w", key, err)
	}
	if err := g.s.commit(func() error { return g.s.db.Set(g.ks.stableKey(key), val, g.s.writeOpts) }); err != nil {
		return g.s.setFault(fmt.Errorf("set %q: %w", key, err))
	}
	return nil
}

// Get returns a copy of the value stored under key. A key never set returns
// ErrKeyNotFound, unwrapped, as raft-boltdb does; a key set to an empty
// value returns an empty, non-nil slice.
func (g *Log) Get(key []byte) ([]byte, error) {
	if err := g.s.acquire(); err != nil {
		return nil, err
	}
	defer g.s.closeMu.RUnlock()
	if g.s.db == nil {
		return nil, fmt.Errorf("get %q: %w", key, g.s.writable())
	}
	v, closer, err := g.s.db.Get(g.ks.stableKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	v = append(make([]byte, 0, len(v)), v...)
	if err := closer.Close(); err != nil { // see getLog
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	return v, nil
}

// SetUint64 stores val under key as 8 big-endian bytes. Set and SetUint64
// share one keyspace, as in raft-boltdb and raft-wal.
func (g *Log) SetUint64(key []byte, val uint64) error {
	return g.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value SetUint64 stored under key. A key never set
// returns 0 and ErrKeyNotFound, unwrapped, as raft-boltdb does; a value that
// is not 8 bytes wraps ErrCorrupt.
func (g *Log) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
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
func (g *Log) Check() error {
	if err := g.s.acquire(); err != nil {
		return err
	}
	defer g.s.closeMu.RUnlock()
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	if g.s.db == nil {
		return fmt.Errorf("check: %w", g.s.writable())
	}

	it, err := g.s.db.NewIter(&pebble.IterOptions{LowerBound: g.ks.lower, UpperBound: g.ks.upper})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	var first, last uint64
	var l hraft.Log
	for ok := it.First(); ok && err == nil; ok = it.Next() {
		var index uint64
		if index, err = g.ks.parseLogKey(it.Key()); err != nil {
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
	if gotFirst, gotLast := g.first.Load(), g.last.Load(); gotFirst != first || gotLast != last {
		return fmt.Errorf("check: %w: cached bounds %d-%d, disk holds %d-%d", ErrCorrupt, gotFirst, gotLast, first, last)
	}
	return nil
}
