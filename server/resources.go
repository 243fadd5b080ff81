package server

import (
	"cmp"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/counts"
	"github.com/queenmq/queen/server/wire"
)

// listQueues answers GET /api/v1/resources/queues.
func (s *Server) listQueues(ctx *fasthttp.RequestCtx, _ *params) {
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startReply(ctx)
	w.Object("")
	w.Array("queues")
	for _, q := range filterQueues(ctx.QueryArgs(), qs) {
		counts.WriteQueueSummary(&w, &q, counts.Queue(&q, now, &dlq), s.queueGroup(q.Name))
	}
	w.EndArray()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// getQueue answers GET /api/v1/resources/queues/{queue}.
func (s *Server) getQueue(ctx *fasthttp.RequestCtx, p *params) {
	q, dlq, err := s.queueWithDLQ(p.get("queue"))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startReply(ctx)
	w.Object("")
	w.ID("id", q.ID)
	w.Str("name", q.Name)
	w.Str("namespace", q.Namespace)
	w.Str("task", q.Task)
	w.TimeMillis("createdAt", q.CreatedAt)
	if g := s.queueGroup(q.Name); g != 0 {
		w.Int("raftGroup", int64(g)) // beyond Queen: the queue's Raft group (--groups)
	}
	writeOptions(&w, "config", q.Config)
	var totals counts.Counts
	w.Array("partitions")
	for i := range q.Partitions {
		pi := &q.Partitions[i]
		c := counts.Partition(pi, now)
		c.DeadLetter = dlq.ByPartition[pi.ID]
		totals.Add(c)
		w.Object("")
		w.ID("id", pi.ID)
		w.Str("name", pi.Name)
		w.TimeMillis("createdAt", pi.CreatedAt)
		counts.Write(&w, "stats", c)
		if pi.Next > pi.Start {
			w.TimeMicros("newestMessage", pi.LastWriteAt)
		} else {
			w.Null("newestMessage")
		}
		w.EndObject()
	}
	w.EndArray()
	totals.DeadLetter = int64(dlq.Total)
	counts.Write(&w, "totals", totals)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// deleteQueue answers DELETE /api/v1/resources/queues/{queue}. Dead-letter
// rows are snapshots and survive it.
func (s *Server) deleteQueue(ctx *fasthttp.RequestCtx, p *params) {
	name := p.get("queue")
	existed, err := raft.Propose[bool](s.ctx, s.forwarding(ctx), engine.DeleteQueueCmd{Queue: name})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("deleted", true)
	w.Str("queue", name)
	w.Bool("existed", existed)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// overview answers GET /api/v1/resources/overview. Its rates are the
// analytics minutes' (analytics.CurrentRates), so a follower has the leader answer,
// as for /api/v1/status.
func (s *Server) overview(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayAnalytics(ctx) {
		return
	}
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, "")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	var (
		total      counts.Counts
		partitions int
		namespaces = map[string]bool{}
		tasks      = map[string]bool{}
	)
	for i := range qs {
		total.Add(counts.Queue(&qs[i], now, &dlq))
		partitions += len(qs[i].Partitions)
		if qs[i].Namespace != "" {
			namespaces[qs[i].Namespace] = true
		}
		if qs[i].Task != "" {
			tasks[qs[i].Task] = true
		}
	}
	total.DeadLetter = int64(dlq.Total)
	var timeLags, offsetLags []float64
	for i := range cursors {
		timeLags = append(timeLags, counts.TimeLag(&cursors[i], now))
		offsetLags = append(offsetLags, float64(cursors[i].OffsetLag))
	}
	w := startReply(ctx)
	w.Object("")
	w.Int("queues", int64(len(qs)))
	w.Int("partitions", int64(partitions))
	w.Int("namespaces", int64(len(namespaces)))
	w.Int("tasks", int64(len(tasks)))
	counts.Write(&w, "messages", total)
	w.Object("lag")
	writeSpread(&w, "time", timeLags)
	writeSpread(&w, "offset", offsetLags)
	w.EndObject()
	ingested, processed := s.an.CurrentRates()
	w.Object("throughput")
	w.Float("ingestedPerSecond", ingested)
	w.Float("processedPerSecond", processed)
	w.EndObject()
	w.TimeMillis("timestamp", now)
	w.Int("statsAge", 0)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// writeSpread writes {avg, median, min, max} of vs (all 0 when empty).
func writeSpread(w *wire.Writer, k string, vs []float64) {
	var avg, med, lo, hi float64
	if len(vs) > 0 {
		slices.Sort(vs)
		lo, hi, med = vs[0], vs[len(vs)-1], vs[len(vs)/2]
		for _, v := range vs {
			avg += v
		}
		avg /= float64(len(vs))
	}
	w.Object(k)
	w.Float("avg", avg)
	w.Float("median", med)
	w.Float("min", lo)
	w.Float("max", hi)
	w.EndObject()
}

// listNamespaces answers GET /api/v1/resources/namespaces.
func (s *Server) listNamespaces(ctx *fasthttp.RequestCtx, _ *params) {
	s.labels(ctx, "namespaces", "namespace", "taskCount",
		func(q *engine.QueueInfo) (string, string) { return q.Namespace, q.Task })
}

// listTasks answers GET /api/v1/resources/tasks.
func (s *Server) listTasks(ctx *fasthttp.RequestCtx, _ *params) {
	s.labels(ctx, "tasks", "task", "namespaceCount",
		func(q *engine.QueueInfo) (string, string) { return q.Task, q.Namespace })
}

// labels lists queues grouped by one label (namespace or task), counting
// the other label's distinct values.
func (s *Server) labels(ctx *fasthttp.RequestCtx, list, field, otherCount string, label func(*engine.QueueInfo) (string, string)) {
	qs, err := s.broker.Queues()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	type group struct {
		name           string
		queues, parts  int64
		total, pending int64
		others         map[string]bool
	}
	var groups []*group
	byName := map[string]*group{}
	for i := range qs {
		name, other := label(&qs[i])
		if name == "" {
			continue
		}
		g := byName[name]
		if g == nil {
			g = &group{name: name, others: map[string]bool{}}
			byName[name] = g
			groups = append(groups, g)
		}
		c := counts.Queue(&qs[i], now, &counts.DLQ{})
		g.queues++
		g.parts += int64(len(qs[i].Partitions))
		g.total += c.Total
		g.pending += c.Pending
		if other != "" {
			g.others[other] = true
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return cmp.Compare(a.name, b.name) })
	w := startReply(ctx)
	w.Object("")
	w.Array(list)
	for _, g := range groups {
		w.Object("")
		w.Str(field, g.name)
		w.Str("name", g.name)
		w.Int("queues", g.queues)
		w.Int("queueCount", g.queues)
		w.Int(otherCount, int64(len(g.others)))
		w.Int("partitions", g.parts)
		w.Object("messages")
		w.Int("total", g.total)
		w.Int("pending", g.pending)
		w.EndObject()
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
