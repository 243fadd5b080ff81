package server

import (
	"cmp"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// counts are message counts of a partition or a sum of them. They are
// relative to the slowest consumer group on each partition: pending is what
// it has not received, processing what it holds under a live lease,
// completed what it has consumed. A partition no group has touched counts
// everything as pending.
type counts struct {
	total, pending, processing, completed, deadLetter int64
}

func (c *counts) add(o counts) {
	c.total += o.total
	c.pending += o.pending
	c.processing += o.processing
	c.completed += o.completed
	c.deadLetter += o.deadLetter
}

func partitionCounts(p *engine.PartitionInfo, now int64) counts {
	c := counts{total: max(p.Next-p.Start, 0)}
	if len(p.Cursors) == 0 {
		c.pending = c.total
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
	c.processing = inflight
	c.pending = lag - inflight
	c.completed = c.total - lag
	return c
}

func writeCounts(w *wire.Writer, k string, c counts) {
	w.Object(k)
	w.Int("total", c.total)
	w.Int("pending", c.pending)
	w.Int("processing", c.processing)
	w.Int("completed", c.completed)
	w.Int("failed", 0)
	w.Int("deadLetter", c.deadLetter)
	w.EndObject()
}

// dlqLimit caps the rows read to break dead letters down by queue and
// partition; above it the breakdown covers the newest dlqLimit rows.
const dlqLimit = 10000

// dlqSummary breaks the dead-letter queue (of one queue, or all) down.
type dlqSummary struct {
	total       int
	byQueue     map[string]int64
	byPartition map[engine.ID]int64
	byError     map[string]int64
}

func (s *Server) dlqSummary(queue string) (dlqSummary, error) {
	sum := dlqSummary{byQueue: map[string]int64{}, byPartition: map[engine.ID]int64{}, byError: map[string]int64{}}
	_, total, err := s.broker.ListDLQ(engine.DLQFilter{Queue: queue, Limit: 1})
	if err != nil || total == 0 {
		return sum, err
	}
	sum.total = total
	rows, _, err := s.broker.ListDLQ(engine.DLQFilter{Queue: queue, Limit: min(total, dlqLimit)})
	if err != nil {
		return sum, err
	}
	for i := range rows {
		sum.byQueue[rows[i].Queue]++
		sum.byPartition[rows[i].PartitionID]++
		sum.byError[rows[i].Error]++
	}
	return sum, nil
}

// queueCounts sums a queue's partition counts.
func queueCounts(q *engine.QueueInfo, now int64, dlq *dlqSummary) counts {
	var c counts
	for i := range q.Partitions {
		c.add(partitionCounts(&q.Partitions[i], now))
	}
	c.deadLetter = dlq.byQueue[q.Name]
	return c
}

// filterQueues returns the queues matching the namespace and task query
// filters, newest first (in a new slice: the broker's may be shared).
func filterQueues(ctx *fasthttp.RequestCtx, qs []engine.QueueInfo) []engine.QueueInfo {
	args := ctx.QueryArgs()
	ns, task := queryString(args, "namespace"), queryString(args, "task")
	out := make([]engine.QueueInfo, 0, len(qs))
	for _, q := range qs {
		if (ns == "" || q.Namespace == ns) && (task == "" || q.Task == task) {
			out = append(out, q)
		}
	}
	slices.SortStableFunc(out, func(a, b engine.QueueInfo) int { return cmp.Compare(b.CreatedAt, a.CreatedAt) })
	return out
}

// writeQueueSummary writes a queue as the queue lists show it, with the
// columns the CLI's table looks for.
func writeQueueSummary(w *wire.Writer, q *engine.QueueInfo, c counts, group uint32) {
	w.Object("")
	w.ID("id", q.ID)
	w.Str("name", q.Name)
	w.Str("namespace", q.Namespace)
	w.Str("task", q.Task)
	w.TimeMillis("createdAt", q.CreatedAt)
	w.Int("partitions", int64(len(q.Partitions)))
	w.Int("partitionCount", int64(len(q.Partitions)))
	w.Object("messages")
	w.Int("total", c.total)
	w.Int("pending", c.pending)
	w.Int("processing", c.processing)
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

// queueGroup is a queue's Raft group, 0 while it has none or when one
// group holds every queue.
func (s *Server) queueGroup(queue string) uint32 {
	return s.groups.placement(queue)
}

func (s *Server) queuesAndDLQ() ([]engine.QueueInfo, dlqSummary, error) {
	qs, err := s.broker.Queues()
	if err != nil {
		return nil, dlqSummary{}, err
	}
	dlq, err := s.dlqSummary("")
	return qs, dlq, err
}

// queueWithDLQ describes one queue with its dead-letter summary: what the
// two per-queue admin views share.
func (s *Server) queueWithDLQ(name string) (engine.QueueInfo, dlqSummary, error) {
	q, err := s.broker.Queue(name)
	if err != nil {
		return q, dlqSummary{}, err
	}
	dlq, err := s.dlqSummary(q.Name)
	return q, dlq, err
}
