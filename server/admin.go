package server

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
)

// configure answers POST /api/v1/configure (C5): options merge into the
// queue's configuration, an explicit null resets one, "replace": true resets
// every option not given. namespace/task strings set the labels; absent or
// null keeps them (the JS SDK always sends null when unset).
func (s *Server) configure(ctx *fasthttp.RequestCtx, _ *params) {
	var (
		cmd      engine.ConfigureCmd
		hasQueue bool
	)
	err := decodeObject(ctx.PostBody(), false, func(sc *scanner, key []byte) (err error) {
		switch string(key) {
		case "queue":
			cmd.Queue, hasQueue, err = sc.optString("queue")
		case "namespace":
			cmd.Namespace, cmd.NamespaceSet, err = sc.optString("namespace")
		case "task":
			cmd.Task, cmd.TaskSet, err = sc.optString("task")
		case "replace":
			cmd.Replace, _, err = sc.optBool("replace")
		case "options":
			switch sc.peek() {
			case 'n':
				return sc.literal("null")
			case '{':
				return sc.object(func(sc *scanner, key []byte) error { return decodeOption(sc, key, &cmd) })
			}
			return skipThen(sc, badRequest("options must be an object"))
		default:
			return sc.skip()
		}
		return err
	})
	if err == nil && (!hasQueue || cmd.Queue == "") {
		err = badRequest("queue is required")
	}
	if err == nil {
		err = engine.ValidateQueueName(cmd.Queue)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	info, err := s.broker.Configure(s.ctx, cmd)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if s.crypt == nil && info.Config.Bool(engine.OptEncryptionEnabled) {
		s.log.Warn("queue has encryptionEnabled but QUEEN_ENCRYPTION_KEY is not set: its payloads are stored in plaintext",
			"queue", info.Name)
	}
	w := startBody(ctx)
	w.object("")
	w.bool("configured", true)
	w.id("queueId", info.ID)
	for i := range info.Partitions {
		if info.Partitions[i].Name == engine.DefaultPartition {
			w.id("partitionId", info.Partitions[i].ID)
		}
	}
	w.str("queue", info.Name)
	w.str("namespace", info.Namespace)
	w.str("task", info.Task)
	writeOptions(&w, "options", info.Config)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// decodeOption reads one member of configure's options. Unknown keys are
// ignored; null resets the option (C5); ints must be non-negative integers,
// booleans booleans.
func decodeOption(sc *scanner, key []byte, cmd *engine.ConfigureCmd) error {
	o, ok := engine.OptionByName(string(key))
	if !ok {
		return sc.skip()
	}
	if sc.peek() == 'n' {
		cmd.Reset = append(cmd.Reset, o)
		return sc.literal("null")
	}
	var v int64
	if o.Kind() == engine.KindBool {
		b, _, err := sc.optBool(o.Name())
		if err != nil {
			return err
		}
		if b {
			v = 1
		}
	} else {
		var err error
		if v, _, err = sc.optInt(o.Name()); err != nil {
			return err
		}
		if v < 0 {
			return badRequest(o.Name() + " must not be negative")
		}
	}
	cmd.Set = append(cmd.Set, engine.OptionValue{Option: o, Value: v})
	return nil
}

// writeOptions writes every option with its effective value; booleans as
// JSON booleans.
func writeOptions(w *jsonWriter, k string, c engine.Config) {
	w.object(k)
	for _, o := range engine.AllOptions() {
		if o.Kind() == engine.KindBool {
			w.bool(o.Name(), c.Bool(o))
		} else {
			w.int(o.Name(), c.Get(o))
		}
	}
	w.endObject()
}

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

func writeCounts(w *jsonWriter, k string, c counts) {
	w.object(k)
	w.int("total", c.total)
	w.int("pending", c.pending)
	w.int("processing", c.processing)
	w.int("completed", c.completed)
	w.int("failed", 0)
	w.int("deadLetter", c.deadLetter)
	w.endObject()
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
func writeQueueSummary(w *jsonWriter, q *engine.QueueInfo, c counts) {
	w.object("")
	w.id("id", q.ID)
	w.str("name", q.Name)
	w.str("namespace", q.Namespace)
	w.str("task", q.Task)
	w.timeMillis("createdAt", q.CreatedAt)
	w.int("partitions", int64(len(q.Partitions)))
	w.int("partitionCount", int64(len(q.Partitions)))
	w.object("messages")
	w.int("total", c.total)
	w.int("pending", c.pending)
	w.int("processing", c.processing)
	w.endObject()
	w.int("priority", q.Config.Get(engine.OptPriority))
	w.int("leaseTime", q.Config.Get(engine.OptLeaseTime))
	w.int("retryLimit", q.Config.Get(engine.OptRetryLimit))
	w.int("maxSize", q.Config.Get(engine.OptMaxSize))
	w.bool("encryptionEnabled", q.Config.Bool(engine.OptEncryptionEnabled))
	w.endObject()
}

// listQueues answers GET /api/v1/resources/queues.
func (s *Server) listQueues(ctx *fasthttp.RequestCtx, _ *params) {
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startBody(ctx)
	w.object("")
	w.array("queues")
	for _, q := range filterQueues(ctx, qs) {
		writeQueueSummary(&w, &q, queueCounts(&q, now, &dlq))
	}
	w.endArray()
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
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

// getQueue answers GET /api/v1/resources/queues/{queue}.
func (s *Server) getQueue(ctx *fasthttp.RequestCtx, p *params) {
	q, dlq, err := s.queueWithDLQ(p.get("queue"))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startBody(ctx)
	w.object("")
	w.id("id", q.ID)
	w.str("name", q.Name)
	w.str("namespace", q.Namespace)
	w.str("task", q.Task)
	w.timeMillis("createdAt", q.CreatedAt)
	writeOptions(&w, "config", q.Config)
	var totals counts
	w.array("partitions")
	for i := range q.Partitions {
		pi := &q.Partitions[i]
		c := partitionCounts(pi, now)
		c.deadLetter = dlq.byPartition[pi.ID]
		totals.add(c)
		w.object("")
		w.id("id", pi.ID)
		w.str("name", pi.Name)
		w.timeMillis("createdAt", pi.CreatedAt)
		writeCounts(&w, "stats", c)
		if pi.Next > pi.Start {
			w.timeMicros("newestMessage", pi.LastWriteAt)
		} else {
			w.null("newestMessage")
		}
		w.endObject()
	}
	w.endArray()
	totals.deadLetter = int64(dlq.total)
	writeCounts(&w, "totals", totals)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// deleteQueue answers DELETE /api/v1/resources/queues/{queue}. Dead-letter
// rows are snapshots and survive it.
func (s *Server) deleteQueue(ctx *fasthttp.RequestCtx, p *params) {
	name := p.get("queue")
	existed, err := s.broker.DeleteQueue(s.ctx, name)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("deleted", true)
	w.str("queue", name)
	w.bool("existed", existed)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// overview answers GET /api/v1/resources/overview.
func (s *Server) overview(ctx *fasthttp.RequestCtx, _ *params) {
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
		total      counts
		partitions int
		namespaces = map[string]bool{}
		tasks      = map[string]bool{}
	)
	for i := range qs {
		total.add(queueCounts(&qs[i], now, &dlq))
		partitions += len(qs[i].Partitions)
		if qs[i].Namespace != "" {
			namespaces[qs[i].Namespace] = true
		}
		if qs[i].Task != "" {
			tasks[qs[i].Task] = true
		}
	}
	total.deadLetter = int64(dlq.total)
	var timeLags, offsetLags []float64
	for i := range cursors {
		timeLags = append(timeLags, timeLag(&cursors[i], now))
		offsetLags = append(offsetLags, float64(cursors[i].OffsetLag))
	}
	w := startBody(ctx)
	w.object("")
	w.int("queues", int64(len(qs)))
	w.int("partitions", int64(partitions))
	w.int("namespaces", int64(len(namespaces)))
	w.int("tasks", int64(len(tasks)))
	writeCounts(&w, "messages", total)
	w.object("lag")
	writeSpread(&w, "time", timeLags)
	writeSpread(&w, "offset", offsetLags)
	w.endObject()
	writeThroughput(&w)
	w.timeMillis("timestamp", now)
	w.int("statsAge", 0)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// writeThroughput writes the rate object; rates are not tracked (0).
func writeThroughput(w *jsonWriter) {
	w.object("throughput")
	w.int("ingestedPerSecond", 0)
	w.int("processedPerSecond", 0)
	w.endObject()
}

// writeSpread writes {avg, median, min, max} of vs (all 0 when empty).
func writeSpread(w *jsonWriter, k string, vs []float64) {
	var avg, med, lo, hi float64
	if len(vs) > 0 {
		slices.Sort(vs)
		lo, hi, med = vs[0], vs[len(vs)-1], vs[len(vs)/2]
		for _, v := range vs {
			avg += v
		}
		avg /= float64(len(vs))
	}
	w.object(k)
	w.float("avg", avg)
	w.float("median", med)
	w.float("min", lo)
	w.float("max", hi)
	w.endObject()
}

// timeLag is the age in seconds of the oldest message a cursor has not
// consumed (0 when it is at the head).
func timeLag(c *engine.CursorInfo, now int64) float64 {
	if c.OffsetLag == 0 || c.OldestUnconsumedAt == 0 {
		return 0
	}
	return float64(max(now-c.OldestUnconsumedAt, 0)) / 1e6
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
		c := queueCounts(&qs[i], now, &dlqSummary{})
		g.queues++
		g.parts += int64(len(qs[i].Partitions))
		g.total += c.total
		g.pending += c.pending
		if other != "" {
			g.others[other] = true
		}
	}
	slices.SortFunc(groups, func(a, b *group) int { return cmp.Compare(a.name, b.name) })
	w := startBody(ctx)
	w.object("")
	w.array(list)
	for _, g := range groups {
		w.object("")
		w.str(field, g.name)
		w.str("name", g.name)
		w.int("queues", g.queues)
		w.int("queueCount", g.queues)
		w.int(otherCount, int64(len(g.others)))
		w.int("partitions", g.parts)
		w.object("messages")
		w.int("total", g.total)
		w.int("pending", g.pending)
		w.endObject()
		w.endObject()
	}
	w.endArray()
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// groupQueue is one (group, queue) of the consumer-group list.
type groupQueue struct {
	group, queue     string
	members, withLag int64
	totalLag         int64
	maxTimeLag       float64
	consumed         bool
	sub              *engine.Subscription
}

// listGroups answers GET /api/v1/consumer-groups: one entry per (group,
// queue), queue mode included (SEMANTICS §14).
func (s *Server) listGroups(ctx *fasthttp.RequestCtx, _ *params) {
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, "")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	subs, err := s.broker.Subscriptions()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	var entries []*groupQueue
	index := map[[2]string]*groupQueue{}
	entry := func(group, queue string) *groupQueue {
		k := [2]string{group, queue}
		if e := index[k]; e != nil {
			return e
		}
		e := &groupQueue{group: group, queue: queue}
		index[k] = e
		entries = append(entries, e)
		return e
	}
	for i := range cursors {
		c := &cursors[i]
		e := entry(c.Group, c.Queue)
		e.members++
		e.totalLag += c.OffsetLag
		if c.OffsetLag > 0 {
			e.withLag++
		}
		e.maxTimeLag = max(e.maxTimeLag, timeLag(c, now))
		e.consumed = e.consumed || c.TotalConsumed > 0 || c.Committed >= 0
	}
	for i := range subs {
		entry(subs[i].Group, subs[i].Queue).sub = &subs[i]
	}
	slices.SortFunc(entries, func(a, b *groupQueue) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.queue, b.queue))
	})
	w := startBody(ctx)
	w.array("")
	for _, e := range entries {
		state := "Dead"
		switch {
		case e.maxTimeLag > 300:
			state = "Lagging"
		case e.consumed:
			state = "Stable"
		}
		w.object("")
		w.str("name", e.group)
		w.array("topics")
		w.str("", e.queue)
		w.endArray()
		w.str("queueName", e.queue)
		w.str("queue", e.queue)
		w.int("members", e.members)
		w.int("partitions", e.members)
		w.int("partitionsWithLag", e.withLag)
		w.int("totalLag", e.totalLag)
		w.int("lagMessages", e.totalLag)
		w.float("maxTimeLag", e.maxTimeLag)
		w.float("lagSeconds", e.maxTimeLag)
		w.str("state", state)
		if e.sub != nil {
			w.str("subscriptionMode", engine.SubModeName(e.sub.Mode))
			w.timeMillis("subscriptionTimestamp", e.sub.Timestamp)
			w.timeMillis("subscriptionCreatedAt", e.sub.CreatedAt)
		} else {
			w.null("subscriptionMode")
			w.null("subscriptionTimestamp")
			w.null("subscriptionCreatedAt")
		}
		w.endObject()
	}
	w.endArray()
	send(ctx, fasthttp.StatusOK, w)
}

// laggingGroups answers GET /api/v1/consumer-groups/lagging?minLagSeconds=
// (default 3600): partitions whose oldest unconsumed message is older.
func (s *Server) laggingGroups(ctx *fasthttp.RequestCtx, _ *params) {
	minLag := float64(queryInt(ctx.QueryArgs(), "minLagSeconds", 3600))
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, "")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.array("")
	for i := range cursors {
		c := &cursors[i]
		lag := timeLag(c, now)
		if c.OffsetLag == 0 || lag <= minLag {
			continue
		}
		w.object("")
		w.str("consumer_group", c.Group)
		w.str("queue_name", c.Queue)
		w.str("partition_name", c.Partition)
		w.id("partition_id", c.PartitionID)
		if c.LeaseLive {
			w.id("worker_id", c.Lease)
		} else {
			w.null("worker_id")
		}
		w.int("offset_lag", c.OffsetLag)
		w.float("time_lag_seconds", lag)
		w.float("lag_hours", lag/3600)
		w.timeMillis("oldest_unconsumed_at", c.OldestUnconsumedAt)
		w.timeMillis("last_consumed_at", c.LastConsumedAt)
		w.endObject()
	}
	w.endArray()
	send(ctx, fasthttp.StatusOK, w)
}

// getGroup answers GET /api/v1/consumer-groups/{group}: an object keyed by
// queue name ({} for an unknown group).
func (s *Server) getGroup(ctx *fasthttp.RequestCtx, p *params) {
	now := time.Now().UnixMicro()
	cursors, err := s.broker.Cursors(now, p.get("group"))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	for i := range cursors {
		c := &cursors[i]
		if i == 0 || cursors[i-1].Queue != c.Queue {
			if i > 0 {
				w.endArray()
				w.endObject()
			}
			w.object(c.Queue)
			w.array("partitions")
		}
		w.object("")
		w.str("partition", c.Partition)
		w.id("partitionId", c.PartitionID)
		if c.LeaseLive {
			w.id("workerId", c.Lease)
			w.timeMillis("leaseExpiresAt", c.LeaseExpiresAt)
		} else {
			w.null("workerId")
			w.null("leaseExpiresAt")
		}
		w.timeMillis("lastConsumedAt", c.LastConsumedAt)
		w.int("totalConsumed", c.TotalConsumed)
		w.int("offsetLag", c.OffsetLag)
		w.float("timeLagSeconds", timeLag(c, now))
		w.bool("leaseActive", c.LeaseLive)
		w.int("retryCount", int64(c.RetryCount))
		w.endObject()
	}
	if len(cursors) > 0 {
		w.endArray()
		w.endObject()
	}
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// deleteGroup answers DELETE /api/v1/consumer-groups/{group} and
// .../{group}/queues/{queue}; deleteMetadata (default true) also drops the
// subscription record.
func (s *Server) deleteGroup(ctx *fasthttp.RequestCtx, p *params) {
	group, queue := p.get("group"), p.get("queue")
	meta := queryBool(ctx.QueryArgs(), "deleteMetadata", true)
	deleted, metaDeleted, err := s.broker.DeleteGroup(s.ctx, group, queue, meta)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.str("consumerGroup", group)
	if queue != "" {
		w.str("queueName", queue)
	}
	w.int("deletedPartitions", int64(deleted))
	w.bool("metadataDeleted", metaDeleted)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// seek answers POST .../{group}/queues/{queue}/seek and
// .../partitions/{partition}/seek (SEMANTICS §14): {toEnd:true} or
// {timestamp:ISO}; the per-partition form treats an empty body as toEnd.
func (s *Server) seek(ctx *fasthttp.RequestCtx, p *params) {
	cmd := engine.SeekCmd{Group: p.get("group"), Queue: p.get("queue"), Partition: p.get("partition")}
	hasTimestamp := false
	err := decodeObject(ctx.PostBody(), true, func(sc *scanner, key []byte) (err error) {
		switch string(key) {
		case "toEnd":
			cmd.ToEnd, _, err = sc.optBool("toEnd")
		case "timestamp":
			cmd.Timestamp, hasTimestamp, err = sc.optTime("timestamp")
		default:
			err = sc.skip()
		}
		return err
	})
	if err == nil && !cmd.ToEnd && !hasTimestamp {
		if cmd.Partition == "" {
			err = badRequest("Must specify either 'toEnd': true or 'timestamp'")
		}
		cmd.ToEnd = true
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	updated, err := s.broker.Seek(s.ctx, cmd)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", updated > 0)
	w.str("consumerGroup", cmd.Group)
	w.str("queueName", cmd.Queue)
	if cmd.Partition != "" {
		w.str("partitionName", cmd.Partition)
		w.bool("updated", updated > 0)
		if cmd.ToEnd {
			w.str("cursorMovedTo", "end")
		} else {
			w.timeMillis("cursorMovedTo", cmd.Timestamp)
		}
	}
	w.bool("seekToEnd", cmd.ToEnd)
	if cmd.ToEnd {
		w.null("targetTimestamp")
	} else {
		w.timeMillis("targetTimestamp", cmd.Timestamp)
	}
	w.int("partitionsUpdated", int64(updated))
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// updateSubscription answers POST /api/v1/consumer-groups/{group}/subscription.
func (s *Server) updateSubscription(ctx *fasthttp.RequestCtx, p *params) {
	var (
		ts  int64
		has bool
	)
	err := decodeObject(ctx.PostBody(), true, func(sc *scanner, key []byte) (err error) {
		if string(key) != "subscriptionTimestamp" {
			return sc.skip()
		}
		ts, has, err = sc.optTime("subscriptionTimestamp")
		return err
	})
	if err == nil && !has {
		err = badRequest("Missing subscriptionTimestamp in request body")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	group := p.get("group")
	updated, err := s.broker.UpdateSubscription(s.ctx, group, ts)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.str("consumerGroup", group)
	w.timeMillis("newTimestamp", ts)
	w.int("rowsUpdated", int64(updated))
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// refreshStats answers POST /api/v1/stats/refresh: statistics are computed
// on every read, there is nothing to refresh.
func (s *Server) refreshStats(ctx *fasthttp.RequestCtx, _ *params) {
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.bool("skipped", true)
	w.str("reason", "statistics are computed on every read")
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// status answers GET /api/v1/status: the dashboard summary. Time series
// (throughput, workers) are not recorded and come back empty.
func (s *Server) status(ctx *fasthttp.RequestCtx, _ *params) {
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
	qs = filterQueues(ctx, qs)
	w := startBody(ctx)
	w.object("")
	writeTimeRange(&w, ctx, now)
	w.int("bucketMinutes", 1)
	w.int("pointCount", 0)
	w.array("throughput")
	w.endArray()
	w.array("queues")
	for i := range qs {
		q := &qs[i]
		total.add(queueCounts(q, now, &dlq))
		var consumed int64
		for j := range q.Partitions {
			leased := false
			for _, c := range q.Partitions[j].Cursors {
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
		w.id("id", q.ID)
		w.str("name", q.Name)
		w.str("namespace", q.Namespace)
		w.str("task", q.Task)
		w.int("partitions", int64(len(q.Partitions)))
		w.int("totalConsumed", consumed)
		w.endObject()
	}
	w.endArray()
	total.deadLetter = int64(dlq.total)
	w.object("messages")
	w.int("total", total.total)
	w.int("pending", total.pending)
	w.int("processing", total.processing)
	w.int("completed", total.completed)
	w.int("failed", 0)
	w.int("deadLetter", total.deadLetter)
	w.object("requests")
	w.int("push", int64(s.m.pushQueued.Get()+s.m.pushDuplicate.Get()))
	w.int("pop", int64(s.m.popMessages.Get()))
	w.int("ack", int64(s.m.ackSuccess.Get()+s.m.ackFailed.Get()))
	w.endObject()
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
	w.array("workers")
	w.endArray()
	w.object("errors")
	w.int("dbErrors", 0)
	w.int("ackFailed", int64(s.m.ackFailed.Get()))
	w.int("dlqMessages", int64(dlq.total))
	w.endObject()
	w.int("statsAge", 0)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// writeTimeRange writes {from, to}: the query's, else the last hour.
func writeTimeRange(w *jsonWriter, ctx *fasthttp.RequestCtx, now int64) {
	args := ctx.QueryArgs()
	from, err := queryTime(args, "from")
	if err != nil || from == 0 {
		from = now - int64(time.Hour/time.Microsecond)
	}
	to, err := queryTime(args, "to")
	if err != nil || to == 0 {
		to = now
	}
	w.object("timeRange")
	w.timeMillis("from", from)
	w.timeMillis("to", to)
	w.endObject()
}

// statusQueues answers GET /api/v1/status/queues?namespace&task&limit&offset.
func (s *Server) statusQueues(ctx *fasthttp.RequestCtx, _ *params) {
	qs, dlq, err := s.queuesAndDLQ()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	args := ctx.QueryArgs()
	limit := int(min(max(queryInt(args, "limit", 100), 1), 10000))
	offset := int(max(queryInt(args, "offset", 0), 0))
	qs = filterQueues(ctx, qs)
	qs = qs[min(offset, len(qs)):]
	qs = qs[:min(limit, len(qs))]
	now := time.Now().UnixMicro()
	w := startBody(ctx)
	w.object("")
	w.array("queues")
	for i := range qs {
		writeQueueSummary(&w, &qs[i], queueCounts(&qs[i], now, &dlq))
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

// getMaintenance answers GET /api/v1/system/maintenance and .../pop.
func (s *Server) getMaintenance(ctx *fasthttp.RequestCtx, _ *params) {
	s.writeMaintenance(ctx, "")
}

// setMaintenance answers POST /api/v1/system/maintenance ({"enabled"}: push
// maintenance) and POST .../maintenance/pop (pop maintenance). The switch is
// cluster-wide: it is a replicated command.
func (s *Server) setMaintenance(ctx *fasthttp.RequestCtx, _ *params) {
	var enabled, has bool
	err := decodeObject(ctx.PostBody(), true, func(sc *scanner, key []byte) (err error) {
		if string(key) != "enabled" {
			return sc.skip()
		}
		enabled, has, err = sc.optBool("enabled")
		return err
	})
	m, ok := s.broker.(Maintainer)
	pop := strings.HasSuffix(string(ctx.Path()), "/pop")
	switch {
	case err != nil:
	case !has:
		err = badRequest("enabled (boolean) is required")
	case !ok:
		err = notImplemented("this broker has no maintenance mode")
	default:
		err = m.SetMaintenance(s.ctx, pop, enabled)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	msg := "Push maintenance mode "
	if pop {
		msg = "Pop maintenance mode "
	}
	if enabled {
		msg += "enabled"
	} else {
		msg += "disabled"
	}
	s.writeMaintenance(ctx, msg)
}

func (s *Server) writeMaintenance(ctx *fasthttp.RequestCtx, msg string) {
	var push, pop bool
	if m, ok := s.broker.(Maintainer); ok {
		push, pop = m.Maintenance()
	}
	var pending, failed int64
	if s.spool != nil {
		pending, failed = s.spool.pending.Load(), s.spool.failed.Load()
	}
	healthy := s.broker.Status().HasLeader()
	w := startBody(ctx)
	w.object("")
	w.bool("maintenanceMode", push)
	w.bool("popMaintenanceMode", pop)
	w.int("bufferedMessages", pending)
	w.bool("bufferHealthy", s.spool != nil)
	w.object("bufferStats")
	w.int("pendingCount", pending)
	w.int("failedCount", failed)
	w.bool("dbHealthy", healthy)
	w.endObject()
	if msg != "" {
		w.str("message", msg)
	}
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}
