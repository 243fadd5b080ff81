package logstore

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/queenmq/queen/engine/fault"
)

// Faults (ARCHITECTURE.md, "Storage faults").
//
// A commit that fails ends the Pebble instance it went to, not the store:
// the store is faulted, appends and deletions fail at once with ErrFaulted,
// and a healer goroutine reopens the instance (Pebble's crash recovery, in
// process) once a probe says the directory takes writes. Reads go on from
// the faulted instance meanwhile. What each call does while faulted follows
// from what hashicorp/raft does with its error:
//
//   - StoreLogs fails: raft's leader answers the entries with the error and
//     steps down; a follower rejects the append and the leader retries.
//   - Set and SetUint64 wait for the store to heal: raft panics when it
//     cannot save its current term.
//   - GetLog retries a read that failed on an I/O error: raft panics when it
//     cannot read a committed entry.
//
// After a reopen the store deletes the entries above the last append it
// acknowledged. Raft was told they failed and will write those indexes
// again, but a batch whose fsync failed may have reached the file anyway,
// and a stale entry above the new ones would survive the next restart.

// Healing paces: the first reopen is tried after minHeal, then each failed
// attempt doubles the pause up to maxHeal.
const (
	minHeal = 20 * time.Millisecond
	maxHeal = 2 * time.Second
)

// Fault returns why the store refuses writes (wrapping ErrFaulted), why a
// log read is being retried, or why its writes are waiting for the disk
// (wrapping fault.ErrStalled); nil when it is healthy.
func (s *Store) Fault() error {
	if p := s.fault.Load(); p != nil {
		return *p
	}
	if p := s.readFault.Load(); p != nil {
		return *p
	}
	return s.mon.Stalled()
}

// StorageErrors returns how many file operations of the store have failed
// since Open.
func (s *Store) StorageErrors() uint64 { return s.mon.Errors() }

func (s *Store) writable() error {
	if p := s.fault.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Store) logf(format string, args ...any) {
	if s.opts.Logger != nil {
		s.opts.Logger(format, args...)
	}
}

// commit runs one Pebble commit behind the fault gate: never on an instance
// whose WAL has failed (Pebble would panic holding its commit mutex), and
// with Pebble's fatal commit error returned as an error. An error after
// which the instance cannot even be closed goes to OnFatal. Callers hold
// writeMu.
func (s *Store) commit(fn func() error) error {
	if err := s.mon.WALFailure(); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	err := fault.Commit(fn)
	if errors.Is(err, fault.ErrRestartRequired) {
		if s.opts.OnFatal != nil {
			s.opts.OnFatal(err)
		} else {
			fault.Exit(err)
		}
	}
	return err
}

// setFault faults the store with err (the first cause is kept), starts the
// healer, and returns err wrapping ErrFaulted.
func (s *Store) setFault(err error) error {
	if !errors.Is(err, ErrFaulted) {
		err = fmt.Errorf("%w: %w", ErrFaulted, err)
	}
	if !s.fault.CompareAndSwap(nil, &err) {
		return err
	}
	s.logf("storage fault, writes fail until the store reopens: %v", err)
	s.healMu.Lock()
	defer s.healMu.Unlock()
	if !s.healing {
		s.healing = true
		s.healed = make(chan struct{})
		s.healers.Add(1)
		go s.heal(time.Now())
	}
	return err
}

// waitHealed waits until the store is healthy; false when it closed first.
func (s *Store) waitHealed() bool {
	s.healMu.Lock()
	ch := s.healed
	s.healMu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-s.stop:
		return false
	}
}

// heal reopens the store until it is writable again or closes.
func (s *Store) heal(since time.Time) {
	defer s.healers.Done()
	wait := fault.Backoff{Min: minHeal, Max: maxHeal}
	var last string
	for {
		select {
		case <-time.After(wait.Next()):
		case <-s.stop:
			return
		}
		err := s.reopen()
		if err == nil {
			break
		}
		if errors.Is(err, ErrClosed) {
			return
		}
		if msg := err.Error(); msg != last {
			s.logf("still faulted: %v", err)
			last = msg
		}
	}
	s.healMu.Lock()
	s.fault.Store(nil)
	s.healing = false
	close(s.healed)
	s.healed = nil
	s.healMu.Unlock()
	s.logf("storage recovered after %v", time.Since(since).Round(time.Millisecond))
}

// reopen closes the Pebble instance and opens it again: read-write when the
// directory takes writes, else read-only (the store keeps serving reads and
// the healer tries again). A read-write open ends with reconcile.
func (s *Store) reopen() error {
	probe := s.mon.Probe(s.dir, s.roomNeeded())
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case probe != nil && s.readOnly && s.db != nil:
		return probe // readable already; nothing to gain yet
	}
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			s.logf("close faulted store: %v", err)
		}
		s.db = nil
	}
	s.mon.Reset()
	readOnly := probe != nil
	db, err := s.openPebble(readOnly)
	if err != nil && !readOnly {
		readOnly, probe = true, err
		db, err = s.openPebble(true)
	}
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	s.db, s.readOnly = db, readOnly
	if readOnly {
		return fmt.Errorf("reopened read-only: %w", probe)
	}
	return s.reconcile()
}

// reconcile makes the reopened disk agree with what raft was told, in
// every group: entries above the last acknowledged append are deleted.
// Callers hold closeMu exclusively.
func (s *Store) reconcile() error {
	s.logsMu.Lock()
	defer s.logsMu.Unlock()
	ids := make([]uint32, 0, len(s.logs))
	for id := range s.logs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if err := s.logs[id].reconcile(); err != nil {
			return fmt.Errorf("group %d: %w", id, err)
		}
	}
	return nil
}

func (g *Log) reconcile() error {
	s := g.s
	first, last, err := g.bounds()
	if err != nil {
		return fmt.Errorf("read log bounds: %w", err)
	}
	if acked := g.last.Load(); last > acked {
		b := s.db.NewBatch()
		defer b.Close()
		if err := b.DeleteRange(g.ks.logKey(acked+1), g.ks.logEnd(last), nil); err != nil {
			return err
		}
		if err := s.commit(func() error { return b.Commit(s.writeOpts) }); err != nil {
			return fmt.Errorf("delete unacknowledged logs %d-%d: %w", acked+1, last, err)
		}
		s.logf("deleted logs %d-%d: their append failed", acked+1, last)
		if first, last, err = g.bounds(); err != nil {
			return fmt.Errorf("read log bounds: %w", err)
		}
	} else if last < acked {
		s.logf("logs %d-%d were acknowledged but are gone after the reopen", last+1, acked)
	}
	g.first.Store(first)
	g.last.Store(last)
	return nil
}
