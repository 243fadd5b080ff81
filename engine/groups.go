package engine

import (
	"fmt"
	"sort"

	"github.com/queenmq/queen/engine/keyspace"
)

// SeekCmd moves a group's cursor on a queue, or on one of its partitions
// (docs/semantics.md §14).
type SeekCmd struct {
	Group     string // "" means QueueMode
	Queue     string
	Partition string // "" seeks every partition of the queue
	ToEnd     bool   // skip everything pending
	Timestamp int64  // µs: redeliver messages created at or after it (when !ToEnd)
}

// seek moves the cursor of every selected partition, creating missing rows,
// releasing leases and resetting the retry and attempt state. It returns the
// number of partitions updated.
func (b *Batch) seek(st Stamp, cmd SeekCmd) (int, error) {
	group := cmd.Group
	if group == "" {
		group = QueueMode
	}
	q := b.e.queues[cmd.Queue]
	if q == nil {
		return 0, ErrQueueNotFound
	}
	parts := q.parts
	if cmd.Partition != "" {
		p := q.byName[cmd.Partition]
		if p == nil {
			return 0, ErrPartitionNotFound
		}
		parts = []*partition{p}
	}
	for _, p := range parts {
		target := p.last()
		if !cmd.ToEnd {
			t, err := b.e.offsetAtTime(b.pb, p, cmd.Timestamp)
			if err != nil {
				return 0, err
			}
			target = max(t, Offset(p.rec.Start-1))
		}
		r := p.cursors[group]
		if r == nil {
			r = b.newRow(p, group, target, st.Time)
		}
		if r.rec.Lease != (ID{}) {
			b.setLease(r, ID{}, 0, 0)
		}
		r.rec.Committed = int64(target)
		r.rec.BatchEnd = -1
		r.rec.RetryCount = 0
		r.rec.RetryAfter = 0
		r.rec.AttemptOffset, r.rec.AttemptCount = -1, 0
		b.touchRow(r)
	}
	return len(parts), nil
}

// deleteGroup removes a group's cursor rows on one queue (or on every queue
// when queue is ""), and its subscription records when deleteMetadata. It
// returns the number of cursor rows removed and whether any subscription was.
func (b *Batch) deleteGroup(group, queueName string, deleteMetadata bool) (int, bool) {
	var queues []*queue
	if queueName != "" {
		if q := b.e.queues[queueName]; q != nil {
			queues = []*queue{q}
		}
	} else {
		queues = b.e.sortedQueues()
	}
	deleted, meta := 0, false
	for _, q := range queues {
		for _, p := range q.parts {
			if r := p.cursors[group]; r != nil {
				b.deleteRow(r)
				deleted++
			}
		}
		if deleteMetadata && q.subs[group] != nil {
			delete(q.subs, group)
			b.del(keyspace.Sub(q.name, group))
			meta = true
		}
	}
	return deleted, meta
}

// updateSubscription rewrites the stored timestamp of every subscription of
// group: partitions the group meets for the first time afterwards start
// there; existing cursors do not move (docs/semantics.md §14). It returns the number
// of subscriptions updated.
func (b *Batch) updateSubscription(group string, ts int64) int {
	n := 0
	for _, q := range b.e.sortedQueues() {
		if s := q.subs[group]; s != nil {
			s.rec.Mode, s.rec.Timestamp = SubFrom, ts
			b.putSub(q, group, s)
			n++
		}
	}
	return n
}

// CursorInfo describes one (partition, group) cursor for the admin views.
type CursorInfo struct {
	Group       string
	Queue       string
	Partition   string
	PartitionID ID
	keyspace.CursorRecord
	LeaseLive          bool
	OffsetLag          int64 // messages retained past the cursor
	OldestUnconsumedAt int64 // createdAt of the first message past the cursor, 0 when none
}

// Subscription describes a named group's stored subscription on a queue.
type Subscription struct {
	Group string
	Queue string
	keyspace.SubRecord
}

// Cursors lists cursor rows, of one group when group is set, ordered by
// (group, queue, partition).
func (e *Engine) Cursors(now int64, group string) ([]CursorInfo, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	var out []CursorInfo
	for _, q := range e.sortedQueues() {
		for _, p := range q.parts {
			for g, r := range p.cursors {
				if group != "" && g != group {
					continue
				}
				ci := CursorInfo{Group: g, Queue: q.name, Partition: p.rec.Name, PartitionID: p.id,
					CursorRecord: r.rec, LeaseLive: r.leaseLive(now)}
				consumed := max(Offset(r.rec.Committed), Offset(p.rec.Start-1))
				ci.OffsetLag = int64(max(p.last()-consumed, 0))
				if ci.OffsetLag > 0 {
					at, ok, err := e.createdAtOf(e.db, p, consumed+1)
					if err != nil {
						return nil, err
					}
					if ok {
						ci.OldestUnconsumedAt = at
					}
				}
				out = append(out, ci)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		if out[i].Queue != out[j].Queue {
			return out[i].Queue < out[j].Queue
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// Subscriptions lists stored subscriptions ordered by (queue, group).
func (e *Engine) Subscriptions() ([]Subscription, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	var out []Subscription
	for _, q := range e.sortedQueues() {
		for _, g := range q.sortedSubs() {
			out = append(out, Subscription{Group: g, Queue: q.name, SubRecord: q.subs[g].rec})
		}
	}
	return out, nil
}

// SubModeName names a subscription mode as the API does.
func SubModeName(mode uint8) string {
	switch mode {
	case SubAll:
		return "all"
	case SubNew:
		return "new"
	case SubFrom:
		return "timestamp"
	}
	return fmt.Sprintf("mode(%d)", mode)
}
