package engine

import (
	"github.com/queenmq/queen/engine/cursor"
)

// StoredMessage is a message found by its address, with every group's
// position relative to it.
type StoredMessage struct {
	Message
	Groups []CursorInfo // every group with a cursor on the partition
}

// MessageAt finds a retained message by (partition id, transaction id).
func (e *Engine) MessageAt(part ID, txn string) (StoredMessage, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return StoredMessage{}, err
	}
	p := e.parts[part]
	if p == nil {
		return StoredMessage{}, ErrMessageNotFound
	}
	rec, ok, err := lookupTxn(e.db, part, txn)
	if err != nil {
		return StoredMessage{}, err
	}
	if !ok || rec.Offset < p.rec.Start {
		return StoredMessage{}, ErrMessageNotFound
	}
	f, createdAt, found, err := e.readOne(e.db, p, Offset(rec.Offset))
	if err != nil {
		return StoredMessage{}, err
	}
	if !found || string(f.TransactionID) != txn {
		return StoredMessage{}, ErrMessageNotFound
	}
	sm := StoredMessage{Message: Message{
		ID: f.MessageID, TransactionID: txn, TraceID: f.TraceID, HasTrace: f.HasTrace,
		Payload: f.Payload, ProducerSub: string(f.ProducerSub), CreatedAt: createdAt,
		Queue: p.q.name, Partition: p.rec.Name, PartitionID: p.id, Offset: Offset(rec.Offset),
	}}
	for _, g := range p.sortedGroups() {
		r := p.cursors[g]
		sm.Groups = append(sm.Groups, CursorInfo{Group: g, Queue: p.q.name, Partition: p.rec.Name,
			PartitionID: p.id, CursorRecord: r.rec})
	}
	return sm, nil
}

// MoveToDLQ dead-letters a message still pending for group, exactly as a
// lease-less ack with status dlq would (B3). It returns ErrMessageNotFound
// when the address names no message and ErrAlreadyConsumed when the group's
// cursor is already past it.
func (b *Batch) MoveToDLQ(st Stamp, part ID, txn, group, text string) (AckResult, error) {
	if group == "" {
		group = QueueMode
	}
	p := b.e.parts[part]
	if p == nil {
		return AckResult{}, ErrMessageNotFound
	}
	rec, ok := b.lookupTxn(part, txn)
	if !ok || rec.Offset < p.rec.Start {
		return AckResult{}, ErrMessageNotFound
	}
	r := p.cursors[group]
	if r == nil {
		cmd := PopCmd{Group: group}
		committed, err := b.seed(st.Time, &cmd, group, p)
		if err != nil {
			return AckResult{}, err
		}
		r = b.newRow(p, group, committed, st.Time)
	}
	if rec.Offset <= r.rec.Committed {
		return AckResult{}, ErrAlreadyConsumed
	}
	res := b.Ack(st, []AckItem{{TransactionID: txn, PartitionID: part, Group: group, Status: cursor.DeadLetter, Error: text}})
	return res[0], nil
}
