package raft

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// A Proposer runs commands: a Node through Raft, a Local in process.
// Propose returns the command's result once it is applied, or the error
// that kept it from being (ErrNotLeader before anything was proposed, and
// the other errors of errors.go).
type Proposer interface {
	Propose(ctx context.Context, c engine.Command) (engine.Result, error)
}

// Propose runs c through p and returns its answer as a T, with the
// command's own error. An answer of another type is ErrResultType, never a
// silent zero value: every command's Value has one type (engine.Command).
// A refusal without a value (engine.ErrUnlistedCommand) is its error.
func Propose[T any](ctx context.Context, p Proposer, c engine.Command) (T, error) {
	var zero T
	r, err := p.Propose(ctx, c)
	if err != nil {
		return zero, err
	}
	if r.Value == nil && r.Err != nil {
		return zero, r.Err
	}
	v, ok := r.Value.(T)
	if !ok {
		return zero, fmt.Errorf("%w: %T answered %T, want %T", ErrResultType, c, r.Value, zero)
	}
	return v, r.Err
}

// ready is what every proposer does before a command is stamped: a
// command the applied state shows would change nothing is answered at once
// (skip set), and a command with a prepare step is prepared with the seed
// it is then stamped with. One seed per command.
func ready(e *engine.Engine, c engine.Command, now int64) (_ engine.Command, seed engine.ID, skip *engine.Result, err error) {
	if s, ok := c.(engine.Skipper); ok {
		if r, ok := s.Skip(e, now); ok {
			return nil, seed, &r, nil
		}
	}
	u, err := uuid.NewV7()
	if err != nil {
		return nil, seed, nil, fmt.Errorf("raft: mint seed: %w", err)
	}
	seed = engine.ID(u)
	if p, ok := c.(engine.Preparer); ok {
		if c, err = p.Prepare(seed); err != nil {
			return nil, seed, nil, err
		}
	}
	return c, seed, nil, nil
}

// Propose stamps c and proposes it through the group-commit loop
// (Proposer). Preparing (a push's compression) happens here, in the
// caller's goroutine, before the command joins the queue. A lookup
// (command.Lookup) is answered as a leader read (LeaderRead): a leader
// elected a moment ago may not have applied what its predecessor
// answered, and one deposed a moment ago may not know what its successor
// answered.
func (n *Node) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	if err := n.leading(); err != nil {
		return engine.Result{}, err
	}
	if _, ok := c.(command.Lookup); ok {
		if err := n.LeaderRead(ctx); err != nil {
			return engine.Result{}, err
		}
	}
	c, seed, skip, err := ready(n.engine, c, time.Now().UnixMicro())
	switch {
	case err != nil:
		return engine.Result{}, err
	case skip != nil:
		return *skip, nil
	}
	return n.propose(ctx, c, seed)
}

// propose stamps the ready command c with seed and the time, queues it for
// the group-commit loop and waits for its result. A command refused
// because the leader is handing over (ErrLeadershipTransfer: nothing was
// appended) is proposed once more when the transfer is over: here if this
// node still leads, else it is answered ErrNotLeader, which the edge
// forwards to the new leader.
func (n *Node) propose(ctx context.Context, c engine.Command, seed engine.ID) (engine.Result, error) {
	return n.submit(ctx, command.Stamped{Stamp: engine.Stamp{Seed: seed}, Cmd: c})
}

// submit proposes s, stamped with the time here, and proposes it once more
// after a leadership transfer (propose).
func (n *Node) submit(ctx context.Context, s command.Stamped) (engine.Result, error) {
	r, err := n.proposeOnce(ctx, s)
	if !errors.Is(err, ErrLeadershipTransfer) {
		return r, err
	}
	if err := n.awaitTransfer(ctx); err != nil {
		return engine.Result{}, err
	}
	return n.proposeOnce(ctx, s)
}

// awaitTransfer waits, up to an election timeout (how long raft gives a
// transfer), until this node no longer leads; nil when it still leads,
// the error a caller may forward on otherwise.
func (n *Node) awaitTransfer(ctx context.Context) error {
	deadline := time.Now().Add(n.opts.ElectionTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if err := n.leading(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return n.leading()
}

func (n *Node) proposeOnce(ctx context.Context, s command.Stamped) (engine.Result, error) {
	if err := n.checkVersion(s); err != nil {
		return engine.Result{}, err
	}
	now := time.Now()
	s.Stamp.Time = now.UnixMicro()
	p := &proposal{cmd: s, done: make(chan proposed, 1), at: now}
	select {
	case n.proposals <- p:
	case <-ctx.Done():
		return engine.Result{}, ctx.Err()
	case <-n.done:
		return engine.Result{}, ErrShutdown
	}
	select {
	case r := <-p.done:
		return r.res, r.err
	case <-ctx.Done():
		// The command may still be applied: its outcome is unknown.
		return engine.Result{}, ctx.Err()
	case <-n.done:
		return engine.Result{}, ErrShutdown
	}
}

// The reads: served from this node's applied state.

// Queues describes every queue.
func (n *Node) Queues() ([]engine.QueueInfo, error) { return n.engine.Queues() }

// Queue describes one queue.
func (n *Node) Queue(name string) (engine.QueueInfo, error) { return n.engine.Queue(name) }

// Cursors lists cursor rows.
func (n *Node) Cursors(now int64, group string) ([]engine.CursorInfo, error) {
	return n.engine.Cursors(now, group)
}

// Subscriptions lists stored subscriptions.
func (n *Node) Subscriptions() ([]engine.Subscription, error) { return n.engine.Subscriptions() }

// ListDLQ pages dead-letter rows.
func (n *Node) ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error) {
	return n.engine.ListDLQ(f)
}

// DeadLettersAt returns the dead-letter rows of an address.
func (n *Node) DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error) {
	return n.engine.DeadLettersAt(part, txn)
}

// MessageAt finds a retained message by address.
func (n *Node) MessageAt(part engine.ID, txn string) (engine.StoredMessage, error) {
	return n.engine.MessageAt(part, txn)
}

// QueueConfig returns a queue's effective configuration without building a
// full description (the edge reads it on every push to an encrypted queue).
func (n *Node) QueueConfig(name string) (engine.Config, bool) { return n.engine.QueueConfig(name) }

// ListMessages pages retained messages, newest first.
func (n *Node) ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error) {
	return n.engine.ListMessages(f)
}

// Maintenance reports the cluster-wide maintenance switches (docs/semantics.md §12),
// which command.Maintenance sets.
func (n *Node) Maintenance() (push, pop bool) { return maintenance(n.engine) }

func maintenance(e *engine.Engine) (push, pop bool) {
	return e.ClusterValue(command.MaintenanceKey(false)) != "", e.ClusterValue(command.MaintenanceKey(true)) != ""
}

// StreamQueryByID returns a registered streaming query.
func (n *Node) StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error) {
	return n.engine.StreamQueryByID(id)
}

// StreamState reads a streaming query's state shard.
func (n *Node) StreamState(f engine.StateFilter) ([]engine.StateRow, error) {
	return n.engine.StreamState(f)
}

// Traces returns a message's traces.
func (n *Node) Traces(part engine.ID, txn string) ([]engine.Trace, error) {
	return n.engine.Traces(part, txn)
}

// TracesByName pages the traces carrying a name.
func (n *Node) TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error) {
	return n.engine.TracesByName(name, limit, offset)
}

// TraceNames pages the distinct trace names.
func (n *Node) TraceNames(limit, offset int) ([]engine.TraceName, int, error) {
	return n.engine.TraceNames(limit, offset)
}
