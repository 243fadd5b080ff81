package raft

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// The commands: each stamps and proposes one command and returns the
// engine's typed result.

// Configure creates or edits a queue.
func (n *Node) Configure(ctx context.Context, cmd engine.ConfigureCmd) (engine.QueueInfo, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeConfigure, Configure: cmd})
	info, _ := v.(engine.QueueInfo)
	return info, err
}

// DeleteQueue removes a queue.
func (n *Node) DeleteQueue(ctx context.Context, name string) (bool, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeDeleteQueue, Queue: name})
	existed, _ := v.(bool)
	return existed, err
}

// Push writes messages. The push is prepared here, in the caller's
// goroutine (ids minted, frames encoded and compressed), before it is
// proposed: the serial apply path then only assembles segments.
func (n *Node) Push(ctx context.Context, items []engine.PushItem) ([]engine.PushResult, error) {
	if err := n.leading(); err != nil {
		return nil, err
	}
	seed, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("raft: mint seed: %w", err)
	}
	pp, err := engine.PreparePush(items, engine.IDsFrom(engine.ID(seed)))
	if err != nil {
		return nil, err
	}
	v, err := n.apply(ctx, command.Command{Type: command.TypePushPrepared, Prepared: &pp})
	res, _ := v.([]engine.PushResult)
	return res, err
}

// Pop claims and delivers messages. A pop that the applied state shows would
// deliver nothing and change nothing is answered here without a command:
// long-polling consumers would otherwise fill the log with empty pops.
func (n *Node) Pop(ctx context.Context, cmd engine.PopCmd) (engine.PopResult, error) {
	if err := n.leading(); err != nil {
		return engine.PopResult{}, err
	}
	if n.engine.PopIsEmpty(time.Now().UnixMicro(), cmd) {
		group := cmd.Group
		if group == "" {
			group = engine.QueueMode
		}
		return engine.PopResult{Group: group}, nil
	}
	v, err := n.apply(ctx, command.Command{Type: command.TypePop, Pop: cmd})
	res, _ := v.(engine.PopResult)
	return res, err
}

// Ack acknowledges messages.
func (n *Node) Ack(ctx context.Context, items []engine.AckItem) ([]engine.AckResult, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeAck, Ack: items})
	res, _ := v.([]engine.AckResult)
	return res, err
}

// ExtendLease renews a lease.
func (n *Node) ExtendLease(ctx context.Context, lease engine.ID, seconds int64) (engine.ExtendResult, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeExtendLease, Lease: lease, Seconds: seconds})
	res, _ := v.(engine.ExtendResult)
	return res, err
}

// Transaction applies pushes and acks atomically.
func (n *Node) Transaction(ctx context.Context, ops []engine.TxOp, requiredLeases []engine.ID) (engine.TxResult, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeTransaction, Ops: ops, Leases: requiredLeases})
	res, _ := v.(engine.TxResult)
	return res, err
}

// Replay re-publishes a dead-lettered message.
func (n *Node) Replay(ctx context.Context, cmd engine.ReplayCmd) (engine.ReplayResult, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeReplay, Replay: cmd})
	res, _ := v.(engine.ReplayResult)
	return res, err
}

// DeleteDLQ removes the dead-letter rows of an address.
func (n *Node) DeleteDLQ(ctx context.Context, part engine.ID, txn, group string) (int, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeDeleteDLQ,
		Address: command.Address{PartitionID: part, TransactionID: txn, Group: group}})
	removed, _ := v.(int)
	return removed, err
}

// MoveToDLQ dead-letters a pending message (B3).
func (n *Node) MoveToDLQ(ctx context.Context, part engine.ID, txn, group, text string) (engine.AckResult, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeMoveToDLQ,
		Address: command.Address{PartitionID: part, TransactionID: txn, Group: group, Error: text}})
	res, _ := v.(engine.AckResult)
	return res, err
}

// Seek moves a group's cursors.
func (n *Node) Seek(ctx context.Context, cmd engine.SeekCmd) (int, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeSeek, Seek: cmd})
	updated, _ := v.(int)
	return updated, err
}

// DeleteGroup removes a group's cursors (and subscriptions).
func (n *Node) DeleteGroup(ctx context.Context, group, queue string, deleteMetadata bool) (int, bool, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeDeleteGroup,
		Group: command.GroupCmd{Group: group, Queue: queue, DeleteMetadata: deleteMetadata}})
	res, _ := v.(groupDeleted)
	return res.deleted, res.metadata, err
}

// UpdateSubscription rewrites a group's subscription timestamp.
func (n *Node) UpdateSubscription(ctx context.Context, group string, ts int64) (int, error) {
	v, err := n.apply(ctx, command.Command{Type: command.TypeUpdateSub,
		Group: command.GroupCmd{Group: group, Timestamp: ts}})
	updated, _ := v.(int)
	return updated, err
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

// Maintenance reports the cluster-wide maintenance switches (SEMANTICS §12).
func (n *Node) Maintenance() (push, pop bool) {
	return n.engine.ClusterValue(maintenanceKey(false)) != "", n.engine.ClusterValue(maintenanceKey(true)) != ""
}

// SetMaintenance turns push (pop false) or pop maintenance on or off for the
// whole cluster.
func (n *Node) SetMaintenance(ctx context.Context, pop, enabled bool) error {
	_, err := n.apply(ctx, command.Command{Type: command.TypeMaintenance,
		Maintenance: command.Maintenance{Pop: pop, Enabled: enabled}})
	return err
}
