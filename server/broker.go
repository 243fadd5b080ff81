package server

import (
	"context"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Reader is the local, read-only view of the broker's state the admin and
// DLQ routes use. Reads are served from this node's applied state; a route
// that needs read-your-writes across nodes calls Broker.Barrier first.
type Reader interface {
	Queues() ([]engine.QueueInfo, error)
	Queue(name string) (engine.QueueInfo, error)
	Cursors(now int64, group string) ([]engine.CursorInfo, error)
	Subscriptions() ([]engine.Subscription, error)
	ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error)
	DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error)
	MessageAt(part engine.ID, txn string) (engine.StoredMessage, error)
	ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error)
}

// Broker is the replicated broker as the HTTP edge sees it; raft.Node
// implements it. Every command is stamped by the leader (time, ids) and
// applied on every node; a follower forwards it to the leader and relays the
// answer. Errors are engine or raft sentinels, mapped in errors.go.
type Broker interface {
	Reader

	// Propose runs a command (raft.Proposer): handlers call it through
	// raft.Propose, which checks the answer's type. It returns
	// raft.ErrNotLeader, before proposing anything, on a follower: the
	// request is then forwarded to the leader.
	raft.Proposer

	// Barrier returns once this node has applied every command committed
	// before the call (a consistent read).
	Barrier(ctx context.Context) error
	// Watch returns a channel that receives (without blocking the sender)
	// whenever a command applied on this node may have made messages of
	// queue deliverable: a push to it, an ack or lease change on it. The
	// empty queue name watches every queue (discovery pops). cancel releases
	// the watch.
	Watch(queue string) (ch <-chan struct{}, cancel func())
	// Status reports the node's Raft role, leader and applied index.
	Status() raft.Status
}
