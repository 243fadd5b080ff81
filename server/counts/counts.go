package counts

import (
	"cmp"
	"slices"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// Counts are message counts of a partition or a sum of them ("# What the
// counts mean" in the package doc).
type Counts struct {
	Total, Pending, Processing, Completed, DeadLetter int64
}

// Add adds o's counts to c's.
func (c *Counts) Add(o Counts) {
	c.Total += o.Total
	c.Pending += o.Pending
	c.Processing += o.Processing
	c.Completed += o.Completed
	c.DeadLetter += o.DeadLetter
}

// Partition counts a partition's messages at now (Unix microseconds, to
// tell live leases from expired ones). DeadLetter is left 0: it comes from
// the dead-letter indexes (DLQ).
func Partition(p *engine.PartitionInfo, now int64) Counts {
	c := Counts{Total: max(p.Next-p.Start, 0)}
	if len(p.Cursors) == 0 {
		c.Pending = c.Total
		return c
	}
	lag, inflight := int64(-1), int64(0)
	for i := range p.Cursors {
		r := &p.Cursors[i]
		consumed := max(r.Committed, p.Start-1)
		l := max(p.Next-1-consumed, 0)
		f := int64(0)
		if r.Lease != (engine.ID{}) && r.LeaseExpiresAt > now && r.BatchEnd > consumed {
			f = min(r.BatchEnd, p.Next-1) - consumed
		}
		if l > lag {
			lag, inflight = l, f
		}
	}
	c.Processing = inflight
	c.Pending = lag - inflight
	c.Completed = c.Total - lag
	return c
}

// Queue sums a queue's partition counts; its DeadLetter is the queue's
// share of dlq.
func Queue(q *engine.QueueInfo, now int64, dlq *DLQ) Counts {
	var c Counts
	for i := range q.Partitions {
		c.Add(Partition(&q.Partitions[i], now))
	}
	c.DeadLetter = dlq.ByQueue[q.Name]
	return c
}

// Write writes c as the object k:
//
//	{"total", "pending", "processing", "completed", "failed": 0, "deadLetter"}
func Write(w *wire.Writer, k string, c Counts) {
	w.Object(k)
	Members(w, c)
	w.EndObject()
}

// Members writes c's members into the object being written (the status
// overview's totals carry them flat as well as under "messages").
func Members(w *wire.Writer, c Counts) {
	w.Int("total", c.Total)
	w.Int("pending", c.Pending)
	w.Int("processing", c.Processing)
	w.Int("completed", c.Completed)
	w.Int("failed", 0)
	w.Int("deadLetter", c.DeadLetter)
}

// Filter returns the queues in the namespace and with the task given (""
// matches any), newest first, in a new slice: the broker's may be shared.
func Filter(qs []engine.QueueInfo, namespace, task string) []engine.QueueInfo {
	out := make([]engine.QueueInfo, 0, len(qs))
	for _, q := range qs {
		if (namespace == "" || q.Namespace == namespace) && (task == "" || q.Task == task) {
			out = append(out, q)
		}
	}
	slices.SortStableFunc(out, func(a, b engine.QueueInfo) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	return out
}

// WriteQueueSummary writes a queue as the queue lists show it, with the
// columns the CLI's table looks for. group is the queue's Raft group, 0
// when one group holds every queue (then not written).
func WriteQueueSummary(w *wire.Writer, q *engine.QueueInfo, c Counts, group uint32) {
	w.Object("")
	w.ID("id", q.ID)
	w.Str("name", q.Name)
	w.Str("namespace", q.Namespace)
	w.Str("task", q.Task)
	w.TimeMillis("createdAt", q.CreatedAt)
	w.Int("partitions", int64(len(q.Partitions)))
	w.Int("partitionCount", int64(len(q.Partitions)))
	w.Object("messages")
	w.Int("total", c.Total)
	w.Int("pending", c.Pending)
	w.Int("processing", c.Processing)
	w.EndObject()
	w.Int("priority", q.Config.Get(engine.OptPriority))
	w.Int("leaseTime", q.Config.Get(engine.OptLeaseTime))
	w.Int("retryLimit", q.Config.Get(engine.OptRetryLimit))
	w.Int("maxSize", q.Config.Get(engine.OptMaxSize))
	w.Bool("encryptionEnabled", q.Config.Bool(engine.OptEncryptionEnabled))
	if group != 0 {
		w.Int("raftGroup", int64(group)) // beyond Queen: the queue's Raft group (--groups)
	}
	w.EndObject()
}

// TimeLag is the age in seconds at now (Unix microseconds) of the oldest
// message a cursor has not consumed (0 when it is at the head).
func TimeLag(c *engine.CursorInfo, now int64) float64 {
	if c.OffsetLag == 0 || c.OldestUnconsumedAt == 0 {
		return 0
	}
	return float64(max(now-c.OldestUnconsumedAt, 0)) / 1e6
}
