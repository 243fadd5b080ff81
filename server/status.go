package server

import (
	"cmp"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
)

// status answers GET /api/v1/status?from&to&queue&namespace&task: the
// dashboard summary. The store's figures are read as on any read route;
// the time series, the workers and the request totals are the analytics
// minutes (status_series.go), so a follower has the leader answer, as for
// the analytics routes.
func (s *Server) status(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayAnalytics(ctx) {
		return
	}
	q, ok := s.analyticsRange(ctx)
	if !ok {
		return
	}
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	var (
		total                      counts
		leases, leasedParts, batch int64
	)
	args := ctx.QueryArgs()
	qs = filterQueues(ctx, qs)
	var names map[string]bool // the queues the series count, nil for all
	if q.queue != "" || len(args.Peek("namespace")) > 0 || len(args.Peek("task")) > 0 {
		names = map[string]bool{}
		qs = slices.DeleteFunc(qs, func(e engine.QueueInfo) bool { return q.queue != "" && e.Name != q.queue })
		for i := range qs {
			names[qs[i].Name] = true
		}
	}
	buckets := q.statusBuckets(names)
	w := q.head(ctx, true)
	w.int("pointCount", int64(len(buckets)))
	q.writeThroughputRows(&w, buckets, names != nil)
	w.array("queues")
	for i := range qs {
		qi := &qs[i]
		total.add(queueCounts(qi, now, &dlq))
		var consumed int64
		for j := range qi.Partitions {
			leased := false
			for _, c := range qi.Partitions[j].Cursors {
				consumed += c.TotalConsumed
				if c.Lease != (engine.ID{}) && c.LeaseExpiresAt > now {
					leases++
					leased = true
					batch += max(c.BatchEnd-c.Committed, 0)
				}
			}
			if leased {
				leasedParts++
			}
		}
		w.object("")
		w.id("id", qi.ID)
		w.str("name", qi.Name)
		w.str("namespace", qi.Namespace)
		w.str("task", qi.Task)
		w.int("partitions", int64(len(qi.Partitions)))
		w.int("totalConsumed", consumed)
		w.endObject()
	}
	w.endArray()
	total.deadLetter = int64(dlq.total)
	sums := q.totals()
	w.object("messages")
	w.int("total", total.total)
	w.int("pending", total.pending)
	w.int("processing", total.processing)
	w.int("completed", total.completed)
	w.int("failed", 0)
	w.int("deadLetter", total.deadLetter)
	w.object("requests")
	w.int("push", sums.PushRequests)
	w.int("pop", sums.PopRequests)
	w.int("ack", sums.AckRequests)
	w.endObject()
	writeBatchEfficiency(&w, &sums)
	w.endObject()
	w.object("leases")
	w.int("active", leases)
	w.int("partitionsWithLeases", leasedParts)
	w.int("totalBatchSize", batch)
	w.int("totalAcked", 0)
	w.endObject()
	w.object("deadLetterQueue")
	w.int("totalMessages", int64(dlq.total))
	w.int("affectedPartitions", int64(len(dlq.byPartition)))
	w.array("topErrors")
	type errCount struct {
		text string
		n    int64
	}
	var errs []errCount
	for text, n := range dlq.byError {
		errs = append(errs, errCount{text, n})
	}
	slices.SortFunc(errs, func(a, b errCount) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.text, b.text)) })
	for _, e := range errs[:min(len(errs), 10)] {
		w.object("")
		w.str("error", e.text)
		w.int("count", e.n)
		w.endObject()
	}
	w.endArray()
	w.endObject()
	s.writeWorkers(&w, &q)
	w.object("errors")
	w.int("dbErrors", sums.DBErrors)
	w.int("ackFailed", sums.AckFailed)
	w.int("dlqMessages", int64(dlq.total))
	w.endObject()
	w.int("statsAge", 0)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// statusQueues answers GET /api/v1/status/queues?namespace&task&limit&offset.
func (s *Server) statusQueues(ctx *fasthttp.RequestCtx, _ *params) {
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	args := ctx.QueryArgs()
	limit, offset, err := pageArgs(args, 100, 10000)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	qs = filterQueues(ctx, qs)
	qs = qs[min(offset, len(qs)):]
	qs = qs[:min(limit, len(qs))]
	now := time.Now().UnixMicro()
	w := startBody(ctx)
	w.object("")
	w.array("queues")
	for i := range qs {
		writeQueueSummary(&w, &qs[i], queueCounts(&qs[i], now, &dlq), s.queueGroup(qs[i].Name))
	}
	w.endArray()
	w.object("pagination")
	w.int("limit", int64(limit))
	w.int("offset", int64(offset))
	w.endObject()
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// statusQueue answers GET /api/v1/status/queues/{queue}.
func (s *Server) statusQueue(ctx *fasthttp.RequestCtx, p *params) {
	q, dlq, err := s.queueWithDLQ(p.get("queue"))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startBody(ctx)
	w.object("")
	w.object("queue")
	w.id("id", q.ID)
	w.str("name", q.Name)
	w.str("namespace", q.Namespace)
	w.str("task", q.Task)
	w.int("priority", q.Config.Get(engine.OptPriority))
	w.timeMillis("createdAt", q.CreatedAt)
	w.object("config")
	w.int("leaseTime", q.Config.Get(engine.OptLeaseTime))
	w.int("retryLimit", q.Config.Get(engine.OptRetryLimit))
	w.int("retryDelay", q.Config.Get(engine.OptRetryDelay))
	w.int("ttl", q.Config.Get(engine.OptTTL))
	w.int("maxQueueSize", q.Config.Get(engine.OptMaxSize))
	w.bool("deadLetterQueue", q.Config.DeadLetterEnabled())
	w.endObject()
	w.endObject()
	var totals counts
	w.array("partitions")
	for i := range q.Partitions {
		pi := &q.Partitions[i]
		c := partitionCounts(pi, now)
		c.deadLetter = dlq.byPartition[pi.ID]
		totals.add(c)
		var consumed, lastActivity int64
		for _, cur := range pi.Cursors {
			consumed += cur.TotalConsumed
			lastActivity = max(lastActivity, cur.LastConsumedAt, cur.LeaseAcquiredAt)
		}
		lastActivity = max(lastActivity, pi.LastWriteAt)
		w.object("")
		w.id("id", pi.ID)
		w.str("name", pi.Name)
		w.timeMillis("createdAt", pi.CreatedAt)
		writeCounts(&w, "messages", c)
		writeCounts(&w, "stats", c)
		w.int("total", c.total)
		w.int("pending", c.pending)
		w.int("processing", c.processing)
		w.int("completed", c.completed)
		w.int("failed", 0)
		w.int("dlq", c.deadLetter)
		w.object("cursor")
		w.int("totalConsumed", consumed)
		w.int("batchesConsumed", 0)
		w.endObject()
		w.timeMillis("lastActivity", lastActivity)
		if pi.Next > pi.Start {
			w.timeMicros("newestMessage", pi.LastWriteAt)
		} else {
			w.null("newestMessage")
		}
		w.endObject()
	}
	w.endArray()
	totals.deadLetter = int64(dlq.total)
	w.object("totals")
	writeCounts(&w, "messages", totals)
	w.int("total", totals.total)
	w.int("pending", totals.pending)
	w.int("processing", totals.processing)
	w.int("completed", totals.completed)
	w.int("failed", 0)
	w.int("deadLetter", totals.deadLetter)
	w.endObject()
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// analytics answers GET /api/v1/status/analytics: no time series are
// recorded, so dataPoints is empty; the shape is Queen's.
func (s *Server) analytics(ctx *fasthttp.RequestCtx, _ *params) {
	now := time.Now().UnixMicro()
	interval := queryString(ctx.QueryArgs(), "interval")
	if interval == "" {
		interval = "hour"
	}
	w := startBody(ctx)
	w.object("")
	w.array("dataPoints")
	w.endArray()
	w.str("interval", interval)
	from, err := queryTime(ctx.QueryArgs(), "from")
	if err != nil || from == 0 {
		from = now - int64(time.Hour/time.Microsecond)
	}
	w.timeMillis("from", from)
	w.timeMillis("to", now)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// buffers answers GET /api/v1/status/buffers: there is no failover spool.
func (s *Server) buffers(ctx *fasthttp.RequestCtx, _ *params) {
	st := s.broker.Status()
	var pending, failed int64
	if s.spool != nil {
		pending, failed = s.spool.pending.Load(), s.spool.failed.Load()
	}
	w := startBody(ctx)
	w.object("")
	w.int("pending", pending)
	w.int("failed", failed)
	w.bool("dbHealthy", st.HasLeader())
	w.str("worker", st.ID)
	w.str("note", "the spool holds pushes made during push maintenance; without a leader pushes answer 503")
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}
