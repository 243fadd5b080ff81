package engine

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/engine/segment"
)

// PushItem is one message to push.
type PushItem struct {
	Queue         string
	Partition     string // "" means Default
	TransactionID string // "" means the new message id
	TraceID       ID
	HasTrace      bool
	ProducerSub   string // "" means none
	Payload       []byte // raw JSON, stored as is
}

// PushStatus is the outcome of one pushed item.
type PushStatus uint8

// Push outcomes.
const (
	Queued    PushStatus = iota // written
	Duplicate                   // a message with this transaction id exists; nothing written
	Rejected                    // invalid item; nothing written
)

// PushResult reports one pushed item, aligned with the input.
type PushResult struct {
	Status        PushStatus
	MessageID     ID // the new message, or the original one for a duplicate
	TransactionID string
	PartitionID   ID
	Queue         string
	Partition     string
	Err           error // set when Rejected
}

// Push writes items: per (queue, partition) in first-appearance order, the
// non-duplicate items become one segment with consecutive offsets in request
// order (SEMANTICS §3). Queues and partitions are created on first use.
func (b *Batch) Push(st Stamp, items []PushItem) []PushResult {
	m := &minter{seed: st.Seed}
	return b.push(st.Time, m, items)
}

// pushGroup is the items of one push bound for one partition.
type pushGroup struct {
	queue, partition string
	items            []int
}

func (b *Batch) push(now int64, m *minter, items []PushItem) []PushResult {
	results := make([]PushResult, len(items))
	var groups []pushGroup
	index := map[[2]string]int{}
	for i := range items {
		it := &items[i]
		res := &results[i]
		res.Queue, res.Partition = it.Queue, it.Partition
		if res.Partition == "" {
			res.Partition = DefaultPartition
		}
		res.MessageID = m.next()
		res.TransactionID = it.TransactionID
		if res.TransactionID == "" {
			res.TransactionID = FormatID(res.MessageID)
		}
		if err := validatePushItem(res.Queue, res.Partition, it.TransactionID); err != nil {
			res.Status, res.Err = Rejected, err
			continue
		}
		k := [2]string{res.Queue, res.Partition}
		g, ok := index[k]
		if !ok {
			g = len(groups)
			index[k] = g
			groups = append(groups, pushGroup{queue: res.Queue, partition: res.Partition})
		}
		groups[g].items = append(groups[g].items, i)
	}
	for _, g := range groups {
		b.pushGroup(now, m, items, results, g)
	}
	return results
}

func validatePushItem(queue, partition, txn string) error {
	if err := ValidateQueueName(queue); err != nil {
		return err
	}
	if err := ValidateName("partition", partition); err != nil {
		return err
	}
	if len(txn) > 255 {
		return fmt.Errorf("%w: transactionId longer than 255 bytes", ErrInvalid)
	}
	return nil
}

func (b *Batch) pushGroup(now int64, m *minter, items []PushItem, results []PushResult, g pushGroup) {
	q := b.queueFor(g.queue, now, m)
	p := b.partitionFor(q, g.partition, now, m)
	window := q.config.Get(OptDedupWindowSeconds) * secondUS
	// createdAt never decreases along a partition, even across a leader
	// change to a node whose clock is behind.
	createdAt := max(now, p.rec.LastWriteAt)

	frames := make([]segment.Frame, 0, len(g.items))
	seen := make(map[string]int, len(g.items))
	for _, i := range g.items {
		res := &results[i]
		res.PartitionID = p.id
		if first, dup := seen[res.TransactionID]; dup {
			res.Status, res.MessageID = Duplicate, results[first].MessageID
			continue
		}
		if window > 0 {
			if rec, ok := b.lookupTxn(p.id, res.TransactionID); ok && rec.CreatedAt >= now-window {
				res.Status, res.MessageID = Duplicate, rec.MessageID
				continue
			}
		}
		seen[res.TransactionID] = i
		it := &items[i]
		frames = append(frames, segment.Frame{
			MessageID:     res.MessageID,
			TransactionID: []byte(res.TransactionID),
			TraceID:       it.TraceID,
			HasTrace:      it.HasTrace,
			ProducerSub:   []byte(it.ProducerSub),
			Payload:       it.Payload,
		})
	}
	if len(frames) == 0 {
		return
	}
	base := p.rec.Next
	enc, err := segment.Encode(b.buf[:0], base, createdAt, frames)
	if err != nil {
		b.fail(fmt.Errorf("engine: encode segment: %w", err))
		return
	}
	b.set(keyspace.Segment(p.id, base), enc)
	b.buf = enc
	txns := make([][]byte, len(frames))
	for n, f := range frames {
		rec := keyspace.TxnRecord{Offset: base + int64(n), CreatedAt: createdAt, MessageID: f.MessageID}
		b.buf = rec.Encode(b.buf[:0])
		b.set(keyspace.Txn(p.id, string(f.TransactionID)), b.buf)
		txns[n] = f.TransactionID
	}
	b.buf = keyspace.EncodeTxnExpiry(b.buf[:0], txns)
	b.set(keyspace.TxnExpiry(p.id, createdAt, base), b.buf)
	if p.rec.Start == p.rec.Next {
		p.rec.OldestAt = createdAt
	}
	if p.rec.PurgeFrom == 0 {
		p.rec.PurgeFrom = createdAt
	}
	p.rec.Next = base + int64(len(frames))
	p.rec.LastWriteAt = createdAt
	b.touchPartition(p)
}

// lookupTxn finds a transaction id in a partition's index, seeing this
// batch's own writes.
func (b *Batch) lookupTxn(part ID, txn string) (keyspace.TxnRecord, bool) {
	rec, ok, err := lookupTxn(b.pb, part, txn)
	if err != nil {
		b.fail(err)
	}
	return rec, ok
}

func lookupTxn(r pebble.Reader, part ID, txn string) (keyspace.TxnRecord, bool, error) {
	v, closer, err := r.Get(keyspace.Txn(part, txn))
	if err == pebble.ErrNotFound {
		return keyspace.TxnRecord{}, false, nil
	}
	if err != nil {
		return keyspace.TxnRecord{}, false, fmt.Errorf("engine: read txn index: %w", err)
	}
	defer closer.Close()
	rec, err := keyspace.DecodeTxn(v)
	if err != nil {
		return rec, false, err
	}
	return rec, true, nil
}

// fail records the first storage error of the batch; Commit then refuses to
// write and marks the engine broken (memory may already have moved on).
func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}
