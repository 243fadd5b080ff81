package engine

import (
	"sort"

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
		Payload: f.Payload, Sealed: f.Sealed, ProducerSub: string(f.ProducerSub), CreatedAt: createdAt,
		Queue: p.q.name, Partition: p.rec.Name, PartitionID: p.id, Offset: Offset(rec.Offset),
	}}
	for _, g := range p.sortedGroups() {
		r := p.cursors[g]
		sm.Groups = append(sm.Groups, CursorInfo{Group: g, Queue: p.q.name, Partition: p.rec.Name,
			PartitionID: p.id, CursorRecord: r.rec})
	}
	return sm, nil
}

// moveToDLQ dead-letters a message still pending for group, exactly as a
// lease-less ack with status dlq would (docs/decisions.md B3). It returns ErrMessageNotFound
// when the address names no message and ErrAlreadyConsumed when the group's
// cursor is already past it.
func (b *Batch) moveToDLQ(st Stamp, part ID, txn, group, text string) (AckResult, error) {
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
	res := b.ack(st, []AckItem{{TransactionID: txn, PartitionID: part, Group: group, Status: cursor.DeadLetter, Error: text}})
	return res[0], nil
}

// MessageFilter selects retained messages for ListMessages. Zero fields do
// not filter.
type MessageFilter struct {
	Queue     string
	Partition string
	Namespace string
	Task      string
	From, To  int64 // createdAt bounds in µs, inclusive; 0 = open
	Limit     int   // page size; <= 0 means 200
	Offset    int
}

// ListedMessage is one message of a listing: the message, every group's
// cursor on its partition, and whether it has dead-letter rows.
type ListedMessage struct {
	StoredMessage
	DeadLettered bool
}

// ListMessages returns one page of retained messages, newest first, with
// their partitions' cursors (docs/api.md §9.2). It reads segments newest first
// and stops once a partition has given Offset+Limit candidates, so its cost
// follows the page, not the queue.
func (e *Engine) ListMessages(f MessageFilter) ([]ListedMessage, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	if f.Limit <= 0 {
		f.Limit = 200
	}
	want := f.Offset + f.Limit
	var all []ListedMessage
	for _, q := range e.sortedQueues() {
		if (f.Queue != "" && q.name != f.Queue) || (f.Namespace != "" && q.rec.Namespace != f.Namespace) ||
			(f.Task != "" && q.rec.Task != f.Task) {
			continue
		}
		for _, p := range q.parts {
			if f.Partition != "" && p.rec.Name != f.Partition {
				continue
			}
			got, err := e.newestMessages(p, f.From, f.To, want)
			if err != nil {
				return nil, err
			}
			all = append(all, got...)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].CreatedAt != all[j].CreatedAt {
			return all[i].CreatedAt > all[j].CreatedAt
		}
		return all[i].Offset > all[j].Offset
	})
	if f.Offset >= len(all) {
		return nil, nil
	}
	all = all[f.Offset:min(len(all), want)]
	for i := range all {
		m := &all[i]
		rows, err := deadLettersAt(e.db, m.PartitionID, m.TransactionID, "")
		if err != nil {
			return nil, err
		}
		m.DeadLettered = len(rows) > 0
	}
	return all, nil
}

// newestMessages returns up to n messages of p created in [from, to],
// newest first.
func (e *Engine) newestMessages(p *partition, from, to int64, n int) ([]ListedMessage, error) {
	it, err := e.segments(e.db, p.id)
	if err != nil {
		return nil, err
	}
	defer it.close()
	var groups []CursorInfo
	for _, g := range p.sortedGroups() {
		groups = append(groups, CursorInfo{Group: g, Queue: p.q.name, Partition: p.rec.Name, PartitionID: p.id,
			CursorRecord: p.cursors[g].rec})
	}
	var out []ListedMessage
	for ok := it.last(); ok && len(out) < n; ok = it.prev() {
		h, err := it.header()
		if err != nil {
			return nil, err
		}
		if to != 0 && h.CreatedAt > to {
			continue
		}
		if from != 0 && h.CreatedAt < from {
			break // createdAt never decreases along a partition
		}
		seg, err := it.decode()
		if err != nil {
			return nil, err
		}
		for i := len(seg.Frames) - 1; i >= 0 && len(out) < n; i-- {
			f := &seg.Frames[i]
			out = append(out, ListedMessage{StoredMessage: StoredMessage{Groups: groups, Message: Message{
				ID: f.MessageID, TransactionID: string(f.TransactionID), TraceID: f.TraceID, HasTrace: f.HasTrace,
				Payload: f.Payload, Sealed: f.Sealed, ProducerSub: string(f.ProducerSub), CreatedAt: h.CreatedAt,
				Queue: p.q.name, Partition: p.rec.Name, PartitionID: p.id, Offset: Offset(h.Base) + Offset(i),
			}}})
		}
	}
	return out, it.err()
}
