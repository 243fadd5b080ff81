package server

import (
	"cmp"
	"slices"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/counts"
)

// status answers GET /api/v1/status?from&to&queue&namespace&task: the
// dashboard summary. The store's figures are read as on any read route;
// the time series, the workers and the request totals are the analytics
// minutes (package analytics), so a follower has the leader answer, as
// for the analytics routes.
func (s *Server) status(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayAnalytics(ctx) {
		return
	}
	q, err := s.an.ParseQuery(ctx.QueryArgs())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	var (
		total                      counts.Counts
		leases, leasedParts, batch int64
	)
	args := ctx.QueryArgs()
	qs = filterQueues(args, qs)
	var names map[string]bool // the queues the series count, nil for all
	if q.Queue() != "" || len(args.Peek("namespace")) > 0 || len(args.Peek("task")) > 0 {
		names = map[string]bool{}
		qs = slices.DeleteFunc(qs, func(e engine.QueueInfo) bool { return q.Queue() != "" && e.Name != q.Queue() })
		for i := range qs {
			names[qs[i].Name] = true
		}
	}
	w := startReply(ctx)
	q.Head(&w, true)
	q.WriteThroughput(&w, names)
	w.Array("queues")
	for i := range qs {
		qi := &qs[i]
		total.Add(counts.Queue(qi, now, &dlq))
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
		w.Object("")
		w.ID("id", qi.ID)
		w.Str("name", qi.Name)
		w.Str("namespace", qi.Namespace)
		w.Str("task", qi.Task)
		w.Int("partitions", int64(len(qi.Partitions)))
		w.Int("totalConsumed", consumed)
		w.EndObject()
	}
	w.EndArray()
	total.DeadLetter = int64(dlq.Total)
	w.Object("messages")
	w.Int("total", total.Total)
	w.Int("pending", total.Pending)
	w.Int("processing", total.Processing)
	w.Int("completed", total.Completed)
	w.Int("failed", 0)
	w.Int("deadLetter", total.DeadLetter)
	q.WriteRequests(&w)
	w.EndObject()
	w.Object("leases")
	w.Int("active", leases)
	w.Int("partitionsWithLeases", leasedParts)
	w.Int("totalBatchSize", batch)
	w.Int("totalAcked", 0)
	w.EndObject()
	w.Object("deadLetterQueue")
	w.Int("totalMessages", int64(dlq.Total))
	w.Int("affectedPartitions", int64(len(dlq.ByPartition)))
	w.Array("topErrors")
	type errCount struct {
		text string
		n    int64
	}
	var errs []errCount
	for text, n := range dlq.ByError {
		errs = append(errs, errCount{text, n})
	}
	slices.SortFunc(errs, func(a, b errCount) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.text, b.text)) })
	for _, e := range errs[:min(len(errs), 10)] {
		w.Object("")
		w.Str("error", e.text)
		w.Int("count", e.n)
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
	s.an.WriteWorkers(&w, &q)
	dbErrors, ackFailed := q.Errors()
	w.Object("errors")
	w.Int("dbErrors", dbErrors)
	w.Int("ackFailed", ackFailed)
	w.Int("dlqMessages", int64(dlq.Total))
	w.EndObject()
	w.Int("statsAge", 0)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
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
	qs = filterQueues(args, qs)
	qs = qs[min(offset, len(qs)):]
	qs = qs[:min(limit, len(qs))]
	now := time.Now().UnixMicro()
	w := startReply(ctx)
	w.Object("")
	w.Array("queues")
	for i := range qs {
		counts.WriteQueueSummary(&w, &qs[i], counts.Queue(&qs[i], now, &dlq), s.queueGroup(qs[i].Name))
	}
	w.EndArray()
	w.Object("pagination")
	w.Int("limit", int64(limit))
	w.Int("offset", int64(offset))
	w.EndObject()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// statusQueue answers GET /api/v1/status/queues/{queue}.
func (s *Server) statusQueue(ctx *fasthttp.RequestCtx, p *params) {
	q, dlq, err := s.queueWithDLQ(p.get("queue"))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startReply(ctx)
	w.Object("")
	w.Object("queue")
	w.ID("id", q.ID)
	w.Str("name", q.Name)
	w.Str("namespace", q.Namespace)
	w.Str("task", q.Task)
	w.Int("priority", q.Config.Get(engine.OptPriority))
	w.TimeMillis("createdAt", q.CreatedAt)
	w.Object("config")
	w.Int("leaseTime", q.Config.Get(engine.OptLeaseTime))
	w.Int("retryLimit", q.Config.Get(engine.OptRetryLimit))
	w.Int("retryDelay", q.Config.Get(engine.OptRetryDelay))
	w.Int("ttl", q.Config.Get(engine.OptTTL))
	w.Int("maxQueueSize", q.Config.Get(engine.OptMaxSize))
	w.Bool("deadLetterQueue", q.Config.DeadLetterEnabled())
	w.EndObject()
	w.EndObject()
	var totals counts.Counts
	w.Array("partitions")
	for i := range q.Partitions {
		pi := &q.Partitions[i]
		c := counts.Partition(pi, now)
		c.DeadLetter = dlq.ByPartition[pi.ID]
		totals.Add(c)
		var consumed, lastActivity int64
		for _, cur := range pi.Cursors {
			consumed += cur.TotalConsumed
			lastActivity = max(lastActivity, cur.LastConsumedAt, cur.LeaseAcquiredAt)
		}
		lastActivity = max(lastActivity, pi.LastWriteAt)
		w.Object("")
		w.ID("id", pi.ID)
		w.Str("name", pi.Name)
		w.TimeMillis("createdAt", pi.CreatedAt)
		counts.Write(&w, "messages", c)
		counts.Write(&w, "stats", c)
		w.Int("total", c.Total)
		w.Int("pending", c.Pending)
		w.Int("processing", c.Processing)
		w.Int("completed", c.Completed)
		w.Int("failed", 0)
		w.Int("dlq", c.DeadLetter)
		w.Object("cursor")
		w.Int("totalConsumed", consumed)
		w.Int("batchesConsumed", 0)
		w.EndObject()
		w.TimeMillis("lastActivity", lastActivity)
		if pi.Next > pi.Start {
			w.TimeMicros("newestMessage", pi.LastWriteAt)
		} else {
			w.Null("newestMessage")
		}
		w.EndObject()
	}
	w.EndArray()
	totals.DeadLetter = int64(dlq.Total)
	w.Object("totals")
	counts.Write(&w, "messages", totals)
	counts.Members(&w, totals)
	w.EndObject()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// analytics answers GET /api/v1/status/analytics: no time series are
// recorded, so dataPoints is empty; the shape is Queen's.
func (s *Server) analytics(ctx *fasthttp.RequestCtx, _ *params) {
	now := time.Now().UnixMicro()
	interval := queryString(ctx.QueryArgs(), "interval")
	if interval == "" {
		interval = "hour"
	}
	w := startReply(ctx)
	w.Object("")
	w.Array("dataPoints")
	w.EndArray()
	w.Str("interval", interval)
	from, err := queryTime(ctx.QueryArgs(), "from")
	if err != nil || from == 0 {
		from = now - int64(time.Hour/time.Microsecond)
	}
	w.TimeMillis("from", from)
	w.TimeMillis("to", now)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// buffers answers GET /api/v1/status/buffers: there is no failover spool.
func (s *Server) buffers(ctx *fasthttp.RequestCtx, _ *params) {
	st := s.broker.Status()
	var pending, failed int64
	if s.spool != nil {
		pending, failed = s.spool.Pending(), s.spool.Failed()
	}
	w := startReply(ctx)
	w.Object("")
	w.Int("pending", pending)
	w.Int("failed", failed)
	w.Bool("dbHealthy", st.HasLeader())
	w.Str("worker", st.ID)
	w.Str("note", "the spool holds pushes made during push maintenance; without a leader pushes answer 503")
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// sharedState answers GET /api/v1/system/shared-state: Queen's UDP peer
// sync has no counterpart here (nodes share state through Raft).
func (s *Server) sharedState(ctx *fasthttp.RequestCtx, _ *params) {
	w := startReply(ctx)
	w.Object("")
	w.Bool("enabled", false)
	w.Str("reason", "not_initialized")
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
