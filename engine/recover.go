package engine

import (
	"errors"
	"fmt"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/fault"
	"github.com/queenmq/queen/engine/keyspace"
)

// Faults (ARCHITECTURE.md, "Storage faults").
//
// A batch that cannot commit ends the Pebble instance it was committed to,
// not the process: the engine is faulted, refuses writes (and reads, while
// its model may be ahead of its disk), and Recover closes the instance and
// opens it again. Pebble's WAL replay then yields exactly what reached the
// disk, and the applied index is part of it, so a Raft node knows which
// entries to apply again. A store that does not take writes at all (a full
// disk) is opened read-only: reads are served from what is on disk.

// Fault returns why the engine refuses writes (wrapping ErrFaulted), or
// why its writes are waiting for the disk (wrapping fault.ErrStalled), or
// nil when it is healthy. It does not wait for a running batch.
func (e *Engine) Fault() error {
	if p := e.faultMirror.Load(); p != nil {
		return *p
	}
	if err := e.mon.WALFailure(); err != nil {
		return fmt.Errorf("%w: engine: wal: %w", ErrFaulted, err)
	}
	return e.mon.Stalled()
}

// StorageErrors returns how many file operations of the store have failed
// since Open.
func (e *Engine) StorageErrors() uint64 { return e.mon.Errors() }

// checkWAL faults the engine once its WAL has failed: the batches committed
// since may be in memory only. Callers hold mu exclusively.
func (e *Engine) checkWAL() {
	if err := e.mon.WALFailure(); err != nil && e.fault == nil {
		e.setFault(fmt.Errorf("engine: wal: %w", err), true)
	}
}

// setFault faults the engine with cause; stale says the model may no longer
// match the disk. Callers hold mu exclusively.
func (e *Engine) setFault(cause error, stale bool) {
	if !errors.Is(cause, ErrFaulted) {
		cause = fmt.Errorf("%w: %w", ErrFaulted, cause)
	}
	if e.fault == nil && cause != errRestoring {
		e.opts.Logger.Error("engine: storage fault: writes stop until the store is reopened", "err", cause)
	}
	e.fault = cause
	e.faultMirror.Store(&cause)
	e.stale = e.stale || stale
}

func (e *Engine) clearFault() {
	e.fault, e.stale = nil, false
	e.faultMirror.Store(nil)
}

// commit runs one Pebble commit behind the fault gate: never on an instance
// whose WAL has failed (Pebble would panic holding its commit mutex), and
// with Pebble's fatal commit error returned as an error. An error after
// which the instance cannot even be closed goes to OnFatal.
func (e *Engine) commit(fn func() error) error {
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	if err := e.mon.WALFailure(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	err := fault.Commit(fn)
	if errors.Is(err, fault.ErrRestartRequired) {
		e.onFatal(err)
	}
	return err
}

func (e *Engine) onFatal(err error) {
	if e.opts.OnFatal != nil {
		e.opts.OnFatal(err)
		return
	}
	fault.Exit(err)
}

// roomNeeded is the free space a read-write open needs: Pebble flushes the
// WAL it replays before Open returns, and starts a new one.
func (e *Engine) roomNeeded() uint64 { return e.mon.WALBytes(e.dir) + 1<<20 }

func (e *Engine) openPebble(readOnly bool) (*pebble.DB, error) {
	return fault.Open(e.dir, func() *pebble.Options { return e.pebbleOptions(readOnly) })
}

// openDB opens the Pebble instance: read-write when the directory takes
// writes, read-only (and faulted) when it does not and a store exists.
func (e *Engine) openDB() error {
	fs := e.opts.FS
	if fs == nil {
		fs = defaultFS
	}
	if e.opts.ReadOnly {
		// Pebble would take its lock in an existing directory even when
		// there is no store in it, creating the LOCK file.
		desc, err := pebble.Peek(e.dir, fs)
		switch {
		case errors.Is(err, iofs.ErrNotExist) || (err == nil && !desc.Exists):
			return fmt.Errorf("%w: %s", ErrNoStore, e.dir)
		case err != nil:
			return fmt.Errorf("engine: open pebble: %w", err)
		}
		db, err := e.openPebble(true)
		if err != nil {
			return fmt.Errorf("engine: open pebble: %w", err)
		}
		e.db, e.readOnly = db, true
		return nil
	}
	if err := fs.MkdirAll(e.dir, 0o755); err != nil {
		return fmt.Errorf("engine: create dir: %w", err)
	}
	probe := e.mon.Probe(e.dir, e.roomNeeded())
	if probe != nil {
		desc, err := pebble.Peek(e.dir, fs)
		if err != nil || !desc.Exists {
			return fmt.Errorf("engine: create store: %w", probe)
		}
	}
	db, err := e.openPebble(probe != nil)
	if err != nil {
		return fmt.Errorf("engine: open pebble: %w", err)
	}
	e.db, e.readOnly = db, probe != nil
	if probe != nil {
		e.setFault(fmt.Errorf("opened read-only: %w", probe), false)
	}
	return nil
}

// Recover reopens a faulted engine. It closes the Pebble instance, opens it
// again (read-write when the directory takes writes, else read-only) and
// reloads the model, which then matches the disk at Applied, an index that
// may be behind the last batch acknowledged before the fault when batches
// were not synced; a Raft node applies the entries after it again. Recover
// returns nil once the engine is writable, and at once on a healthy engine;
// otherwise the engine stays faulted (still readable if it could reopen
// read-only) and a later call tries again.
func (e *Engine) Recover() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checkWAL()
	switch {
	case e.closed:
		return ErrClosed
	case e.fault == nil:
		return nil
	case e.snapshots.Load() > 0:
		return fmt.Errorf("%w (recovery waits for an open snapshot)", e.fault)
	}
	probe := e.mon.Probe(e.dir, e.roomNeeded())
	if probe != nil && !e.stale {
		return fmt.Errorf("%w: %w", ErrFaulted, probe) // already readable; nothing to gain yet
	}
	e.compacting.Wait()
	e.dbMu.Lock()
	if e.db != nil {
		if err := e.db.Close(); err != nil {
			e.opts.Logger.Warn("engine: close faulted store", "err", err)
		}
		e.db = nil
	}
	e.mon.Reset()
	readOnly := probe != nil
	db, err := e.openPebble(readOnly)
	if err != nil && !readOnly {
		readOnly = true
		probe = err
		db, err = e.openPebble(true)
	}
	if err != nil {
		e.dbMu.Unlock()
		e.setFault(fmt.Errorf("reopen: %w", err), true)
		return e.fault
	}
	e.db, e.readOnly = db, readOnly
	e.dbMu.Unlock()
	e.cache = newSegmentCache(e.opts.SegmentCacheEntries, e.opts.SegmentCacheBytes)
	if _, closer, err := e.db.Get(keyspace.Meta(restoringKey)); err == nil {
		closer.Close()
		// A restore failed halfway, as at Open: start empty; the node's
		// leader sends its snapshot again.
		if readOnly {
			e.setFault(errors.New("engine: a half-restored store waits for space to be wiped"), true)
			return e.fault
		}
		if err := e.wipe(nil); err != nil {
			return err
		}
	}
	if err := e.load(); err != nil {
		e.setFault(fmt.Errorf("reload: %w", err), true)
		return e.fault
	}
	e.stale = false
	if readOnly {
		e.setFault(fmt.Errorf("reopened read-only: %w", probe), false)
		return e.fault
	}
	e.clearFault()
	e.opts.Logger.Info("engine: storage recovered", "applied", e.applied)
	return nil
}
