package engine

import (
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/keyspace"
)

// AckItem acknowledges one message for one consumer group.
type AckItem struct {
	TransactionID string
	PartitionID   ID
	Group         string // "" means QueueMode
	Status        cursor.Status
	Lease         ID // zero: a lease-less ack, accepted without validation (C10)
	Error         string
}

// AckResult reports one ack item, aligned with the input (DECISIONS C7).
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

// Ack applies ack items. Items are grouped by (partition, group, lease) in
// first-appearance order; each group is one clamp decision (SEMANTICS §6.3).
func (b *Batch) Ack(st Stamp, items []AckItem) []AckResult {
	m := &minter{seed: st.Seed}
	results := make([]AckResult, len(items))
	for _, plan := range b.planAcks(st.Time, items, results) {
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

// planAcks resolves items and runs the clamp per group. It fills the results
// of items it rejects outright and reads but never writes.
func (b *Batch) planAcks(now int64, items []AckItem, results []AckResult) []*ackPlan {
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
				if it.Lease != (ID{}) && (plan.r.rec.Lease != it.Lease || !plan.r.leaseLive(now)) {
					plan.reject = errTextInvalidLease
				}
			}
		}
		plan.items = append(plan.items, i)
		if plan.r != nil {
			results[i].Queue, results[i].Partition = plan.r.p.q.name, plan.r.p.rec.Name
		}
	}
	for _, plan := range plans {
		if plan.reject != "" {
			for _, i := range plan.items {
				results[i].Error = plan.reject
			}
			continue
		}
		b.decide(now, plan, items, results)
	}
	return plans
}

// decide resolves a plan's transaction ids and runs the clamp.
func (b *Batch) decide(now int64, plan *ackPlan, items []AckItem, results []AckResult) {
	r := plan.r
	resolved := plan.items[:0:0]
	for _, i := range plan.items {
		rec, ok := b.lookupTxn(r.p.id, items[i].TransactionID)
		if !ok {
			results[i].Error = errTextNotFound
			plan.missing = append(plan.missing, i)
			continue
		}
		resolved = append(resolved, i)
		plan.offsets = append(plan.offsets, cursor.Item{Offset: Offset(rec.Offset), Status: items[i].Status})
	}
	plan.items = resolved
	plan.outcomes = make([]cursor.Outcome, len(plan.offsets))
	state := cursor.State{
		Committed:  Offset(r.rec.Committed),
		RetryCount: r.rec.RetryCount,
	}
	if plan.lease != (ID{}) {
		state.SpanEnd, state.BatchEnd = Offset(r.rec.BatchEnd), Offset(r.rec.BatchEnd)
	} else {
		// Lease-less (C10): any stored message past the cursor may be acked;
		// the batch completes at its recorded end, or at the head when no
		// batch is recorded.
		state.SpanEnd = r.p.last()
		state.BatchEnd = state.SpanEnd
		if r.rec.BatchEnd > r.rec.Committed {
			state.BatchEnd = Offset(r.rec.BatchEnd)
		}
	}
	cfg := r.p.q.config
	policy := cursor.Policy{RetryLimit: uint32(min(cfg.Get(OptRetryLimit), 1<<31)), DeadLetter: cfg.DeadLetterEnabled()}
	plan.decision = cursor.Clamp(state, policy, plan.offsets, plan.outcomes)
}

// failed reports whether a plan would reject any of its items: what rolls a
// transaction back (SEMANTICS §13).
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
	if d.Prefix > Offset(r.rec.Committed) {
		r.rec.TotalConsumed += int64(d.Prefix) - r.rec.Committed
		r.rec.Committed = int64(d.Prefix)
		r.rec.LastConsumedAt = now
	}
	switch d.Action {
	case cursor.Unchanged, cursor.Advance:
		r.rec.RetryCount = d.RetryCount
	case cursor.Complete:
		r.rec.RetryCount = d.RetryCount
		r.rec.AttemptOffset, r.rec.AttemptCount = -1, 0
	case cursor.Release:
		r.rec.RetryCount = d.RetryCount
		if delay := r.p.q.config.Get(OptRetryDelay); delay > 0 {
			r.rec.RetryAfter = now + delay*1000 // B6
		}
	case cursor.ActionDeadLetter, cursor.Drop:
		poison := plan.items[d.PoisonIndex]
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
			// deadLetter snapshots the counter as it stands: the budget
			// consumed at this moment.
			if err := b.deadLetter(now, m, r, d.Poison, text); err != nil {
				b.fail(err)
				return
			}
			results[poison].DLQ = true
		} else {
			r.rec.Committed = int64(d.Poison)
			r.rec.TotalConsumed++
			r.rec.LastConsumedAt = now
			r.rec.AttemptOffset, r.rec.AttemptCount = -1, 0
			results[poison].Dropped = true
		}
		r.rec.RetryCount = 0
	}
	if d.LeaseReleased && r.rec.Lease != (ID{}) {
		b.setLease(r, ID{}, 0, 0)
	} else if d.LeaseReleased {
		r.rec.BatchEnd = -1
	}
	b.touchRow(r)
}

// deadLetter files the message at off as a dead-letter snapshot for r's group,
// moves the cursor past it and resets the retry and redelivery state
// (SEMANTICS §6.3 step 6). The lease, if any, is left to the caller.
func (b *Batch) deadLetter(now int64, m *minter, r *row, off Offset, text string) error {
	p := r.p
	rec := keyspace.DeadLetterRecord{
		PartitionID: p.id, Queue: p.q.name, Partition: p.rec.Name, Group: r.group, Offset: int64(off),
		Error: text, RetryCount: r.rec.RetryCount, Deliveries: r.rec.AttemptCount,
	}
	frame, createdAt, found, err := b.e.readOne(b.pb, p.id, off)
	if err != nil {
		return err
	}
	if found {
		rec.MessageID = frame.MessageID
		rec.TransactionID = string(frame.TransactionID)
		rec.HasTrace, rec.TraceID = frame.HasTrace, frame.TraceID
		rec.ProducerSub = string(frame.ProducerSub)
		rec.Payload = frame.Payload
		rec.EnqueuedAt = createdAt
	}
	b.putDeadLetter(keyspace.MakeRowKey(now, m.next()), &rec)
	r.rec.Committed = int64(off)
	r.rec.TotalConsumed++
	r.rec.LastConsumedAt = now
	r.rec.RetryCount = 0
	r.rec.AttemptOffset, r.rec.AttemptCount = -1, 0
	b.touchRow(r)
	return nil
}
