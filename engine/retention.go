package engine

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
)

// SweepResult reports what a sweep deleted.
type SweepResult struct {
	Partitions int // partitions that lost segments
	Segments   int // segments deleted by retention or eviction
	Messages   int64
	Evicted    int64 // of Messages, deleted by maxWaitTimeSeconds (docs/decisions.md C11)
	TxnPurged  int   // transaction-id index entries purged after their window
}

// minTxnKeepSeconds is the floor of the transaction-id index's lifetime
// (docs/semantics.md §8.3).
const minTxnKeepSeconds = 900

// sweep applies retention, eviction and the transaction-id index purge as of
// the command's time (docs/semantics.md §8):
//
//   - with retentionEnabled, retentionSeconds deletes whole segments older
//     than the window, consumed or not; completedRetentionSeconds deletes
//     whole segments older than its window that lie entirely below every
//     cursor of the partition (a partition without cursors keeps them);
//   - maxWaitTimeSeconds, independent of retentionEnabled, deletes whole
//     segments older than it, leased or not, without dead-lettering (docs/decisions.md C11);
//   - transaction-id index entries go once older than max(dedupWindowSeconds,
//     completedRetentionSeconds, 900 s), even when their segment stays.
//
// The partition's oldest offset advances; a cursor left behind resumes at the
// next retained offset. Dead letters are never touched. Deletions are range
// deletes, and their ranges are compacted after the batch commits so the space
// comes back.
func (b *Batch) sweep(st Stamp) (SweepResult, error) {
	now := st.Time
	var res SweepResult
	for _, q := range b.e.sortedQueues() {
		if b.e.isFrozen(q.name) {
			continue // a move froze it (freeze.go): swept where it lands
		}
		cfg := q.config
		keep := max(cfg.Get(OptDedupWindowSeconds), cfg.Get(OptCompletedRetentionSeconds), minTxnKeepSeconds) * secondUS
		for _, p := range q.parts {
			if p.rec.PurgeFrom != 0 && p.rec.PurgeFrom < now-keep {
				n, err := b.purgeTxns(p, now-keep)
				if err != nil {
					return res, err
				}
				res.TxnPurged += n
			}
			if err := b.retain(now, cfg, p, &res); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// retain deletes the prefix of p's segments the queue's windows allow.
func (b *Batch) retain(now int64, cfg Config, p *partition, res *SweepResult) error {
	if p.rec.Start == p.rec.Next {
		return nil
	}
	var (
		retention = cfg.Bool(OptRetentionEnabled)
		all       = cfg.Get(OptRetentionSeconds) * secondUS
		completed = cfg.Get(OptCompletedRetentionSeconds) * secondUS
		evict     = cfg.Get(OptMaxWaitTimeSeconds) * secondUS
	)
	// The oldest cutoff any rule could use: nothing younger can go.
	cutoff := int64(-1 << 63)
	if retention && all > 0 {
		cutoff = max(cutoff, now-all)
	}
	if retention && completed > 0 {
		cutoff = max(cutoff, now-completed)
	}
	if evict > 0 {
		cutoff = max(cutoff, now-evict)
	}
	if p.rec.OldestAt >= cutoff {
		return nil
	}
	// Rule 2's boundary: below every cursor row of the partition.
	boundary := int64(-1)
	if len(p.cursors) > 0 {
		boundary = p.rec.Next
		for _, r := range p.cursors {
			boundary = min(boundary, r.rec.Committed+1)
		}
	}
	it, err := b.e.segments(b.pb, p.id)
	if err != nil {
		return err
	}
	defer it.close()
	newStart, oldest := p.rec.Start, int64(0)
	var evicted int64
	for ok := it.first(); ok; ok = it.next() {
		h, err := it.header()
		if err != nil {
			return err
		}
		byAll := retention && all > 0 && h.CreatedAt < now-all
		byCompleted := retention && completed > 0 && h.CreatedAt < now-completed && h.Last() < boundary
		byEviction := evict > 0 && h.CreatedAt < now-evict
		if !byAll && !byCompleted && !byEviction {
			oldest = h.CreatedAt
			break
		}
		if byEviction && !byAll && !byCompleted {
			evicted += int64(h.Count)
		}
		newStart = h.Last() + 1
		res.Segments++
	}
	if err := it.err(); err != nil {
		return err
	}
	if newStart == p.rec.Start {
		return nil
	}
	if err := b.deleteTraces(p, p.rec.Start, newStart); err != nil {
		return err
	}
	lo, hi := keyspace.SegmentSpan(p.id, p.rec.Start, newStart)
	b.delRange(lo, hi)
	b.compact(lo, hi)
	res.Partitions++
	res.Messages += newStart - p.rec.Start
	res.Evicted += evicted
	p.rec.Start, p.rec.OldestAt = newStart, oldest
	p.forget(newStart)
	b.touchPartition(p)
	return nil
}

// purgeTxns removes the transaction-id index entries of p's segments created
// before cutoff. An entry is removed only while it still names the purged
// segment: a transaction id pushed again later keeps its newer entry.
func (b *Batch) purgeTxns(p *partition, cutoff int64) (int, error) {
	prefix := keyspace.TxnExpiryPrefix(p.id)
	it, err := b.pb.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: keyspace.PrefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	// One iterator for every lookup, in key order within each segment's
	// ids, as a push probes them (push.go, probeGroup): a point Get per
	// id builds and tears down an iterator over every level, and every
	// pushed message comes through here once its window has passed. The
	// probe does not see the deletes below, and need not: an id's entry
	// names one segment, so it is deleted at most once.
	var probe txnProbe
	defer probe.close()
	purged := 0
	p.rec.PurgeFrom = 0
	for it.First(); it.Valid(); it.Next() {
		createdAt, base, err := keyspace.ParseTxnExpiry(it.Key())
		if err != nil {
			return purged, err
		}
		if createdAt >= cutoff {
			p.rec.PurgeFrom = createdAt
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return purged, err
		}
		txns, err := keyspace.DecodeTxnExpiry(v)
		if err != nil {
			return purged, err
		}
		slices.Sort(txns)
		for _, txn := range txns {
			rec, ok := b.probeTxn(&probe, p.id, txn)
			if b.err != nil {
				return purged, b.err
			}
			if ok && rec.Offset >= base && rec.Offset < base+int64(len(txns)) {
				b.del(keyspace.Txn(p.id, txn))
				purged++
			}
		}
		b.del(append([]byte(nil), it.Key()...))
	}
	if err := it.Error(); err != nil {
		return purged, fmt.Errorf("engine: read txn expiry of %x: %w", p.id, err)
	}
	b.touchPartition(p)
	return purged, nil
}

// compact schedules a compaction of a deleted range once the batch commits.
func (b *Batch) compact(lo, hi []byte) {
	b.compactions = append(b.compactions, [2][]byte{lo, hi})
}
