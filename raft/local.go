package raft

import (
	"context"
	"log/slog"
	"sync"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// Local runs commands on one engine without replication, through the same
// path a Node's commands take once Raft has committed them: skipped or
// prepared and stamped (ready), encoded into a log entry and decoded again
// (package command), applied by the FSM's decode-and-apply loop with its
// wake-ups, then finished. Only consensus and group commit are missing: each
// command is an entry of its own. The server's tests use it in place of a
// Node, so they run the production command path; its clock is the caller's,
// so leases expire without sleeping.
type Local struct {
	e      *engine.Engine
	fsm    *fsm
	notify *notifier
	now    func() int64

	mu   sync.Mutex // one command at a time, in stamp order
	last int64
}

// NewLocal runs commands on e, stamping them with now (unix µs; a stamp
// never repeats or goes back, whatever now does).
func NewLocal(e *engine.Engine, now func() int64, log *slog.Logger) *Local {
	if log == nil {
		log = slog.Default()
	}
	n := newNotifier()
	return &Local{e: e, fsm: newFSM(e, nil, n, log), notify: n, now: now}
}

// Propose implements Proposer.
func (l *Local) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	if err := ctx.Err(); err != nil {
		return engine.Result{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c, seed, skip, err := ready(l.e, c, max(l.now(), l.last+1))
	switch {
	case err != nil:
		return engine.Result{}, err
	case skip != nil:
		return *skip, nil
	}
	return l.apply(c, seed)
}

// apply stamps the ready command c with seed and the next time and runs it
// as a log entry of its own. l.mu is held.
func (l *Local) apply(c engine.Command, seed engine.ID) (engine.Result, error) {
	now := max(l.now(), l.last+1)
	l.last = now
	entry := command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Time: now, Seed: seed}, Cmd: c}})
	out := make([]any, 1)
	log := &hraft.Log{Index: l.e.Applied() + 1, Type: hraft.LogCommand, Data: entry}
	if err := l.fsm.apply([]*hraft.Log{log}, out); err != nil {
		return engine.Result{}, err
	}
	r := out[0].([]engine.Result)[0]
	if err := l.e.Finish(&r); err != nil {
		return engine.Result{}, err
	}
	return r, nil
}

// Watch is Node.Watch: the channel receives after a command applied here
// may have made messages of queue deliverable.
func (l *Local) Watch(queue string) (<-chan struct{}, func()) { return l.notify.watch(queue) }

// Watchers returns the number of registered watches (parked long-polls).
func (l *Local) Watchers() int { return l.notify.count() }

// Maintenance reports the maintenance switches.
func (l *Local) Maintenance() (push, pop bool) { return maintenance(l.e) }
