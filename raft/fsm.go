package raft

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/logstore"
)

// fsm is the thin, deterministic adapter between Raft and the engine: a
// whole Raft batch becomes one engine batch, one Pebble batch, whose applied
// index is written with it. Entries at or below the engine's applied index
// are already in the store and are skipped, so a restart never applies a
// command twice and never replays the full history.
//
// A batch the engine cannot commit (a storage fault) is answered with the
// fault and nothing of it is applied; raft counts it applied all the same.
// So the fsm remembers the last index raft handed over (fed), and before it
// applies anything else, or snapshots, it applies the entries between the
// engine's applied index and fed again, read back from the Raft log
// (catchUp): a replica never skips a command. See ARCHITECTURE.md, "Storage
// faults".
type fsm struct {
	e      *engine.Engine
	logs   *logstore.Log // where catchUp reads entries back
	notify *notifier
	log    *slog.Logger
	// progress wakes WaitApplied after every commit and restore.
	progress progress
	// faulted wakes the node's healer (buffered; a send never blocks).
	faulted chan struct{}
	// pushed counts the bytes of pushes applied, by queue: the load
	// signal's byte rates (Node.PushedBytes).
	pushed pushedBytes

	// mu serialises applying, catching up and recovering the engine.
	// fed is the last index raft handed over; written under mu.
	mu  sync.Mutex
	fed atomic.Uint64
}

func newFSM(e *engine.Engine, logs *logstore.Log, notify *notifier, log *slog.Logger) *fsm {
	f := &fsm{e: e, logs: logs, notify: notify, log: log, faulted: make(chan struct{}, 1)}
	f.fed.Store(e.Applied())
	return f
}

// entryFault answers every command of an entry that was not applied.
type entryFault struct{ err error }

// catchUpBatch caps the entries catchUp applies in one engine batch.
const catchUpBatch = 64

var _ hraft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *hraft.Log) any { return f.ApplyBatch([]*hraft.Log{l})[0] }

// ApplyBatch applies logs in one engine batch, after catching up with any
// entries a fault left unapplied. If the engine cannot apply them, every
// entry is answered with the fault, and the healer is woken.
func (f *fsm) ApplyBatch(logs []*hraft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	err := f.catchUp()
	if err == nil {
		err = f.apply(logs, out)
	}
	f.fed.Store(max(f.fed.Load(), logs[len(logs)-1].Index))
	if err != nil {
		f.wake()
		for i := range out {
			out[i] = entryFault{err}
		}
	}
	return out
}

// apply applies logs in one engine batch and commits it; out, when not
// nil, receives each entry's results ([]engine.Result, one per command).
// It is a decode-and-apply loop: what each command does, answers and wakes
// is the command's own (engine.Command).
func (f *fsm) apply(logs []*hraft.Log, out []any) error {
	applied := f.e.Applied()
	b, err := f.e.Begin()
	if err != nil {
		return err
	}
	var (
		last    uint64
		touched touchSet
	)
	for i, l := range logs {
		if l.Index <= applied {
			continue
		}
		last = l.Index
		if l.Type != hraft.LogCommand {
			continue
		}
		cmds, err := command.DecodeEntry(l.Data)
		if err != nil {
			// Never skip a command: an entry this binary cannot read means
			// it must not serve (an older binary in a newer cluster).
			panic(fmt.Sprintf("raft: fsm: log %d: %v", l.Index, err))
		}
		results := make([]engine.Result, len(cmds))
		for j := range cmds {
			r := b.Apply(cmds[j].Stamp, cmds[j].Cmd)
			f.pushed.count(cmds[j].Cmd)
			touched.add(r.Wake...)
			touched.all = touched.all || r.WakeAll
			results[j] = r
		}
		if out != nil {
			out[i] = results
		}
	}
	if err := b.Commit(last); err != nil {
		return err
	}
	f.progress.advance()
	f.notify.notify(touched)
	return nil
}

// catchUp applies the entries raft handed over while the engine could not
// apply them, reading them back from the Raft log. The log still holds
// them: a snapshot, which lets raft drop entries, is refused while the
// engine is behind, and the engine's last snapshot was synced, so its
// applied index never falls below it.
func (f *fsm) catchUp() error {
	fed := f.fed.Load()
	for next := f.e.Applied() + 1; next <= fed; next = f.e.Applied() + 1 {
		n := min(fed-next+1, catchUpBatch)
		logs := make([]*hraft.Log, n)
		for i := range logs {
			logs[i] = new(hraft.Log)
			if err := f.logs.GetLog(next+uint64(i), logs[i]); err != nil {
				return fmt.Errorf("%w: catch up: read log %d: %w", ErrFaulted, next+uint64(i), err)
			}
		}
		if err := f.apply(logs, nil); err != nil {
			return err
		}
	}
	return nil
}

// behind reports whether the engine cannot apply, or has not applied every
// entry raft handed over.
func (f *fsm) behind() bool {
	return errors.Is(f.e.Fault(), ErrFaulted) || f.e.Applied() < f.fedIndex()
}

func (f *fsm) fedIndex() uint64 { return f.fed.Load() }

// heal reopens a faulted engine and catches up.
func (f *fsm) heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.e.Recover(); err != nil {
		return err
	}
	if err := f.catchUp(); err != nil {
		return err
	}
	f.notify.notify(touchSet{all: true})
	return nil
}

func (f *fsm) wake() {
	select {
	case f.faulted <- struct{}{}:
	default:
	}
}

// Snapshot makes the engine durable up to its applied index and returns a
// reference to it (see snapstore.go): its cost does not grow with the store.
// Raft never calls Snapshot concurrently with Apply. It is refused while the
// engine is behind what raft handed over: raft would then drop log entries
// the engine still needs.
func (f *fsm) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.catchUp(); err != nil {
		f.wake()
		return nil, err
	}
	if err := f.e.Sync(); err != nil {
		f.wake()
		return nil, err
	}
	return refSnapshot(f.e.Applied()), nil
}

// Restore replaces the engine's store with a snapshot.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.e.Restore(rc); err != nil {
		return fmt.Errorf("raft: restore snapshot: %w", err)
	}
	f.fed.Store(f.e.Applied())
	f.progress.advance()
	f.notify.notify(touchSet{all: true})
	return nil
}

// refSnapshot is a reference to the engine at an index.
type refSnapshot uint64

func (r refSnapshot) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(encodeRef(uint64(r))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (refSnapshot) Release() {}

// pushedBytes counts the bytes of pushes a replica applied, by queue (the
// frames' raw length). Not state: it starts at zero when the node starts,
// which the first sample, having no rate, absorbs.
type pushedBytes struct {
	mu sync.Mutex
	by map[string]uint64
}

// count adds a prepared push's bytes; any other command counts nothing.
func (p *pushedBytes) count(c engine.Command) {
	pp, ok := c.(*engine.PreparedPush)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]uint64{}
	}
	for i := range pp.Groups {
		p.by[pp.Groups[i].Queue] += uint64(pp.Groups[i].Body.RawLen)
	}
}

func (p *pushedBytes) snapshot() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.by)
}
