package engine

// Messages returns up to limit retained messages of partition part at or
// after offset from, oldest first, and the offset to ask for next; next is
// -1 once the partition has nothing after them. It is how a queue is read
// out of a store whole (queen restore --queue), a page at a time, without
// holding the engine's lock between pages.
func (e *Engine) Messages(part ID, from Offset, limit int) (msgs []Message, next Offset, err error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, -1, err
	}
	p := e.parts[part]
	if p == nil {
		return nil, -1, ErrPartitionNotFound
	}
	from = max(from, Offset(p.rec.Start))
	if limit <= 0 || from >= Offset(p.rec.Next) {
		return nil, -1, nil
	}
	it, err := e.segments(e.db, part)
	if err != nil {
		return nil, -1, err
	}
	defer it.close()
	for ok := it.seekContaining(from) || it.first(); ok; ok = it.next() {
		seg, err := it.decode()
		if err != nil {
			return nil, -1, err
		}
		base := Offset(seg.Header.Base)
		for i := max(int(from-base), 0); i < len(seg.Frames); i++ {
			if len(msgs) == limit {
				return msgs, base + Offset(i), nil
			}
			f := &seg.Frames[i]
			msgs = append(msgs, Message{
				ID: f.MessageID, TransactionID: string(f.TransactionID), TraceID: f.TraceID, HasTrace: f.HasTrace,
				Payload: f.Payload, Sealed: f.Sealed, ProducerSub: string(f.ProducerSub), CreatedAt: seg.Header.CreatedAt,
				Queue: p.q.name, Partition: p.rec.Name, PartitionID: p.id, Offset: base + Offset(i),
			})
		}
	}
	return msgs, -1, it.err()
}
