package engine

import (
	"bytes"
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
	// Sealed says Payload is an encryption envelope the broker's edge made
	// (server, "Encryption at rest"): it is stored with the frame's sealed
	// bit, and only such payloads are opened on read. The edge sets it
	// before proposing; nothing a client sends sets it.
	Sealed bool
}

// PushStatus is the outcome of one pushed item.
type PushStatus uint8

// Push outcomes.
const (
	Queued    PushStatus = iota // written
	Duplicate                   // a message with this transaction id exists; nothing written
	Rejected                    // invalid item; nothing written
	// Pending: a transaction committed the item in its home group's
	// outbox and it is on its way to its queue's group, which stores it
	// once (its transaction id dedups a redelivery); its ids are not known
	// yet. Only a transaction across Raft groups answers it (cluster.Host).
	Pending
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

// push writes items: per (queue, partition) in first-appearance order, the
// non-duplicate items become one segment with consecutive offsets in request
// order (docs/semantics.md §3). Queues and partitions are created on first use.
// It is preparePush and pushPrepared in one step, with ids from one minter.
func (b *Batch) push(now int64, m *minter, items []PushItem) []PushResult {
	pp, err := preparePush(items, m.next)
	if err != nil {
		b.fail(err)
		return nil
	}
	return b.pushPrepared(now, m, &pp)
}

// PreparedPush is a push made ready before it is proposed: everything that
// needs no state is done, so the state machine only probes for duplicates,
// assembles segments and writes. Preparing off the apply path takes the
// compression out of the serial part and keeps the replicated log small.
type PreparedPush struct {
	Items  []PreparedItem  // one per pushed item, in request order
	Groups []PreparedGroup // one per (queue, partition), in first-appearance order
}

// PreparedItem is one pushed item as prepared.
type PreparedItem struct {
	TransactionID string
	MessageID     ID
	// Minted is set when the transaction id was minted from the message id:
	// it cannot exist yet, so the dedup probe is skipped.
	Minted bool
	// DuplicateOf is the index of an earlier item of the request with the
	// same (queue, partition, transaction id), or -1 (first wins, docs/semantics.md §3.4).
	DuplicateOf int
	// Reject is why the item was refused ("" when it was not).
	Reject string
}

// PreparedGroup is the items of a push bound for one partition and their
// encoded frames.
type PreparedGroup struct {
	Queue     string
	Partition string
	Items     []int        // indexes into PreparedPush.Items of Body's frames, in order
	Body      segment.Body // Body.Count == len(Items)
}

// preparePush validates items, mints their message ids (and transaction ids
// for items without one) with mint, resolves repeats of a transaction id
// within the request (first wins), groups items per (queue, partition) and
// encodes each group's frames into a segment body. It reads no state: the
// proposer runs it before proposing, in the caller's goroutine.
func preparePush(items []PushItem, mint func() ID) (PreparedPush, error) {
	pp := PreparedPush{Items: make([]PreparedItem, len(items))}
	index := map[[2]string]int{}
	type key struct {
		group int
		txn   string
	}
	seen := make(map[key]int, len(items))
	for i := range items {
		it := &items[i]
		pi := &pp.Items[i]
		pi.DuplicateOf = -1
		pi.MessageID = mint()
		pi.TransactionID = it.TransactionID
		if pi.TransactionID == "" {
			pi.TransactionID, pi.Minted = FormatID(pi.MessageID), true
		}
		partition := it.Partition
		if partition == "" {
			partition = DefaultPartition
		}
		if err := validatePushItem(it.Queue, partition, it.TransactionID); err != nil {
			pi.Reject = err.Error()
			continue
		}
		g, ok := index[[2]string{it.Queue, partition}]
		if !ok {
			g = len(pp.Groups)
			index[[2]string{it.Queue, partition}] = g
			pp.Groups = append(pp.Groups, PreparedGroup{Queue: it.Queue, Partition: partition})
		}
		if first, dup := seen[key{g, pi.TransactionID}]; dup {
			pi.DuplicateOf = first
			continue
		}
		seen[key{g, pi.TransactionID}] = i
		pp.Groups[g].Items = append(pp.Groups[g].Items, i)
	}
	// One frame buffer serves every group (EncodeBody keeps none of it), and
	// the frames' byte fields are slices of one buffer of the request's
	// transaction ids and producer subjects: a few allocations per push, not
	// a few per item.
	var size int
	for i := range items {
		size += len(pp.Items[i].TransactionID) + len(items[i].ProducerSub)
	}
	strs := make([]byte, 0, size)
	bytesOf := func(s string) []byte {
		if s == "" {
			return nil
		}
		strs = append(strs, s...)
		return strs[len(strs)-len(s) : len(strs) : len(strs)]
	}
	frames := make([]segment.Frame, 0, len(items))
	for g := range pp.Groups {
		frames = frames[:0]
		for _, i := range pp.Groups[g].Items {
			it, pi := &items[i], &pp.Items[i]
			frames = append(frames, segment.Frame{
				MessageID: pi.MessageID, TransactionID: bytesOf(pi.TransactionID), TraceID: it.TraceID,
				HasTrace: it.HasTrace, ProducerSub: bytesOf(it.ProducerSub), Payload: it.Payload, Sealed: it.Sealed,
			})
		}
		body, err := segment.EncodeBody(nil, frames)
		if err != nil {
			return pp, fmt.Errorf("engine: encode segment: %w", err)
		}
		pp.Groups[g].Body = body
	}
	return pp, nil
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

func (b *Batch) pushPrepared(now int64, m *minter, pp *PreparedPush) []PushResult {
	results := make([]PushResult, len(pp.Items))
	for i := range pp.Items {
		pi := &pp.Items[i]
		results[i] = PushResult{MessageID: pi.MessageID, TransactionID: pi.TransactionID}
		if pi.Reject != "" {
			results[i].Status, results[i].Err = Rejected, fmt.Errorf("%w: %s", ErrInvalid, pi.Reject)
		}
	}
	for g := range pp.Groups {
		b.pushGroup(now, m, pp, &pp.Groups[g], results)
	}
	for i := range pp.Items {
		if first := pp.Items[i].DuplicateOf; first >= 0 {
			results[i].Status = Duplicate
			results[i].MessageID = results[first].MessageID
			results[i].PartitionID = results[first].PartitionID
			results[i].Queue, results[i].Partition = results[first].Queue, results[first].Partition
		}
	}
	return results
}

func (b *Batch) pushGroup(now int64, m *minter, pp *PreparedPush, g *PreparedGroup, results []PushResult) {
	if b.e.arriving(g.Queue) {
		for _, i := range g.Items {
			results[i].Status, results[i].Queue, results[i].Err = Rejected, g.Queue, ErrQueueNotFound
		}
		return
	}
	q := b.queueFor(g.Queue, now, m)
	p := b.partitionFor(q, g.Partition, now, m)
	window := q.config.Get(OptDedupWindowSeconds) * secondUS
	// createdAt never decreases along a partition, even across a leader
	// change to a node whose clock is behind.
	createdAt := max(now, p.rec.LastWriteAt)

	kept := g.Items
	if window > 0 {
		kept = kept[:0:0]
		probe := txnProbe{misses: true}
		for _, i := range g.Items {
			res := &results[i]
			res.Queue, res.Partition, res.PartitionID = q.name, p.rec.Name, p.id
			if !pp.Items[i].Minted {
				if rec, ok := b.probeTxn(&probe, p.id, res.TransactionID); ok && rec.CreatedAt >= now-window {
					res.Status, res.MessageID = Duplicate, rec.MessageID
					continue
				}
			}
			kept = append(kept, i)
		}
		probe.close()
	}
	body := g.Body
	if len(kept) != len(g.Items) {
		// A repeat of an earlier request: rebuild the body without it.
		var err error
		if body, err = filterBody(g.Body, g.Items, kept); err != nil {
			b.fail(err)
			return
		}
	}
	if len(kept) == 0 {
		return
	}
	base := p.rec.Next
	enc, err := body.Assemble(b.buf[:0], base, createdAt)
	if err != nil {
		b.fail(fmt.Errorf("engine: assemble segment: %w", err))
		return
	}
	b.set(keyspace.Segment(p.id, base), enc)
	b.buf = enc
	txns := make([]string, len(kept))
	for n, i := range kept {
		res := &results[i]
		res.Status, res.Queue, res.Partition, res.PartitionID = Queued, q.name, p.rec.Name, p.id
		rec := keyspace.TxnRecord{Offset: base + int64(n), CreatedAt: createdAt, MessageID: res.MessageID}
		b.buf = rec.Encode(b.buf[:0])
		// Pebble copies the key and the value: one scratch key serves all.
		b.key = keyspace.AppendTxn(b.key[:0], p.id, res.TransactionID)
		b.set(b.key, b.buf)
		txns[n] = res.TransactionID
	}
	b.buf = keyspace.EncodeTxnExpiry(b.buf[:0], txns)
	b.set(keyspace.TxnExpiry(p.id, createdAt, base), b.buf)
	if p.rec.Start == p.rec.Next {
		p.rec.OldestAt = createdAt
	}
	if p.rec.PurgeFrom == 0 {
		p.rec.PurgeFrom = createdAt
	}
	p.rec.Next = base + int64(len(kept))
	p.rec.LastWriteAt = createdAt
	p.remember(base)
	b.touchPartition(p)
}

// filterBody re-encodes a body keeping the frames of the kept items (a
// subsequence of items, in order). Every replica does the same work on the
// same input, so the bytes agree.
func filterBody(body segment.Body, items, kept []int) (segment.Body, error) {
	enc, err := body.Assemble(nil, 0, 0)
	if err != nil {
		return body, err
	}
	seg, err := segment.Decode(enc)
	if err != nil {
		return body, err
	}
	frames := make([]segment.Frame, 0, len(kept))
	k := 0
	for n, i := range items {
		if k < len(kept) && kept[k] == i {
			frames = append(frames, seg.Frames[n])
			k++
		}
	}
	if len(frames) == 0 {
		return segment.Body{}, nil
	}
	return segment.EncodeBody(nil, frames)
}

// txnProbe looks up many transaction ids through one iterator. A point Get
// builds and tears down an iterator over every LSM level each time, which
// was most of the apply loop's time under push load; prefix seeks on one
// iterator reuse it and still consult the bloom filters. The iterator sees
// the batch as it was when the probe started, so a probe must not outlive a
// write to the txn index that it could read back (pushGroup probes first,
// then writes; purgeTxns deletes only entries it will not look up again).
//
// A probe for ids that are expected to be absent (the dedup probe: a
// duplicate is the exception) sets misses, which makes the iterator consult
// the bloom filters of L6 tables too. Pebble skips them by default (they are
// large, and useless when the key is there), so every miss read an index
// and a data block of each L6 table it overlapped; and in a young store the
// base level is L6, where nearly all of the index lives.
type txnProbe struct {
	it     *pebble.Iterator
	key    []byte
	misses bool
}

// probeTxn is lookupTxn through p.
func (b *Batch) probeTxn(p *txnProbe, part ID, txn string) (keyspace.TxnRecord, bool) {
	if p.it == nil {
		it, err := b.pb.NewIter(&pebble.IterOptions{UseL6Filters: p.misses})
		if err != nil {
			b.fail(fmt.Errorf("engine: read txn index: %w", err))
			return keyspace.TxnRecord{}, false
		}
		p.it = it
	}
	p.key = keyspace.AppendTxn(p.key[:0], part, txn)
	if !p.it.SeekPrefixGE(p.key) || !bytes.Equal(p.it.Key(), p.key) {
		if err := p.it.Error(); err != nil {
			b.fail(fmt.Errorf("engine: read txn index: %w", err))
		}
		return keyspace.TxnRecord{}, false
	}
	v, err := p.it.ValueAndErr()
	if err != nil {
		b.fail(fmt.Errorf("engine: read txn index: %w", err))
		return keyspace.TxnRecord{}, false
	}
	rec, err := keyspace.DecodeTxn(v)
	if err != nil {
		b.fail(err)
		return rec, false
	}
	return rec, true
}

func (p *txnProbe) close() {
	if p.it != nil {
		p.it.Close()
	}
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
	var rec keyspace.TxnRecord
	found, err := get(r, keyspace.Txn(part, txn), func(v []byte) (err error) {
		rec, err = keyspace.DecodeTxn(v)
		return err
	})
	if err != nil {
		return rec, false, fmt.Errorf("engine: read txn index: %w", err)
	}
	return rec, found, nil
}

// fail records the first storage error of the batch; Commit then refuses to
// write and marks the engine broken (memory may already have moved on).
func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}
