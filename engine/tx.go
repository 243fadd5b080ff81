package engine

import (
	"fmt"

	"github.com/queenmq/queen/engine/keyspace"
)

// TxOp is one operation of a transaction: exactly one of Push and Ack.
type TxOp struct {
	Push *PushItem
	Ack  *AckItem
}

// TxResult reports a transaction. On failure nothing was written and
// Results is empty.
type TxResult struct {
	ID      ID // a fresh UUIDv7 naming this transaction
	Success bool
	Error   string
	Pushes  []PushResult // aligned with the push operations, in order
	Acks    []AckResult  // aligned with the ack operations, in order
	// Outbox is the rows an OutboxTxCmd wrote for its pushes to other
	// groups, aligned with its Away items.
	Outbox []OutboxRow
}

// transaction applies pushes and acks atomically (docs/semantics.md §13): every
// operation is checked before anything is written, and any failure (a push
// whose transaction id is already in its partition's dedup window, an ack
// with an invalid or expired lease, beyond its batch, already committed, or
// naming no message) rolls the whole bundle back. requiredLeases supplies
// the lease of acks that name none.
func (b *Batch) transaction(st Stamp, ops []TxOp, requiredLeases []ID) TxResult {
	now := st.Time
	m := &minter{seed: st.Seed}
	res := TxResult{ID: m.next()}
	var (
		pushes []PushItem
		acks   []AckItem
	)
	for _, op := range ops {
		switch {
		case op.Push != nil:
			pushes = append(pushes, *op.Push)
		case op.Ack != nil:
			acks = append(acks, b.resolveTxLease(now, *op.Ack, requiredLeases))
		}
	}
	if err := b.checkTxPushes(now, pushes); err != nil {
		res.Error = err.Error()
		return res
	}
	// Decide every ack group in turn against the rows as the earlier
	// groups would leave them, before writing anything.
	ackResults := make([]AckResult, len(acks))
	plans := b.groupAcks(acks, ackResults)
	after := map[*row]keyspace.CursorRecord{}
	for _, plan := range plans {
		if plan.reject == "" {
			rec, ok := after[plan.r]
			if !ok {
				rec = plan.r.rec
			}
			b.decide(now, plan, acks, ackResults, rec)
			after[plan.r] = nextCursor(rec, plan.decision)
		}
		if text, failed := plan.failed(ackResults); failed {
			res.Error = "ack failed: " + text
			return res
		}
	}
	res.Pushes = b.push(now, m, pushes)
	for _, plan := range plans {
		b.applyAck(now, m, plan, acks, ackResults)
	}
	res.Acks = ackResults
	res.Success = true
	return res
}

// resolveTxLease picks an ack's lease: its own, else the live lease on its
// row when that lease is one of requiredLeases, else the single required
// lease. With no hints at all the ack stays lease-less.
func (b *Batch) resolveTxLease(now int64, a AckItem, required []ID) AckItem {
	if a.Lease != (ID{}) || len(required) == 0 {
		return a
	}
	group := a.Group
	if group == "" {
		group = QueueMode
	}
	if p := b.e.parts[a.PartitionID]; p != nil {
		if r := p.cursors[group]; r != nil && r.leaseLive(now) {
			for _, l := range required {
				if l == r.rec.Lease {
					a.Lease = l
					return a
				}
			}
		}
	}
	if len(required) == 1 {
		a.Lease = required[0]
	}
	return a
}

// checkTxPushes rejects pushes that are invalid or whose transaction id is
// already inside its partition's dedup window: a duplicate is fatal in a
// transaction. A repeat inside the bundle is first-wins, not fatal.
func (b *Batch) checkTxPushes(now int64, pushes []PushItem) error {
	for _, it := range pushes {
		part := it.Partition
		if part == "" {
			part = DefaultPartition
		}
		if err := validatePushItem(it.Queue, part, it.TransactionID); err != nil {
			return err
		}
		if b.e.arriving(it.Queue) {
			return fmt.Errorf("%w: %s", ErrQueueNotFound, it.Queue)
		}
		if it.TransactionID == "" {
			continue
		}
		q := b.e.queues[it.Queue]
		if q == nil {
			continue
		}
		p := q.byName[part]
		window := q.config.Get(OptDedupWindowSeconds) * secondUS
		if p == nil || window == 0 {
			continue
		}
		if rec, ok := b.lookupTxn(p.id, it.TransactionID); ok && rec.CreatedAt >= now-window {
			return fmt.Errorf("duplicate transactionId %q in %s/%s", it.TransactionID, it.Queue, part)
		}
	}
	return nil
}
