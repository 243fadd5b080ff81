package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/queenmq/queen/engine/keyspace"
)

// Freezing a queue for a move (ARCHITECTURE.md "Step 2, moving a queue").
// While a queue is frozen in a store, every command that would change its
// state there is refused with ErrQueueMoving before it writes anything
// (Batch.Apply asks movingRefusal first), so a consistent view exported
// after the freeze is the queue's last state in this store, and the copy
// imported elsewhere misses nothing. The replication layer retries what
// was refused, routed to wherever the directory places the queue by then.
//
// The mark is a meta key, "moving/<queue>" = the move's epoch (decimal),
// outside the queue's key families: ExportQueue never carries it, and it
// stays after DropQueueCmd removed the queue, as a tombstone that refuses a
// command a stale placement still routes here (a push would otherwise
// create the queue again in the group it left). Commands that cover every
// queue skip a frozen one (a discovery pop, a retention sweep) or are
// refused when they would touch it (a consumer group's deletion or
// subscription change). ImportQueueCmd and DropQueueCmd are the move's own
// and are never refused.

// ErrQueueMoving is the answer to a command for a queue frozen by a move
// (FreezeQueueCmd): nothing was written, and a retry, routed to the
// queue's group once the move ends, may succeed.
var ErrQueueMoving = errors.New("engine: the queue is moving to another group")

// FreezeQueueCmd freezes a queue in this store for the move of epoch
// Epoch, or with Thaw clears the mark that move set. A freeze of a queue
// frozen already takes the new epoch; a thaw of another epoch's mark
// changes nothing (an abort that lost a race with a newer move).
type FreezeQueueCmd struct {
	// Group is the Raft group to freeze in: it routes the command
	// (cluster.Host); the engine does not read it.
	Group uint32
	Queue string
	Epoch uint64
	Thaw  bool
}

// Apply sets or clears the mark. Value: bool, whether it changed. A thaw
// wakes the queue (parked pops may deliver again).
func (c FreezeQueueCmd) Apply(b *Batch, _ Stamp) Result {
	if err := ValidateQueueName(c.Queue); err != nil {
		return Result{Value: false, Err: err}
	}
	e := b.e
	cur, frozen := e.frozen[c.Queue]
	k := keyspace.Meta(movingPrefix + c.Queue)
	switch {
	case c.Thaw && (!frozen || cur != c.Epoch):
		return Result{Value: false}
	case c.Thaw:
		delete(e.frozen, c.Queue)
		b.del(k)
		b.clearMovedParts(c.Queue)
		return Result{Value: true, Wake: []string{c.Queue}}
	case frozen && cur == c.Epoch:
		return Result{Value: false}
	}
	e.frozen[c.Queue] = c.Epoch
	b.set(k, strconv.AppendUint(nil, c.Epoch, 10))
	return Result{Value: true}
}

// Frozen reports the epoch of the move that froze queue here, if any.
func (e *Engine) Frozen(queue string) (uint64, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	ep, ok := e.frozen[queue]
	return ep, ok
}

const movingPrefix = "moving/"

// movedPrefix keys the partitions of a frozen queue dropped here: meta
// "moved/" + the partition id (16 bytes) = the queue's name. They outlive
// the drop with the mark, so that an ack or a DLQ command routed by a
// stale lookup to the group the queue left is refused (ErrQueueMoving) and
// routed again, not answered "partition not found".
const movedPrefix = "moved/"

// tombstoneParts records the partitions of q, frozen, before a drop.
func (b *Batch) tombstoneParts(q *queue) {
	if !b.e.isFrozen(q.name) {
		return
	}
	for _, p := range q.parts {
		b.e.movedParts[p.id] = q.name
		b.set(keyspace.Meta(movedPrefix+string(p.id[:])), []byte(q.name))
	}
}

// clearMovedParts removes queue's dropped partitions (a thaw: the queue
// lives here again, or never left).
func (b *Batch) clearMovedParts(queue string) {
	var ids []ID
	for id, q := range b.e.movedParts {
		if q == queue {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		delete(b.e.movedParts, id)
		b.del(keyspace.Meta(movedPrefix + string(id[:])))
	}
}

// loadFrozen reads the freeze marks and the dropped partitions (load).
func (e *Engine) loadFrozen() error {
	e.frozen = map[string]uint64{}
	e.movedParts = map[ID]string{}
	prefix := keyspace.Meta(movingPrefix)
	err := scanPrefix(e.db, prefix, func(k, v []byte) error {
		ep, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil {
			return keyspace.ErrCorrupt
		}
		e.frozen[string(k[len(prefix):])] = ep
		return nil
	})
	if err != nil {
		return err
	}
	prefix = keyspace.Meta(movedPrefix)
	return scanPrefix(e.db, prefix, func(k, v []byte) error {
		if len(k) != len(prefix)+16 {
			return keyspace.ErrCorrupt
		}
		var id ID
		copy(id[:], k[len(prefix):])
		e.movedParts[id] = string(v)
		return nil
	})
}

// isFrozen reports whether queue is frozen here.
func (e *Engine) isFrozen(queue string) bool {
	_, ok := e.frozen[queue]
	return ok
}

// movingRefusal is the one place a command meets the freeze: the answer
// to c when its footprint (Touches) meets a frozen queue (its Value the
// zero of the type c answers, Err ErrQueueMoving), or ok false when c may
// run. It reads only the model and, for dead-letter commands, the rows at
// the address. A command type Touches does not list is refused while any
// queue is frozen (ErrUnlistedCommand): a command forgotten there must not
// write a queue that is being exported. TestFootprint_EveryCommandIsListed
// (package raft/command) fails for a type of the log's table that is not
// listed.
func (b *Batch) movingRefusal(c Command) (r Result, refused bool) {
	if len(b.e.frozen) == 0 {
		return Result{}, false
	}
	fp, listed := Touches(c)
	switch {
	case !listed:
		return Result{Err: fmt.Errorf("%w: %T", ErrUnlistedCommand, c)}, true
	case !b.meetsFrozen(&fp):
		return Result{}, false
	}
	return Result{Value: fp.Answers, Err: ErrQueueMoving}, true
}

// meetsFrozen reports whether footprint fp meets a frozen queue: a queue
// it names, the queue of a partition or lease it names (a partition
// dropped here with its frozen queue included), the queue of a dead
// letter at its address, or, for a consumer group's command over every
// queue, a frozen queue that group reads. A command over every queue skips
// the frozen ones itself; a move's own commands and the queueless ones
// are never refused.
func (b *Batch) meetsFrozen(fp *Footprint) bool {
	e := b.e
	switch fp.Reach {
	case ReachConsumerGroup:
		for q := range e.frozen {
			if qq := e.queues[q]; qq != nil && (qq.subs[fp.Consumer] != nil || hasCursors(qq, fp.Consumer)) {
				return true
			}
		}
		return false
	case ReachNamed:
	default:
		return false
	}
	for _, q := range fp.Queues {
		if e.isFrozen(q) {
			return true
		}
	}
	for _, id := range fp.Partitions {
		if p := e.parts[id]; p != nil {
			if e.isFrozen(p.q.name) {
				return true
			}
		} else if q, moved := e.movedParts[id]; moved && e.isFrozen(q) {
			return true
		}
	}
	for _, id := range fp.Leases {
		for _, ref := range e.leases[id] {
			if e.isFrozen(ref.p.q.name) {
				return true
			}
		}
	}
	if a := fp.DeadLetters; a != nil {
		rows, err := deadLettersAt(b.pb, a.Partition, a.Transaction, a.Group)
		for _, d := range rows {
			if e.isFrozen(d.Queue) {
				return true
			}
		}
		return err != nil // refused rather than guessed
	}
	return false
}

// hasCursors reports whether consumer group g has a cursor row on q.
func hasCursors(q *queue, g string) bool {
	for _, p := range q.parts {
		if p.cursors[g] != nil {
			return true
		}
	}
	return false
}

// FrozenQueues lists the queues frozen here with their
// epochs: what a move left behind when the node running it stopped.
func (e *Engine) FrozenQueues() map[string]uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make(map[string]uint64, len(e.frozen))
	for q, ep := range e.frozen {
		out[q] = ep
	}
	return out
}
