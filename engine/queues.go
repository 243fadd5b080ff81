package engine

import (
	"github.com/queenmq/queen/engine/keyspace"
)

// ConfigureCmd creates or edits a queue (docs/decisions.md C5): options in Set take
// their value, options in Reset go back to their default, and every other
// option keeps its value, unless Replace resets everything not in Set.
type ConfigureCmd struct {
	Queue        string
	Namespace    string
	NamespaceSet bool
	Task         string
	TaskSet      bool
	Set          []OptionValue
	Reset        []Option
	Replace      bool
}

// QueueInfo describes a queue and its partitions.
type QueueInfo struct {
	ID         ID
	Name       string
	Namespace  string
	Task       string
	CreatedAt  int64
	Config     Config
	Partitions []PartitionInfo
	Groups     []Subscription
}

// PartitionInfo describes a partition. Messages Start..Next-1 are retained.
type PartitionInfo struct {
	ID ID
	keyspace.PartitionRecord
	Cursors []CursorInfo // Group, committed and lease state only
}

// configure applies a configure command and returns the queue's effective
// state. It also creates the queue's Default partition, as Queen does.
func (b *Batch) configure(st Stamp, cmd ConfigureCmd) (QueueInfo, error) {
	if err := ValidateQueueName(cmd.Queue); err != nil {
		return QueueInfo{}, err
	}
	for _, v := range cmd.Set {
		if err := validateOption(v); err != nil {
			return QueueInfo{}, err
		}
	}
	if b.e.arriving(cmd.Queue) {
		return QueueInfo{}, ErrQueueNotFound
	}
	m := &minter{seed: st.Seed}
	q := b.e.queues[cmd.Queue]
	if q == nil {
		q = newQueue(cmd.Queue, keyspace.QueueRecord{ID: m.next(), CreatedAt: st.Time}, DefaultConfig())
		q.rec.Namespace, q.rec.Task = impliedLabels(cmd.Queue)
		b.e.queues[cmd.Queue] = q
	}
	if cmd.Replace {
		q.config = DefaultConfig()
	}
	for _, o := range cmd.Reset {
		if o > 0 && int(o) < numOptions {
			q.config.values[o] = o.Default()
		}
	}
	for _, v := range cmd.Set {
		q.config.values[v.Option] = v.Value
	}
	if cmd.NamespaceSet {
		q.rec.Namespace = cmd.Namespace
	}
	if cmd.TaskSet {
		q.rec.Task = cmd.Task
	}
	b.putQueue(q)
	b.partitionFor(q, DefaultPartition, st.Time, m)
	return b.e.queueInfo(q), nil
}

// deleteQueue removes a queue with its partitions, messages, cursors and
// subscriptions. Dead-letter rows are snapshots and stay until deleted or
// replayed. It reports whether the queue existed.
func (b *Batch) deleteQueue(name string) bool {
	q := b.e.queues[name]
	if q == nil {
		return false
	}
	for _, p := range q.parts {
		for _, g := range p.sortedGroups() {
			b.deleteRow(p.cursors[g])
		}
		if err := b.deleteTraces(p, 0, p.rec.Next); err != nil {
			b.fail(err)
		}
		lo := keyspace.SegmentPrefix(p.id)
		b.delRange(lo, keyspace.PrefixEnd(lo))
		lo = keyspace.Txn(p.id, "")
		b.delRange(lo, keyspace.PrefixEnd(lo))
		lo = keyspace.TxnExpiryPrefix(p.id)
		b.delRange(lo, keyspace.PrefixEnd(lo))
		b.del(keyspace.Partition(p.id))
		delete(b.e.parts, p.id)
	}
	for _, g := range q.sortedSubs() {
		b.del(keyspace.Sub(q.name, g))
	}
	b.del(keyspace.Queue(q.name))
	delete(b.e.queues, name)
	return true
}

// Queues describes every queue, ordered by name.
func (e *Engine) Queues() ([]QueueInfo, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	qs := e.sortedQueues()
	out := make([]QueueInfo, 0, len(qs))
	for _, q := range qs {
		out = append(out, e.queueInfo(q))
	}
	return out, nil
}

// Queue describes one queue.
func (e *Engine) Queue(name string) (QueueInfo, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return QueueInfo{}, err
	}
	q := e.queues[name]
	if q == nil {
		return QueueInfo{}, ErrQueueNotFound
	}
	return e.queueInfo(q), nil
}

// QueueConfig returns a queue's effective configuration.
func (e *Engine) QueueConfig(name string) (Config, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if q := e.queues[name]; q != nil {
		return q.config, true
	}
	return Config{}, false
}

func (e *Engine) queueInfo(q *queue) QueueInfo {
	info := QueueInfo{ID: q.rec.ID, Name: q.name, Namespace: q.rec.Namespace, Task: q.rec.Task,
		CreatedAt: q.rec.CreatedAt, Config: q.config}
	for _, p := range q.parts {
		pi := PartitionInfo{ID: p.id, PartitionRecord: p.rec}
		for _, g := range p.sortedGroups() {
			r := p.cursors[g]
			pi.Cursors = append(pi.Cursors, CursorInfo{Group: g, Queue: q.name, Partition: p.rec.Name,
				PartitionID: p.id, CursorRecord: r.rec})
		}
		info.Partitions = append(info.Partitions, pi)
	}
	for _, g := range q.sortedSubs() {
		info.Groups = append(info.Groups, Subscription{Group: g, Queue: q.name, SubRecord: q.subs[g].rec})
	}
	return info
}

// PartitionByID describes the partition with this id.
func (e *Engine) PartitionByID(id ID) (queue string, info PartitionInfo, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	p := e.parts[id]
	if p == nil {
		return "", PartitionInfo{}, false
	}
	return p.q.name, PartitionInfo{ID: p.id, PartitionRecord: p.rec}, true
}

// HasLease reports whether a live or expired lease with this id holds rows
// here (a node spreading queues over Raft groups asks each group's engine
// which one a lease belongs to).
func (e *Engine) HasLease(id ID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.leases[id]) > 0
}

// LeaseQueue returns the queue whose rows a lease holds (a Host prefers,
// of two groups holding a lease while a moved queue's source copy is
// dropped, the one the directory places the queue in).
func (e *Engine) LeaseQueue(id ID) (string, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if refs := e.leases[id]; len(refs) > 0 {
		return refs[0].p.q.name, true
	}
	return "", false
}
