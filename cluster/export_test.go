package cluster

import (
	"context"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// HoldOutbox stops (true) or resumes h's outbox deliveries: a transaction
// across groups then commits and leaves its rows undelivered, as a crash
// between the commit and the delivery would.
func HoldOutbox(h *Host, hold bool) { h.holdOutbox.Store(hold) }

// DeliverOutbox delivers rows of group home's outbox as the node that
// committed their transaction does, and returns each row's push result.
func DeliverOutbox(ctx context.Context, h *Host, home uint32, rows []engine.OutboxRow) []engine.PushResult {
	return h.deliverOutbox(ctx, home, rows)
}

// OutboxRows are the outbox rows of n's engine, oldest first.
func OutboxRows(n *raft.Node) ([]engine.OutboxRow, error) { return n.Engine().Outbox(1000) }

// SetMoveHook makes f run before each chunk of a move h runs is proposed;
// its error fails the move there (nil: none).
func SetMoveHook(h *Host, f func(queue string, seq uint32) error) { h.moveHook = f }

// SetDropHook makes f run once a move h runs has thawed its target, before
// it drops the source copy: a test holds the source copy there.
func SetDropHook(h *Host, f func(queue string)) { h.dropHook = f }

// Stopping is closed once h's Close has begun: a move hook that waits on
// it holds a move until its node is being stopped, as a kill part way
// would find it.
func Stopping(h *Host) <-chan struct{} { return h.done }
