package engine

import (
	"fmt"

	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/engine/segment"
	"github.com/queenmq/queen/internal/invariants"
)

// AckItem acknowledges one message for one consumer group.
type AckItem struct {
	TransactionID string
	PartitionID   ID
	Group         string // "" means QueueMode
	Status        cursor.Status
	Lease         ID // zero: a lease-less ack, accepted without validation (docs/decisions.md C10)
	Error         string
}

// AckResult reports one ack item, aligned with the input (docs/decisions.md C7).
type AckResult struct {
	TransactionID string
	Success       bool
	Error         string // why Success is false
	Noop          bool   // already committed, acked completed: harmless
	LeaseReleased bool   // this call released the item's (partition, lease) lease
	DLQ           bool   // this item was dead-lettered
	Dropped       bool   // this item was dropped (dead-lettering off)
	Queue         string
	Partition     string
}

// Ack error texts, part of the wire contract.
const (
	errTextInvalidLease   = "invalid or expired lease"
	errTextNotFound       = "Message not found"
	errTextStale          = "already committed: the cursor moved past this message before this ack"
	errTextBeyondBatch    = "message is beyond the leased batch"
	errTextNoCursor       = "consumer group has no cursor on this partition"
	errTextPartition      = "partition not found"
	errTextRetryExhausted = "Retries exhausted"
)

// ack applies ack items. Items are grouped by (partition, group, lease) in
// first-appearance order; each group is one clamp decision (docs/semantics.md §6.3),
// decided and applied in turn, so a later group on the same cursor row sees
// what an earlier one did.
func (b *Batch) ack(st Stamp, items []AckItem) []AckResult {
	m := &minter{seed: st.Seed}
	results := make([]AckResult, len(items))
	for _, plan := range b.groupAcks(items, results) {
		if plan.reject == "" {
			b.decide(st.Time, plan, items, results, plan.r.rec)
		}
		b.applyAck(st.Time, m, plan, items, results)
	}
	return results
}

// ackPlan is one (partition, group, lease) decision, computed without
// writing anything.
type ackPlan struct {
	r        *row
	lease    ID
	items    []int // indexes into the call's items, resolved
	missing  []int // items whose transaction id names no message
	offsets  []cursor.Item
	outcomes []cursor.Outcome
	decision cursor.Decision
	reject   string // every item of the group fails with this
}

type ackKey struct {
	part  ID
	group string
	lease ID
}

// groupAcks splits items into plans in first-appearance order and finds
// each plan's cursor row. It only reads.
func (b *Batch) groupAcks(items []AckItem, results []AckResult) []*ackPlan {
	var plans []*ackPlan
	index := map[ackKey]*ackPlan{}
	for i := range items {
		it := &items[i]
		results[i].TransactionID = it.TransactionID
		group := it.Group
		if group == "" {
			group = QueueMode
		}
		k := ackKey{it.PartitionID, group, it.Lease}
		plan := index[k]
		if plan == nil {
			plan = &ackPlan{lease: it.Lease}
			index[k] = plan
			plans = append(plans, plan)
			p := b.e.parts[it.PartitionID]
			switch {
			case p == nil:
				plan.reject = errTextPartition
			case p.cursors[group] == nil:
				plan.reject = errTextNoCursor
			default:
				plan.r = p.cursors[group]
			}
		}
		plan.items = append(plan.items, i)
		if plan.r != nil {
			results[i].Queue, results[i].Partition = plan.r.p.q.name, plan.r.p.rec.Name
		}
	}
	return plans
}

// decide validates a plan's lease against rec (its row as it stands when the
// plan's turn comes), resolves its transaction ids and runs the clamp. It
// only reads.
func (b *Batch) decide(now int64, plan *ackPlan, items []AckItem, results []AckResult, rec keyspace.CursorRecord) {
	r := plan.r
	if plan.lease != (ID{}) && (rec.Lease != plan.lease || rec.LeaseExpiresAt <= now) {
		plan.reject = errTextInvalidLease
		return
	}
	// A lease-holding ack names messages of its leased span, which the pop
	// just read: resolve them from the span's (cached) frames, and only what
	// is not there (stale acks) through the transaction-id index.
	var inSpan map[string]Offset
	if plan.lease != (ID{}) && rec.BatchEnd > rec.Committed {
		want := make(map[string]int, len(plan.items))
		for _, i := range plan.items {
			want[items[i].TransactionID] = i
		}
		inSpan = make(map[string]Offset, len(plan.items))
		err := b.e.readRange(b.pb, r.p, Offset(rec.Committed+1), Offset(rec.BatchEnd), func(off Offset, f *segment.Frame, _ int64) error {
			if i, ok := want[string(f.TransactionID)]; ok {
				inSpan[items[i].TransactionID] = off
			}
			return nil
		})
		if err != nil {
			b.fail(err)
		}
	}
	resolved := plan.items[:0:0]
	for _, i := range plan.items {
		off, ok := inSpan[items[i].TransactionID]
		if !ok {
			txn, found := b.lookupTxn(r.p.id, items[i].TransactionID)
			if !found {
				results[i].Error = errTextNotFound
				plan.missing = append(plan.missing, i)
				continue
			}
			off = Offset(txn.Offset)
		}
		resolved = append(resolved, i)
		plan.offsets = append(plan.offsets, cursor.Item{Offset: off, Status: items[i].Status})
	}
	plan.items = resolved
	plan.outcomes = make([]cursor.Outcome, len(plan.offsets))
	state := cursor.State{
		Committed:  Offset(rec.Committed),
		RetryCount: rec.RetryCount,
	}
	if plan.lease != (ID{}) {
		state.SpanEnd, state.BatchEnd = Offset(rec.BatchEnd), Offset(rec.BatchEnd)
	} else {
		// Lease-less (docs/decisions.md C10): any stored message past the cursor may be acked;
		// the batch completes at its recorded end, or at the head when no
		// batch is recorded.
		state.SpanEnd = r.p.last()
		state.BatchEnd = state.SpanEnd
		if rec.BatchEnd > rec.Committed {
			state.BatchEnd = Offset(rec.BatchEnd)
		}
	}
	cfg := r.p.q.config
	policy := cursor.Policy{RetryLimit: uint32(min(cfg.Get(OptRetryLimit), 1<<31)), DeadLetter: cfg.DeadLetterEnabled()}
	plan.decision = cursor.Clamp(state, policy, plan.offsets, plan.outcomes)
	if invariants.Enabled {
		if err := cursor.Verify(state, policy, plan.offsets, plan.outcomes, plan.decision); err != nil {
			panic(fmt.Sprintf("engine: invariant: clamp of %x/%s: %v", r.p.id, r.group, err))
		}
	}
}

// nextCursor is the cursor row after a decision: the part of applyAck that
// only moves numbers, shared with a transaction's dry run.
func nextCursor(rec keyspace.CursorRecord, d cursor.Decision) keyspace.CursorRecord {
	rec.Committed = max(rec.Committed, int64(d.Committed))
	rec.RetryCount = d.RetryCount
	if d.LeaseReleased {
		rec.Lease, rec.LeaseExpiresAt, rec.BatchEnd = ID{}, 0, -1
	}
	return rec
}

// failed reports whether a plan would reject any of its items: what rolls a
// transaction back (docs/semantics.md §13).
func (plan *ackPlan) failed(results []AckResult) (string, bool) {
	if plan.reject != "" {
		return plan.reject, true
	}
	if len(plan.missing) > 0 {
		return errTextNotFound, true
	}
	for _, o := range plan.outcomes {
		switch o {
		case cursor.Stale:
			return errTextStale, true
		case cursor.OutOfSpan:
			return errTextBeyondBatch, true
		}
	}
	return "", false
}

// applyAck writes a plan's decision and fills its items' results.
func (b *Batch) applyAck(now int64, m *minter, plan *ackPlan, items []AckItem, results []AckResult) {
	if plan.reject != "" {
		for _, i := range plan.items {
			results[i].Error = plan.reject
		}
		return
	}
	r, d := plan.r, plan.decision
	for n, i := range plan.items {
		res := &results[i]
		switch plan.outcomes[n] {
		case cursor.Applied, cursor.Superseded:
			res.Success = true
		case cursor.Noop:
			res.Success, res.Noop = true, true
		case cursor.Stale:
			res.Error = errTextStale
		case cursor.OutOfSpan:
			res.Error = errTextBeyondBatch
		}
		res.LeaseReleased = d.LeaseReleased
	}
	old := r.rec
	next := nextCursor(old, d)
	if next.Committed > old.Committed {
		next.TotalConsumed += next.Committed - old.Committed
		next.LastConsumedAt = now
	}
	switch d.Action {
	case cursor.Complete:
		next.AttemptOffset, next.AttemptCount = -1, 0
	case cursor.Release:
		if delay := r.p.q.config.Get(OptRetryDelay); delay > 0 {
			next.RetryAfter = now + delay*1000 // docs/decisions.md B6
		}
	case cursor.ActionDeadLetter, cursor.Drop:
		next.AttemptOffset, next.AttemptCount = -1, 0
		poison := plan.items[d.PoisonIndex]
		filed := false
		if d.Action == cursor.ActionDeadLetter {
			text := items[poison].Error
			for _, i := range plan.items {
				if text == "" && items[i].Status != cursor.Completed {
					text = items[i].Error
				}
			}
			if text == "" {
				text = errTextRetryExhausted
			}
			// The snapshot records the budget consumed at this moment.
			var err error
			if filed, err = b.fileDeadLetter(now, m, r, d.Poison, text, old.RetryCount, old.AttemptCount); err != nil {
				b.fail(err)
				return
			}
		}
		// A message retention already deleted cannot be filed: it is gone,
		// as a dropped one is.
		results[poison].DLQ, results[poison].Dropped = filed, !filed
	}
	r.rec = next
	if old.Lease != next.Lease {
		b.indexLease(r, old.Lease, next.Lease)
	}
	b.touchRow(r)
}

// fileDeadLetter writes the dead-letter snapshot of the message at off for
// r's group (docs/semantics.md §6.3 step 6). It reports false, writing nothing, when
// the message's segment is already deleted. The cursor is the caller's.
func (b *Batch) fileDeadLetter(now int64, m *minter, r *row, off Offset, text string, retryCount, deliveries uint32) (bool, error) {
	p := r.p
	frame, createdAt, found, err := b.e.readOne(b.pb, p, off)
	if err != nil || !found {
		return false, err
	}
	rec := keyspace.DeadLetterRecord{
		PartitionID: p.id, Queue: p.q.name, Partition: p.rec.Name, Group: r.group, Offset: int64(off),
		Error: text, RetryCount: retryCount, Deliveries: deliveries,
		MessageID: frame.MessageID, TransactionID: string(frame.TransactionID),
		HasTrace: frame.HasTrace, TraceID: frame.TraceID, ProducerSub: string(frame.ProducerSub),
		Payload: frame.Payload, Sealed: frame.Sealed, EnqueuedAt: createdAt,
	}
	b.putDeadLetter(keyspace.MakeRowKey(now, m.next()), &rec)
	return true, nil
}
