package engine

import "slices"

// A Command is one mutation of the store: a value that carries everything
// it needs, applied by Batch.Apply with the leader's Stamp. Every command is
// defined here, with its Apply; package raft/command encodes them for the
// log (one table row each) and package raft proposes them. Applying reads
// only the command, the stamp and the store.
//
// Commands from outside the engine (the replication layer's own values:
// raft/command's Announce and Maintenance) implement Apply on the exported
// part of Batch (SetClusterValue).
type Command interface {
	// Apply runs the command in b. Call it through Batch.Apply.
	Apply(b *Batch, st Stamp) Result
}

// Result is what applying a command did.
type Result struct {
	// Value is the command's answer; its type is part of each command's
	// documentation (PushCmd: []PushResult, ...) and never varies, errors
	// included, so a proposer can check it (raft.Propose).
	Value any
	// Err is the command's own refusal (a queue not found, an invalid
	// argument). The batch is committed all the same: a refused command
	// writes nothing, and a replicated one must apply on every replica.
	Err error
	// Wake names the queues whose parked long-polls may deliver now; with
	// WakeAll, every queue's.
	Wake    []string
	WakeAll bool
	// finish completes the answer after the commit (a pop's messages are
	// read then, outside the serial apply path): Engine.Finish.
	finish func(e *Engine, r *Result) error
}

// Apply applies c with its stamp.
// A command that would change a queue frozen by a move is refused here,
// before it writes anything (freeze.go).
func (b *Batch) Apply(st Stamp, c Command) Result {
	if r, refused := b.movingRefusal(c); refused {
		return r
	}
	return c.Apply(b, st)
}

// Finish completes r after the batch that applied it committed: it reads
// what the command deferred (a pop's messages). Only the caller that wants
// the answer calls it, once; a replica that applies a command proposed
// elsewhere skips it, and pays nothing for the reads.
func (e *Engine) Finish(r *Result) error {
	if r.finish == nil {
		return nil
	}
	f := r.finish
	r.finish = nil
	return f(e, r)
}

// A Preparer is a command with a step that needs no state and is best done
// before proposing, off the serial apply path: Prepare returns the command
// to propose in its place. It may mint ids from seed, the seed the command
// is then stamped with.
type Preparer interface {
	Prepare(seed ID) (Command, error)
}

// A Skipper is a command that the applied state may show would change
// nothing: Skip then returns its answer, and the proposer answers with it
// without proposing (empty long-poll pops would otherwise fill the log).
// Skip reads the engine under its read lock; false means only that the
// command has to run.
type Skipper interface {
	Skip(e *Engine, now int64) (Result, bool)
}

// The commands. Each Value type is fixed.

// Apply configures a queue. Value: QueueInfo. It wakes the queue's parked
// pops (a changed delay or lease may make messages deliverable).
func (c ConfigureCmd) Apply(b *Batch, st Stamp) Result {
	v, err := b.configure(st, c)
	return Result{Value: v, Err: err, Wake: []string{c.Queue}}
}

// DeleteQueueCmd removes a queue with everything in it.
type DeleteQueueCmd struct{ Queue string }

// Apply deletes the queue. Value: bool, whether it existed.
func (c DeleteQueueCmd) Apply(b *Batch, _ Stamp) Result {
	return Result{Value: b.deleteQueue(c.Queue), Wake: []string{c.Queue}}
}

// PushCmd pushes messages as a client sent them. The proposer prepares it
// (Prepare) and proposes the *PreparedPush; applying a PushCmd prepares it
// in the batch, as logs written before prepared pushes require.
type PushCmd struct{ Items []PushItem }

// Apply pushes the items. Value: []PushResult. It wakes the queues written.
func (c PushCmd) Apply(b *Batch, st Stamp) Result {
	return pushResult(b.push(st.Time, &minter{seed: st.Seed}, c.Items))
}

// Prepare validates the items, mints their message ids from seed and
// encodes each partition's frames (preparePush).
func (c PushCmd) Prepare(seed ID) (Command, error) {
	m := &minter{seed: seed, n: preparedIDBase}
	pp, err := preparePush(c.Items, m.next)
	if err != nil {
		return nil, err
	}
	return &pp, nil
}

// Apply writes the prepared push. Value: []PushResult. It wakes the queues
// written.
func (pp *PreparedPush) Apply(b *Batch, st Stamp) Result {
	return pushResult(b.pushPrepared(st.Time, &minter{seed: st.Seed}, pp))
}

func pushResult(res []PushResult) Result {
	r := Result{Value: res}
	for i := range res {
		if res[i].Status == Queued {
			r.Wake = appendQueue(r.Wake, res[i].Queue)
		}
	}
	return r
}

// Apply claims and leases messages. Value: PopResult, whose Messages
// Engine.Finish reads after the commit.
func (c PopCmd) Apply(b *Batch, st Stamp) Result {
	v, err := b.pop(st, c)
	return Result{Value: v, Err: err, finish: finishPop}
}

func finishPop(e *Engine, r *Result) error {
	pr := r.Value.(PopResult)
	if err := e.fillPop(&pr); err != nil {
		return err
	}
	r.Value = pr
	return nil
}

// Skip answers a pop the applied state shows would deliver nothing and
// change nothing (popIsEmpty) with an empty PopResult.
func (c PopCmd) Skip(e *Engine, now int64) (Result, bool) {
	if !e.popIsEmpty(now, c) {
		return Result{}, false
	}
	group := c.Group
	if group == "" {
		group = QueueMode
	}
	return Result{Value: PopResult{Group: group}}, true
}

// AckCmd acknowledges messages.
type AckCmd struct{ Items []AckItem }

// Apply acks the items. Value: []AckResult. It wakes the queues where a
// lease was released or a message dead-lettered or dropped.
func (c AckCmd) Apply(b *Batch, st Stamp) Result {
	v := b.ack(st, c.Items)
	r := Result{Value: v}
	for i := range v {
		if v[i].LeaseReleased || v[i].DLQ || v[i].Dropped {
			r.Wake = appendQueue(r.Wake, v[i].Queue)
		}
	}
	return r
}

// ExtendLeaseCmd renews a lease.
type ExtendLeaseCmd struct {
	Lease   ID
	Seconds int64
}

// Apply renews the lease. Value: ExtendResult.
func (c ExtendLeaseCmd) Apply(b *Batch, st Stamp) Result {
	return Result{Value: b.extendLease(st, c.Lease, c.Seconds)}
}

// TransactionCmd applies pushes and acks atomically.
type TransactionCmd struct {
	Ops []TxOp
	// RequiredLeases supply the lease of acks that name none.
	RequiredLeases []ID
}

// Apply runs the transaction. Value: TxResult. It wakes every queue it
// pushed to or acked on.
func (c TransactionCmd) Apply(b *Batch, st Stamp) Result {
	v := b.transaction(st, c.Ops, c.RequiredLeases)
	r := Result{Value: v}
	for i := range v.Pushes {
		r.Wake = appendQueue(r.Wake, v.Pushes[i].Queue)
	}
	for i := range v.Acks {
		r.Wake = appendQueue(r.Wake, v.Acks[i].Queue)
	}
	return r
}

// Apply replays a dead letter. Value: ReplayResult. It wakes its queue.
func (c ReplayCmd) Apply(b *Batch, st Stamp) Result {
	v, err := b.replay(st, c)
	return Result{Value: v, Err: err, Wake: []string{v.Queue}}
}

// DeleteDLQCmd removes the dead-letter rows of an address (of one group
// when Group is set).
type DeleteDLQCmd struct {
	PartitionID   ID
	TransactionID string
	Group         string
}

// Apply deletes the rows. Value: int, the rows removed.
func (c DeleteDLQCmd) Apply(b *Batch, _ Stamp) Result {
	v, err := b.deleteDLQ(c.PartitionID, c.TransactionID, c.Group)
	return Result{Value: v, Err: err}
}

// MoveToDLQCmd dead-letters a pending message (docs/decisions.md B3).
type MoveToDLQCmd struct {
	PartitionID   ID
	TransactionID string
	Group         string
	Error         string
}

// Apply files the message. Value: AckResult. It wakes its queue.
func (c MoveToDLQCmd) Apply(b *Batch, st Stamp) Result {
	v, err := b.moveToDLQ(st, c.PartitionID, c.TransactionID, c.Group, c.Error)
	return Result{Value: v, Err: err, Wake: []string{v.Queue}}
}

// Apply moves the group's cursors. Value: int, the partitions updated. It
// wakes the queue.
func (c SeekCmd) Apply(b *Batch, st Stamp) Result {
	v, err := b.seek(st, c)
	return Result{Value: v, Err: err, Wake: []string{c.Queue}}
}

// DeleteGroupCmd removes a group's cursors on a queue ("" for every queue)
// and, with DeleteMetadata, its subscriptions.
type DeleteGroupCmd struct {
	Group          string
	Queue          string
	DeleteMetadata bool
}

// GroupDeleted is the answer of a DeleteGroupCmd.
type GroupDeleted struct {
	Cursors  int  // cursor rows removed
	Metadata bool // whether a subscription was removed
}

// Apply deletes the group. Value: GroupDeleted. It wakes every queue.
func (c DeleteGroupCmd) Apply(b *Batch, _ Stamp) Result {
	n, meta := b.deleteGroup(c.Group, c.Queue, c.DeleteMetadata)
	return Result{Value: GroupDeleted{Cursors: n, Metadata: meta}, WakeAll: true}
}

// UpdateSubscriptionCmd rewrites a group's subscription timestamp.
type UpdateSubscriptionCmd struct {
	Group     string
	Timestamp int64 // µs
}

// Apply rewrites the subscriptions. Value: int, how many.
func (c UpdateSubscriptionCmd) Apply(b *Batch, _ Stamp) Result {
	return Result{Value: b.updateSubscription(c.Group, c.Timestamp)}
}

// SweepCmd applies retention, eviction and the transaction-id index purge
// as of its stamp's time.
type SweepCmd struct{}

// Apply sweeps. Value: SweepResult.
func (SweepCmd) Apply(b *Batch, st Stamp) Result {
	v, err := b.sweep(st)
	return Result{Value: v, Err: err}
}

// SetClusterValue stores a replication-layer value (cluster.go): the
// commands of package raft/command apply through it.
func (b *Batch) SetClusterValue(name, value string) { b.setClusterValue(name, value) }

// ClusterValue reads a replication-layer value as the batch sees it, its
// own writes included ("" when unset).
func (b *Batch) ClusterValue(name string) string { return b.e.cluster[name] }

// HasPartition and HasLease report, as the batch sees the state, whether a
// partition exists and whether a lease holds rows (the lookups of package
// raft/command, which a node of several Raft groups asks each group).
func (b *Batch) HasPartition(id ID) bool { return b.e.parts[id] != nil }

// HasLease: see HasPartition.
func (b *Batch) HasLease(id ID) bool { return len(b.e.leases[id]) > 0 }

func appendQueue(qs []string, q string) []string {
	if q == "" || slices.Contains(qs, q) {
		return qs
	}
	return append(qs, q)
}
