package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/queenmq/queen/engine/fault"
	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/internal/invariants"
)

// Engine is the broker's durable state on one node. Mutations go through a
// Batch (one per Raft apply batch); reads take a shared lock. Every mutation
// is deterministic: it reads only its command (with the command's Stamp) and
// the store.
type Engine struct {
	opts Options
	dir  string
	mon  *fault.Monitor
	// db is replaced when the engine recovers from a fault (recover.go).
	// Readers that do not hold mu (Finish reading a pop's messages, background compactions) hold
	// dbMu shared while they use it.
	db   *pebble.DB
	dbMu sync.RWMutex

	// commitMu serialises Pebble commits, so that the check of the
	// monitor's WAL failure and the commit behind it are one step.
	commitMu sync.Mutex

	// mu guards everything below and the in-memory model. A Batch holds it
	// exclusively from Begin to Commit; readers hold it shared.
	mu      sync.RWMutex
	queues  map[string]*queue
	parts   map[ID]*partition
	leases  map[ID][]leaseRef
	cluster map[string]string
	// imports are the queues arriving from another store (move.go), by
	// name, and importParts their partitions: neither is in the model yet.
	imports     map[string]*importing
	importParts map[ID]string
	// frozen are the queues a move froze here, with its epoch (freeze.go).
	frozen map[string]uint64
	// movedParts are the partitions of frozen queues dropped here, by id,
	// to their queue's name: a command naming one is refused as its queue
	// is (freeze.go).
	movedParts map[ID]string
	applied    uint64
	// fault is set while the engine refuses writes: a commit failed, or the
	// store was opened read-only (recover.go). faultMirror holds the same
	// error for Fault, which must not wait for a running batch.
	fault       error
	faultMirror atomic.Pointer[error]
	// stale is set while the in-memory model may not match the disk (a
	// batch failed after changing it): reads are refused until Recover.
	stale    bool
	readOnly bool
	closed   bool

	compacting sync.WaitGroup // background compactions of deleted ranges
	snapshots  atomic.Int32   // open Snapshots: Recover waits for none

	cache *segmentCache
}

// walWriteBack is how much of the WAL is written before its write-back is
// started (fault.Monitor.WriteBackWAL). At 1 MiB a snapshot's fsync stalls
// the apply loop for 0.2-1.8 ms (rarely up to 10) instead of 1-19 ms, at
// 20k msgs/s on three nodes sharing a disk; the kernel writes the same
// bytes either way.
const walWriteBack = 1 << 20

// Open opens (or creates) the engine's store in dir. When the directory no
// longer takes writes (a full disk), an existing store opens read-only: it
// serves reads, refuses writes with ErrFaulted, and Recover makes it
// writable once the directory takes writes again.
func Open(dir string, opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{opts: opts, dir: dir, mon: fault.NewMonitor(opts.FS, opts.OnError),
		cache: newSegmentCache(opts.SegmentCacheEntries, opts.SegmentCacheBytes)}
	// Batches commit unsynced and a snapshot fsyncs them all (Sync): the
	// WAL's write-back starts every walWriteBack bytes, so that fsync finds
	// little left to write.
	e.mon.WriteBackWAL(walWriteBack)
	if err := e.openDB(); err != nil {
		return nil, err
	}
	mark := keyspace.Meta(restoringKey)
	if _, closer, err := e.db.Get(mark); err == nil {
		closer.Close()
		if opts.ReadOnly {
			e.db.Close()
			return nil, fmt.Errorf("%w: %s", ErrRestoreCut, dir)
		}
		// A restore was cut short: the store is half old, half new. Start
		// empty; the node restores its snapshot again.
		opts.Logger.Warn("engine: wiping a store left by an interrupted snapshot restore", "dir", dir)
		if err := e.wipe(nil); err != nil {
			e.db.Close()
			return nil, err
		}
	}
	if err := e.load(); err != nil {
		e.db.Close()
		return nil, err
	}
	return e, nil
}

// pebbleOptions are the engine's Pebble options.
func (e *Engine) pebbleOptions(readOnly bool) *pebble.Options {
	cache := pebble.NewCache(e.opts.BlockCacheBytes)
	po := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Cache:              cache,
		MemTableSize:       e.opts.MemTableBytes,
		ReadOnly:           readOnly,
		DisableWAL:         e.opts.BulkLoad,
	}
	log := e.opts.Logger
	e.mon.Configure(po, func(format string, args ...any) { log.Error("pebble: " + fmt.Sprintf(format, args...)) }, e.opts.OnFatal)
	for i := range po.Levels {
		// Most point lookups are dedup probes for transaction ids that do
		// not exist: a bloom filter answers them without reading a block.
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		// Segment values are already zstd: block compression would spend
		// CPU on them for nothing.
		po.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	// Segments go to blob files when flushed and compactions move only
	// references to them: the LSM then rewrites small keys, not message
	// bodies, and compaction CPU stops competing with the apply loop.
	// Every flush holds segments of every busy partition, so an sstable of
	// Lbase soon references one blob file per flush; past the reference
	// depth a compaction rewrites all its values into new blob files. At
	// Pebble's 10 that rewrote the bodies every few flushes (a sustained
	// push spent 21% of its CPU compacting, against 10% on a fresh store);
	// a segment is read by one point lookup whichever blob file holds it,
	// so a deep reference list costs reads little.
	po.Experimental.ValueSeparationPolicy = func() pebble.ValueSeparationPolicy {
		return pebble.ValueSeparationPolicy{Enabled: true, MinimumSize: 1024, MaxBlobReferenceDepth: 200,
			RewriteMinimumAge: 5 * time.Minute, TargetGarbageRatio: 0.2}
	}
	return po
}

// Close closes the store. It waits for a running batch to commit. A
// faulted engine closes without flushing, and the errors of its broken
// Pebble instance are logged, not returned.
func (e *Engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	e.compacting.Wait()
	e.dbMu.Lock()
	defer e.dbMu.Unlock()
	if e.db == nil {
		return nil
	}
	if e.opts.ReadOnly {
		return e.db.Close()
	}
	// Flushing the memtables makes the next open skip the WAL replay: a
	// clean restart then costs the same however much was written. Not on a
	// faulted store, nor on a disk that fails writes: Pebble would retry the
	// flush until it took them (a node shutting down on a full disk would
	// hang), and the flush closes the current WAL, which makes Pebble panic
	// unrecoverably (it unlocks a mutex it no longer holds) when that WAL's
	// last fsync fails. So a synced write meets a failing WAL first, behind
	// the fault gate. Such a store is closed without a flush, and an error
	// closing it, expected on that disk and already reported, is logged: the
	// next open replays the WAL.
	var why error
	switch {
	case e.fault != nil:
		why = e.fault
	case e.mon.Failing():
		why = errors.New("writes are failing")
	default:
		if why = e.mon.Probe(e.dir, e.opts.MemTableBytes); why == nil {
			why = e.commit(func() error { return e.db.LogData(nil, e.durable()) })
		}
	}
	if why != nil {
		if err := e.db.Close(); err != nil {
			e.opts.Logger.Warn("engine: closed a failing store without a flush", "why", why, "err", err)
		}
		return nil
	}
	if err := e.db.Flush(); err != nil {
		e.db.Close()
		return fmt.Errorf("engine: flush on close: %w", err)
	}
	return e.db.Close()
}

// Sync makes every committed batch durable (one WAL fsync). A node whose
// batches are not synced one by one calls it before it lets Raft drop log
// entries the store has applied. It fails on a faulted engine.
func (e *Engine) Sync() error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.writable(); err != nil {
		return err
	}
	sync := func() error { return e.db.LogData(nil, pebble.Sync) }
	if e.opts.BulkLoad {
		sync = e.db.Flush // no log: the memtables are what is not on disk
	}
	if err := e.commit(sync); err != nil {
		return fmt.Errorf("engine: sync: %w", err)
	}
	return nil
}

// durable is the write option of a write that must be on disk before it
// returns: an fsync of the log, which a bulk load does not keep (Sync
// flushes its memtables instead).
func (e *Engine) durable() *pebble.WriteOptions {
	if e.opts.BulkLoad {
		return pebble.NoSync
	}
	return pebble.Sync
}

// Applied returns the Raft index recorded by the last committed batch.
func (e *Engine) Applied() uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.applied
}

// load rebuilds the in-memory model from the store.
func (e *Engine) load() error {
	e.queues = map[string]*queue{}
	e.parts = map[ID]*partition{}
	e.leases = map[ID][]leaseRef{}
	e.imports = map[string]*importing{}
	e.importParts = map[ID]string{}
	e.applied = 0

	version, err := e.metaU64(keyspace.MetaVersion)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if e.readOnly {
			break // a new store is never opened read-only; an empty one reads as empty
		}
		err := e.commit(func() error {
			return e.db.Set(keyspace.Meta(keyspace.MetaVersion), binary.BigEndian.AppendUint64(nil, keyspace.FormatVersion), e.durable())
		})
		if err != nil {
			return fmt.Errorf("engine: write format version: %w", err)
		}
	case err != nil:
		return err
	case version > keyspace.FormatVersion:
		return fmt.Errorf("%w: store %d, binary %d", ErrNewerFormat, version, keyspace.FormatVersion)
	}
	if e.applied, err = e.metaU64(keyspace.MetaApplied); err != nil && !errors.Is(err, pebble.ErrNotFound) {
		return err
	}

	if err := e.loadCluster(); err != nil {
		return err
	}
	if err := e.loadImports(); err != nil {
		return err
	}
	if err := e.loadFrozen(); err != nil {
		return err
	}
	err = e.scan(keyspace.FamilyQueue, func(k, v []byte) error {
		if name := string(k[1:]); e.imports[name] == nil {
			return e.addQueue(name, v)
		}
		return nil // arriving (move.go): loaded when its import ends
	})
	if err != nil {
		return err
	}
	if err := e.scan(keyspace.FamilyPartition, e.addPartition); err != nil {
		return err
	}
	if err := e.scan(keyspace.FamilyCursor, e.addCursor); err != nil {
		return err
	}
	return e.scan(keyspace.FamilySub, e.addSub)
}

// loadQueue loads one queue's model from r with the same steps as load:
// its record, the partitions ids (which must be all of its partitions),
// their cursors and its subscriptions. The import of a queue ends with it
// (move.go).
func (e *Engine) loadQueue(r pebble.Reader, name string, ids []ID) error {
	found, err := get(r, keyspace.Queue(name), func(v []byte) error { return e.addQueue(name, v) })
	if err == nil && !found {
		err = fmt.Errorf("%w: queue %q has no record", ErrCorrupt, name)
	}
	if err != nil {
		return err
	}
	for _, id := range ids {
		k := keyspace.Partition(id)
		found, err := get(r, k, func(v []byte) error { return e.addPartition(k, v) })
		if err == nil && !found {
			err = fmt.Errorf("%w: partition %x has no record", ErrCorrupt, id)
		}
		if err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := scanPrefix(r, keyspace.PartitionPrefix(keyspace.FamilyCursor, id), e.addCursor); err != nil {
			return err
		}
	}
	return scanPrefix(r, keyspace.Sub(name, ""), e.addSub)
}

// addQueue adds the queue record v of name to the model.
func (e *Engine) addQueue(name string, v []byte) error {
	rec, err := keyspace.DecodeQueue(v)
	if err != nil {
		return err
	}
	e.queues[name] = newQueue(name, rec, configFromRecords(rec.Options))
	return nil
}

// addPartition adds a partition record to the model, or to its import
// when its queue is still arriving.
func (e *Engine) addPartition(k, v []byte) error {
	rec, err := keyspace.DecodePartition(v)
	if err != nil {
		return err
	}
	var id ID
	copy(id[:], k[1:])
	if im := e.imports[rec.Queue]; im != nil {
		im.declare(e, rec.Queue, id, rec.Name)
		return nil
	}
	q := e.queues[rec.Queue]
	if q == nil {
		return fmt.Errorf("%w: partition %x of missing queue %q", ErrCorrupt, k[1:], rec.Queue)
	}
	p := &partition{id: id, q: q, rec: rec, cursors: map[string]*row{}}
	q.addPartition(p)
	e.parts[p.id] = p
	return nil
}

// addCursor adds a cursor row (and its lease) to the model.
func (e *Engine) addCursor(k, v []byte) error {
	id, group, err := keyspace.ParseCursor(k)
	if err != nil {
		return err
	}
	if _, arriving := e.importParts[id]; arriving {
		return nil
	}
	rec, err := keyspace.DecodeCursor(v)
	if err != nil {
		return err
	}
	p := e.parts[id]
	if p == nil {
		return fmt.Errorf("%w: cursor of missing partition %x", ErrCorrupt, id)
	}
	r := &row{p: p, group: group, rec: rec}
	p.cursors[group] = r
	if rec.Lease != (ID{}) {
		e.leases[rec.Lease] = append(e.leases[rec.Lease], leaseRef{p, group})
	}
	return nil
}

// addSub adds a subscription to the model.
func (e *Engine) addSub(k, v []byte) error {
	qname, group, err := keyspace.ParseSub(k)
	if err != nil {
		return err
	}
	if e.imports[qname] != nil {
		return nil
	}
	rec, err := keyspace.DecodeSub(v)
	if err != nil {
		return err
	}
	q := e.queues[qname]
	if q == nil {
		return fmt.Errorf("%w: subscription of missing queue %q", ErrCorrupt, qname)
	}
	q.subs[group] = &sub{rec: rec}
	return nil
}

func (e *Engine) metaU64(name string) (uint64, error) {
	var n uint64
	found, err := get(e.db, keyspace.Meta(name), func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("%w: meta %s", ErrCorrupt, name)
		}
		n = binary.BigEndian.Uint64(v)
		return nil
	})
	if err == nil && !found {
		err = pebble.ErrNotFound
	}
	return n, err
}

// scan calls fn for every key of a family, in key order.
func (e *Engine) scan(f keyspace.Family, fn func(k, v []byte) error) error {
	return scanPrefix(e.db, keyspace.FamilyPrefix(f), fn)
}

func scanPrefix(r pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	return scanRange(r, prefix, keyspace.PrefixEnd(prefix), fn)
}

// scanRange calls fn for every key in [lo, hi), in order.
func scanRange(r pebble.Reader, lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err == nil {
			err = fn(it.Key(), v)
		}
		if err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// get calls fn with the value stored under key, and reports whether there
// was one. Pebble's Get reports a value it failed to read (one kept in a
// blob file) only when the returned closer is closed, handing out an empty
// value meanwhile, so the close error comes first: fn's verdict on such a
// value is not to be trusted.
func get(r pebble.Reader, key []byte, fn func(v []byte) error) (bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ferr := fn(v)
	if err := closer.Close(); err != nil {
		return false, err
	}
	return true, ferr
}

// usable reports whether the engine may be read: open, and its model in
// step with its disk.
func (e *Engine) usable() error {
	switch {
	case e.closed:
		return ErrClosed
	case e.stale:
		return e.fault
	}
	return nil
}

// writable reports whether the engine may be written.
func (e *Engine) writable() error {
	if e.closed {
		return ErrClosed
	}
	return e.fault
}

// Batch is one atomic group of commands: one Pebble batch, one Raft apply
// batch. It holds the engine's write lock from Begin to Commit, so a Batch
// must always be committed. Reads inside a batch see its own writes.
type Batch struct {
	e     *Engine
	pb    *pebble.Batch
	parts []*partition // dirty partitions, flushed at Commit
	rows  []*row       // dirty cursor rows, flushed at Commit
	buf   []byte       // scratch for a value, reused once set
	key   []byte       // scratch for a key, reused once set
	err   error
	// compactions are ranges deleted by this batch, compacted after it
	// commits to give the space back.
	compactions [][2][]byte
}

// Begin starts a batch. It returns ErrReadOnly on an engine opened with
// Options.ReadOnly, and an error if the engine is closed or
// faulted (wrapping ErrFaulted): a faulted engine writes nothing until
// Recover.
func (e *Engine) Begin() (*Batch, error) {
	e.mu.Lock()
	e.checkWAL()
	err := e.writable()
	if err == nil && e.opts.ReadOnly {
		err = ErrReadOnly
	}
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	return &Batch{e: e, pb: e.db.NewIndexedBatch()}, nil
}

// Commit writes the batch. A non-zero applied records the Raft index the
// batch ends at, in the same Pebble batch, so a restart skips entries at or
// below it. If the batch fails (a read or the write) the engine is faulted:
// it refuses all further work, reads included, because its memory no
// longer matches its disk, until Recover reloads it. The error wraps
// ErrFaulted.
func (b *Batch) Commit(applied uint64) error {
	e := b.e
	defer e.mu.Unlock()
	defer b.pb.Close()
	for _, p := range b.parts {
		p.dirty = false
		if e.parts[p.id] != p {
			continue // deleted in this batch
		}
		b.buf = p.rec.Encode(b.buf[:0])
		b.set(keyspace.Partition(p.id), b.buf)
	}
	for _, r := range b.rows {
		r.dirty = false
		if r.deleted || e.parts[r.p.id] != r.p {
			continue
		}
		b.buf = r.rec.Encode(b.buf[:0])
		b.set(keyspace.Cursor(r.p.id, r.group), b.buf)
	}
	if applied > 0 {
		b.set(keyspace.Meta(keyspace.MetaApplied), binary.BigEndian.AppendUint64(nil, applied))
	}
	err := b.err
	if err == nil {
		opt := pebble.NoSync
		if e.opts.Sync {
			opt = e.durable()
		}
		err = e.commit(func() error { return b.pb.Commit(opt) })
	}
	if err != nil {
		e.setFault(fmt.Errorf("engine: commit: %w", err), true)
		return e.fault
	}
	if applied > 0 {
		e.applied = applied
	}
	if invariants.Enabled {
		e.checkTouched(b.parts, b.rows)
	}
	if len(b.compactions) > 0 {
		e.compactAsync(b.compactions)
	}
	return nil
}

// compactAsync compacts deleted ranges in the background. Compaction is
// physical housekeeping: it changes no logical state.
func (e *Engine) compactAsync(ranges [][2][]byte) {
	e.compacting.Add(1)
	go func() {
		defer e.compacting.Done()
		e.dbMu.RLock()
		defer e.dbMu.RUnlock()
		for _, r := range ranges {
			if err := e.db.Compact(context.Background(), r[0], r[1], false); err != nil {
				e.opts.Logger.Warn("engine: compact deleted range", "err", err)
				return
			}
		}
	}()
}

func (b *Batch) set(k, v []byte) {
	if err := b.pb.Set(k, v, nil); err != nil && b.err == nil {
		b.err = err
	}
}

func (b *Batch) del(k []byte) {
	if err := b.pb.Delete(k, nil); err != nil && b.err == nil {
		b.err = err
	}
}

func (b *Batch) delRange(lo, hi []byte) {
	if err := b.pb.DeleteRange(lo, hi, nil); err != nil && b.err == nil {
		b.err = err
	}
}

func (b *Batch) touchPartition(p *partition) {
	if !p.dirty {
		p.dirty = true
		b.parts = append(b.parts, p)
	}
}

func (b *Batch) touchRow(r *row) {
	if !r.dirty {
		r.dirty = true
		b.rows = append(b.rows, r)
	}
}

func (b *Batch) putQueue(q *queue) {
	rec := q.rec
	rec.Options = q.config.records()
	b.buf = rec.Encode(b.buf[:0])
	b.set(keyspace.Queue(q.name), b.buf)
}

func (b *Batch) putSub(q *queue, group string, s *sub) {
	b.buf = s.rec.Encode(b.buf[:0])
	b.set(keyspace.Sub(q.name, group), b.buf)
}

// setLease moves a row to a new lease (zero to release) and keeps the lease
// index in step.
func (b *Batch) setLease(r *row, lease ID, expiresAt, acquiredAt int64) {
	old := r.rec.Lease
	r.rec.Lease = lease
	r.rec.LeaseExpiresAt = expiresAt
	if lease != (ID{}) {
		r.rec.LeaseAcquiredAt = acquiredAt
	} else {
		r.rec.BatchEnd = -1
	}
	b.indexLease(r, old, lease)
	b.touchRow(r)
}

// indexLease moves r in the lease index from lease old to lease new (zero
// ids mean none).
func (b *Batch) indexLease(r *row, old, new ID) {
	e := b.e
	if old != (ID{}) {
		refs := e.leases[old]
		for i, ref := range refs {
			if ref.p == r.p && ref.group == r.group {
				refs = append(refs[:i], refs[i+1:]...)
				break
			}
		}
		if len(refs) == 0 {
			delete(e.leases, old)
		} else {
			e.leases[old] = refs
		}
	}
	if new != (ID{}) {
		e.leases[new] = append(e.leases[new], leaseRef{r.p, r.group})
	}
}

// queueFor returns the named queue, creating it with implicit defaults.
func (b *Batch) queueFor(name string, now int64, m *minter) *queue {
	if q := b.e.queues[name]; q != nil {
		return q
	}
	ns, task := impliedLabels(name)
	q := newQueue(name, keyspace.QueueRecord{ID: m.next(), CreatedAt: now, Namespace: ns, Task: task}, implicitConfig())
	b.e.queues[name] = q
	b.putQueue(q)
	return q
}

// partitionFor returns the named partition of q, creating it.
func (b *Batch) partitionFor(q *queue, name string, now int64, m *minter) *partition {
	if p := q.byName[name]; p != nil {
		return p
	}
	p := &partition{id: m.next(), q: q, cursors: map[string]*row{},
		rec: keyspace.PartitionRecord{Queue: q.name, Name: name, CreatedAt: now, LastWriteAt: 0}}
	q.addPartition(p)
	b.e.parts[p.id] = p
	b.touchPartition(p)
	return p
}

// deleteRow removes a cursor row.
func (b *Batch) deleteRow(r *row) {
	if r.rec.Lease != (ID{}) {
		b.setLease(r, ID{}, 0, 0)
	}
	r.deleted = true
	delete(r.p.cursors, r.group)
	b.del(keyspace.Cursor(r.p.id, r.group))
}

// sortedQueues returns the queues in name order.
func (e *Engine) sortedQueues() []*queue {
	qs := make([]*queue, 0, len(e.queues))
	for _, q := range e.queues {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	return qs
}
