package engine

import (
	"sort"

	"github.com/queenmq/queen/engine/keyspace"
)

// The engine keeps every small record (queues, partitions, cursors,
// subscriptions) in memory, mirrored write-through into Pebble; segments, the
// transaction-id index and dead letters live only in Pebble. Memory is loaded
// once at Open, in time proportional to the number of partitions and cursors,
// never to the number of messages.

type queue struct {
	name   string
	rec    keyspace.QueueRecord // Options is nil in memory; config holds them
	config Config
	parts  []*partition // sorted by name: the deterministic iteration order
	byName map[string]*partition
	subs   map[string]*sub // named groups' subscriptions, by group
}

// Subscription modes (keyspace.SubRecord.Mode): part of the on-disk format.
const (
	SubAll  uint8 = 0 // from the oldest retained message
	SubNew  uint8 = 1 // from the join time
	SubFrom uint8 = 2 // from a timestamp
)

type sub struct {
	rec keyspace.SubRecord
}

type partition struct {
	id      ID
	q       *queue
	rec     keyspace.PartitionRecord
	cursors map[string]*row
	dirty   bool
	// recent holds the base offsets of the partition's newest segments, in
	// order, so reads near the head find their segment by exact key. It is a
	// cache of what is on disk (empty after a restart), never state.
	recent []int64
}

// maxRecent bounds partition.recent.
const maxRecent = 32

// remember records the base of a segment just written.
func (p *partition) remember(base int64) {
	if len(p.recent) == maxRecent {
		copy(p.recent, p.recent[1:])
		p.recent = p.recent[:maxRecent-1]
	}
	p.recent = append(p.recent, base)
}

// forget drops remembered bases below start (deleted by retention).
func (p *partition) forget(start int64) {
	i := 0
	for i < len(p.recent) && p.recent[i] < start {
		i++
	}
	p.recent = append(p.recent[:0], p.recent[i:]...)
}

// recentBase returns the base of the remembered segment holding off.
func (p *partition) recentBase(off int64) (int64, bool) {
	if len(p.recent) == 0 || off < p.recent[0] || off >= p.rec.Next {
		return 0, false
	}
	i := sort.Search(len(p.recent), func(i int) bool { return p.recent[i] > off }) - 1
	return p.recent[i], true
}

// last returns the partition's highest allocated offset (-1 when empty).
func (p *partition) last() Offset { return Offset(p.rec.Next - 1) }

// row is one (partition, consumer group) cursor.
type row struct {
	p       *partition
	group   string
	rec     keyspace.CursorRecord
	dirty   bool
	deleted bool
}

func (r *row) leaseLive(now int64) bool {
	return r.rec.Lease != (ID{}) && r.rec.LeaseExpiresAt > now
}

// leaseRef finds a cursor row holding a lease id.
type leaseRef struct {
	p     *partition
	group string
}

func newQueue(name string, rec keyspace.QueueRecord, c Config) *queue {
	rec.Options = nil
	return &queue{name: name, rec: rec, config: c, byName: map[string]*partition{}, subs: map[string]*sub{}}
}

func (q *queue) addPartition(p *partition) {
	q.byName[p.rec.Name] = p
	i := sort.Search(len(q.parts), func(i int) bool { return q.parts[i].rec.Name >= p.rec.Name })
	q.parts = append(q.parts, nil)
	copy(q.parts[i+1:], q.parts[i:])
	q.parts[i] = p
}

// sortedGroups returns a partition's group names in order.
func (p *partition) sortedGroups() []string {
	gs := make([]string, 0, len(p.cursors))
	for g := range p.cursors {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	return gs
}

// sortedSubs returns a queue's subscribed group names in order.
func (q *queue) sortedSubs() []string {
	gs := make([]string, 0, len(q.subs))
	for g := range q.subs {
		gs = append(gs, g)
	}
	sort.Strings(gs)
	return gs
}
