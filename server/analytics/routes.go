package analytics

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// The /api/v1/analytics routes (docs/api.md §11). Each reads every node's
// minutes (analytics.go): package server has a follower relay the request
// to the leader, which holds them all, and calls the route itself only
// when it leads or there is no leader to relay to. The server reads the
// query (ParseQuery) and owns the response: a route writes its 200's body
// into the writer it is given, or returns the error for the server's error
// table to answer.

// layoutSeconds is the series' bucket timestamps (no fraction).
const layoutSeconds = "2006-01-02T15:04:05Z"

const (
	minuteUS = int64(time.Minute / time.Microsecond)
	// workersWindow is what worker-metrics' "workers" covers, whatever
	// the range.
	workersWindow = 5 * time.Minute
)

// Query is a parsed analytics request and the minutes of every node in
// its range (ParseQuery).
type Query struct {
	now             time.Time
	from, to        int64 // µs
	fromMin, toMin  int64 // the first and last unix minute in range
	bucket          int64 // minutes
	queue, hostname string
	workerID        int64
	workerSet       bool
	nodes           []nodeSeries // this node's first
	self            string
}

// bucketMinutes is the bucket width for a range of d whole minutes
// (docs/api.md §11).
func bucketMinutes(d int64) int64 {
	switch {
	case d <= 60:
		return 1
	case d <= 360:
		return 5
	case d <= 1440:
		return 15
	case d <= 10080:
		return 60
	}
	return 360
}

// bucketStart is the bucket of width b (minutes) holding unix minute m.
// Widths up to 60 divide the hour and 360 divides the day, and the epoch
// is midnight UTC, so buckets align to the hour and 6-hour buckets to
// 00/06/12/18 UTC.
func bucketStart(m, b int64) int64 {
	return m - ((m%b)+b)%b
}

// floorDiv and ceilDiv divide rounding down and up (for negative times).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// ParseQuery reads from, to, queue, hostname and workerId (defaults:
// the last hour) and collects the minutes in range from what this node
// holds. It never relays: the server has a follower's request answered by
// the leader, which holds every node's minutes, before it asks. Bad input
// is a 400 (wire.BadRequest).
func (a *Analytics) ParseQuery(args *fasthttp.Args) (q Query, err error) {
	q.now = a.now()
	q.to = q.now.UnixMicro()
	q.from = q.to - int64(time.Hour/time.Microsecond)
	for _, p := range []struct {
		key string
		dst *int64
	}{{"from", &q.from}, {"to", &q.to}} {
		if v := args.Peek(p.key); len(v) > 0 {
			t, good := wire.ParseTime(string(v))
			if !good {
				return q, wire.BadRequest("invalid " + p.key)
			}
			*p.dst = engine.Micros(t)
		}
	}
	if v := args.Peek("workerId"); len(v) > 0 {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return q, wire.BadRequest("invalid workerId")
		}
		q.workerID, q.workerSet = n, true
	}
	q.queue, q.hostname = string(args.Peek("queue")), string(args.Peek("hostname"))
	q.bucket = bucketMinutes(max(q.to-q.from, 0) / minuteUS)
	q.fromMin, q.toMin = ceilDiv(q.from, minuteUS), floorDiv(q.to, minuteUS)
	q.self = a.broker.Status().ID
	a.rotate(a.broker)
	q.nodes = a.series(q.self, q.fromMin, q.toMin)
	return q, nil
}

// Queue is the queue filter ("" for all).
func (q *Query) Queue() string { return q.queue }

// node reports whether node id (worker 0) passes the hostname and
// workerId filters.
func (q *Query) node(id string) bool {
	return (q.hostname == "" || q.hostname == id) && (!q.workerSet || q.workerID == 0)
}

// Head starts the reply object with its timeRange and, when bucketed, its
// bucketMinutes.
func (q *Query) Head(w *wire.Writer, bucketed bool) {
	w.Object("")
	w.Object("timeRange")
	w.TimeMillis("from", q.from)
	w.TimeMillis("to", q.to)
	w.EndObject()
	if bucketed {
		w.Int("bucketMinutes", q.bucket)
	}
}

// round2 rounds to 2 decimal places; perSecond is a bucket's sum per
// second.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

func (q *Query) perSecond(sum int64) float64 {
	return round2(float64(sum) / float64(q.bucket*60))
}

// meanLag is the pop-weighted mean lag, in whole ms.
func meanLag(sum, pops int64) int64 {
	if pops == 0 {
		return 0
	}
	return int64(math.Round(float64(sum) / float64(pops)))
}

// queueAgg is one queue's counters summed over nodes (and minutes).
// parked sums each node's gauge of the minute; minutes counts the minutes
// that hold a record of the queue, over which parked is averaged.
type queueAgg struct {
	queueMinute
	parked  float64
	minutes int
	created int64 // partitions created (createdPartitions)
}

// minuteQueues is one minute's queues, merged over nodes, by name.
type minuteQueues struct {
	at     int64
	queues []queueAgg
}

// mergeQueues merges the nodes' queue records per minute (as Queen's queue
// table sums its workers), oldest minute first; queue filters by name.
func (q *Query) mergeQueues() []minuteQueues {
	byMinute := map[int64]map[string]*queueAgg{}
	for _, n := range q.nodes {
		for i := range n.minutes {
			m := &n.minutes[i]
			for j := range m.Queues {
				qm := &m.Queues[j]
				if q.queue != "" && qm.Queue != q.queue {
					continue
				}
				qs := byMinute[m.At]
				if qs == nil {
					qs = map[string]*queueAgg{}
					byMinute[m.At] = qs
				}
				agg := qs[qm.Queue]
				if agg == nil {
					agg = &queueAgg{queueMinute: queueMinute{Queue: qm.Queue, Partitions: -1}}
					qs[qm.Queue] = agg
				}
				agg.add(qm)
				if m.Node.Samples > 0 {
					agg.parked += float64(qm.ParkedSum) / float64(m.Node.Samples)
				}
			}
		}
	}
	out := make([]minuteQueues, 0, len(byMinute))
	for at, qs := range byMinute {
		mq := minuteQueues{at: at}
		for _, agg := range qs {
			mq.queues = append(mq.queues, *agg)
		}
		slices.SortFunc(mq.queues, func(a, b queueAgg) int { return strings.Compare(a.Queue, b.Queue) })
		out = append(out, mq)
	}
	slices.SortFunc(out, func(a, b minuteQueues) int { return cmp.Compare(a.at, b.at) })
	return out
}

// QueueLag writes the answer to GET /api/v1/analytics/queue-lag?from&to&queue: one entry
// per (minute, queue), newest minute first, then by queue.
func (a *Analytics) QueueLag(q *Query, w *wire.Writer) error {
	minutes := q.mergeQueues()
	w.Array("")
	for i := len(minutes) - 1; i >= 0; i-- {
		for _, agg := range minutes[i].queues {
			w.Object("")
			w.Str("queueName", agg.Queue)
			w.Int("popCount", agg.PopMessages)
			w.Int("avgLagMs", meanLag(agg.LagSum, agg.PopMessages))
			w.Int("maxLagMs", agg.LagMax)
			w.TimeLayout("bucketTime", minutes[i].at*minuteUS, layoutSeconds)
			w.EndObject()
		}
	}
	w.EndArray()
	return nil
}

// QueueOps writes the answer to GET /api/v1/analytics/queue-ops?from&to&queue: one entry
// per (bucket, queue), bucket ascending, then by queue.
func (a *Analytics) QueueOps(q *Query, w *wire.Writer) error {
	created, err := a.createdPartitions(q)
	if err != nil {
		return err
	}
	var (
		order []bucketQueue
		aggs  = map[bucketQueue]*queueAgg{}
		names []string
		seen  = map[string]bool{}
	)
	entry := func(k bucketQueue) *queueAgg {
		agg := aggs[k]
		if agg == nil {
			agg = &queueAgg{queueMinute: queueMinute{Queue: k.queue, Partitions: -1}}
			aggs[k] = agg
			order = append(order, k)
		}
		if !seen[k.queue] {
			seen[k.queue] = true
			names = append(names, k.queue)
		}
		return agg
	}
	for _, mq := range q.mergeQueues() {
		b := bucketStart(mq.at, q.bucket)
		for i := range mq.queues {
			m := &mq.queues[i]
			agg := entry(bucketQueue{b, m.Queue})
			agg.add(&m.queueMinute)
			agg.parked += m.parked
			agg.minutes++
		}
	}
	for k, n := range created {
		entry(k).created = n
	}
	slices.SortFunc(order, func(a, b bucketQueue) int {
		return cmp.Or(cmp.Compare(a.bucket, b.bucket), strings.Compare(a.queue, b.queue))
	})
	slices.Sort(names)
	q.Head(w, true)
	w.Array("series")
	for _, k := range order {
		g := aggs[k]
		w.Object("")
		w.TimeLayout("bucket", k.bucket*minuteUS, layoutSeconds)
		w.Str("queueName", g.Queue)
		w.Int("pushRequests", g.PushRequests)
		w.Int("pushMessages", g.PushMessages)
		w.Int("popMessages", g.PopMessages)
		w.Int("popEmpty", g.PopEmpty)
		w.Int("ackRequests", g.AckRequests)
		w.Int("ackSuccess", g.AckSuccess)
		w.Int("ackFailed", g.AckFailed)
		w.Int("transactions", g.Transactions)
		w.Int("partitionsCreated", g.created)
		w.Int("partitionsDeleted", 0) // a partition goes only with its queue, not counted (as Queen)
		if g.Partitions < 0 {
			w.Null("partitionCount")
		} else {
			w.Int("partitionCount", g.Partitions)
		}
		w.Int("avgLagMs", meanLag(g.LagSum, g.PopMessages))
		w.Int("maxLagMs", g.LagMax)
		w.Float("pushPerSecond", q.perSecond(g.PushMessages))
		w.Float("popPerSecond", q.perSecond(g.PopMessages))
		w.Float("ackPerSecond", q.perSecond(g.AckSuccess+g.AckFailed))
		w.Float("emptyPerSecond", q.perSecond(g.PopEmpty))
		w.Float("parkedCount", round2(g.parked/float64(max(g.minutes, 1))))
		w.EndObject()
	}
	w.EndArray()
	w.Array("queues")
	for _, n := range names {
		w.Str("", n)
	}
	w.EndArray()
	w.EndObject()
	return nil
}

// bucketQueue keys a queue's figures in a bucket.
type bucketQueue struct {
	bucket int64 // unix minute the bucket starts
	queue  string
}

// createdPartitions counts the partitions created per bucket and queue in
// the query's range, up to the last complete minute (as the minutes are
// served). They are read from the store, where each partition keeps the
// time it was created, stamped by the leader into the command that created
// it: every replica holds the same time, so a partition counts once however
// many nodes there are, and the count survives restarts. A deleted queue
// takes its partitions, and their count, with it.
func (a *Analytics) createdPartitions(q *Query) (map[bucketQueue]int64, error) {
	var qs []engine.QueueInfo
	if q.queue != "" {
		info, err := a.broker.Queue(q.queue)
		switch {
		case errors.Is(err, engine.ErrQueueNotFound):
			return nil, nil
		case err != nil:
			return nil, err
		}
		qs = append(qs, info)
	} else {
		var err error
		if qs, err = a.broker.Queues(); err != nil {
			return nil, err
		}
	}
	last := min(q.toMin, unixMinute(q.now)-1)
	out := map[bucketQueue]int64{}
	for i := range qs {
		for j := range qs[i].Partitions {
			m := floorDiv(qs[i].Partitions[j].CreatedAt, minuteUS)
			if m >= q.fromMin && m <= last {
				out[bucketQueue{bucketStart(m, q.bucket), qs[i].Name}]++
			}
		}
	}
	return out, nil
}

// QueueParkedReplicas writes the answer to GET /api/v1/analytics/queue-parked-replicas:
// per (bucket, queue, node), the mean of the node's parked gauge over the
// minutes of the bucket in which it had a long-poll parked on the queue.
func (a *Analytics) QueueParkedReplicas(q *Query, w *wire.Writer) error {
	type key struct {
		bucket      int64
		queue, node string
	}
	type mean struct {
		sum float64
		n   int
	}
	var order []key
	means := map[key]*mean{}
	var replicas []string
	for _, n := range q.nodes {
		found := false
		for i := range n.minutes {
			m := &n.minutes[i]
			for j := range m.Queues {
				qm := &m.Queues[j]
				if qm.ParkedSum == 0 || m.Node.Samples == 0 || (q.queue != "" && qm.Queue != q.queue) {
					continue
				}
				k := key{bucketStart(m.At, q.bucket), qm.Queue, n.id}
				v := means[k]
				if v == nil {
					v = &mean{}
					means[k] = v
					order = append(order, k)
				}
				v.sum += float64(qm.ParkedSum) / float64(m.Node.Samples)
				v.n++
				found = true
			}
		}
		if found {
			replicas = append(replicas, n.id)
		}
	}
	slices.SortFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.bucket, b.bucket), strings.Compare(a.queue, b.queue), strings.Compare(a.node, b.node))
	})
	slices.Sort(replicas)
	q.Head(w, true)
	w.Array("series")
	for _, k := range order {
		w.Object("")
		w.TimeLayout("bucket", k.bucket*minuteUS, layoutSeconds)
		w.Str("queueName", k.queue)
		w.Str("hostname", k.node)
		w.Int("workerId", 0)
		w.Float("parkedCount", round2(means[k].sum/float64(means[k].n)))
		w.EndObject()
	}
	w.EndArray()
	w.Array("replicas")
	for _, id := range replicas {
		w.Object("")
		w.Str("hostname", id)
		w.Int("workerId", 0)
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
	return nil
}

// Retention writes the answer to GET /api/v1/analytics/retention?from&to&queue: what the
// leaders' sweeps deleted, per bucket. A sweep reports its deletions for
// the whole store, not per queue, so a queue filter matches nothing (and
// the answer says so in "note").
func (a *Analytics) Retention(q *Query, w *wire.Writer) error {
	var (
		order  []int64
		byB    = map[int64]*retentionMinute{}
		totals retentionMinute
	)
	if q.queue == "" {
		for _, n := range q.nodes {
			for i := range n.minutes {
				r := &n.minutes[i].Retention
				if r.Events == 0 && r.Retention == 0 && r.Evicted == 0 {
					continue
				}
				b := bucketStart(n.minutes[i].At, q.bucket)
				agg := byB[b]
				if agg == nil {
					agg = &retentionMinute{}
					byB[b] = agg
					order = append(order, b)
				}
				for _, dst := range []*retentionMinute{agg, &totals} {
					dst.Retention += r.Retention
					dst.Evicted += r.Evicted
					dst.Events += r.Events
				}
			}
		}
	}
	slices.Sort(order)
	writeCounts := func(w *wire.Writer, r *retentionMinute) {
		w.Int("retentionMsgs", r.Retention)
		w.Int("completedRetentionMsgs", 0)
		w.Int("evictionMsgs", r.Evicted)
		w.Int("totalMsgs", r.Retention+r.Evicted)
		w.Int("eventCount", r.Events)
	}
	q.Head(w, true)
	w.Array("series")
	for _, b := range order {
		w.Object("")
		w.TimeLayout("bucket", b*minuteUS, layoutSeconds)
		writeCounts(w, byB[b])
		w.EndObject()
	}
	w.EndArray()
	w.Object("totals")
	writeCounts(w, &totals)
	w.EndObject()
	if q.queue != "" {
		w.Str("note", "retention sweeps report their deletions for the whole store, not per queue: a queue filter matches nothing")
	}
	w.EndObject()
	return nil
}

// workerAgg is node rows summed over a bucket (or a node): the sums, and
// the means of the rows' per-minute averages.
type workerAgg struct {
	nodeMinute
	rows             int     // rows with samples
	loopLag, jobsAvg float64 // sums of the rows' averages
	newest           int64
}

func (a *workerAgg) add(m *minuteRecord) {
	a.nodeMinute.add(&m.Node)
	if n := m.Node.Samples; n > 0 {
		a.rows++
		a.loopLag += float64(m.Node.LoopLagSum) / float64(n)
		a.jobsAvg += float64(m.Node.JobsSum) / float64(n)
	}
	a.newest = max(a.newest, m.At)
}

func (a *workerAgg) avg(sum float64) int64 {
	if a.rows == 0 {
		return 0
	}
	return int64(math.Round(sum / float64(a.rows)))
}

// WorkerMetrics writes the answer to GET /api/v1/analytics/worker-metrics?from&to&hostname&workerId.
func (a *Analytics) WorkerMetrics(q *Query, w *wire.Writer) error {
	var buckets []int64
	byB := map[int64]*workerAgg{}
	for _, n := range q.nodes {
		if !q.node(n.id) {
			continue
		}
		for i := range n.minutes {
			b := bucketStart(n.minutes[i].At, q.bucket)
			agg := byB[b]
			if agg == nil {
				agg = &workerAgg{}
				byB[b] = agg
				buckets = append(buckets, b)
			}
			agg.add(&n.minutes[i])
		}
	}
	slices.SortFunc(buckets, func(a, b int64) int { return cmp.Compare(b, a) })
	q.Head(w, true)
	w.Int("pointCount", int64(len(buckets)))
	w.Array("timeSeries")
	for _, b := range buckets {
		g := byB[b]
		w.Object("")
		w.TimeLayout("timestamp", b*minuteUS, layoutSeconds)
		w.Int("pushMessages", g.PushMessages)
		w.Int("popMessages", g.PopMessages)
		w.Int("ackMessages", g.AckMessages)
		w.Int("pushRequests", g.PushRequests)
		w.Int("popRequests", g.PopRequests)
		w.Int("ackRequests", g.AckRequests)
		w.Int("jobsDone", g.Jobs)
		w.Float("pushPerSecond", q.perSecond(g.PushMessages))
		w.Float("popPerSecond", q.perSecond(g.PopMessages))
		w.Float("ackPerSecond", q.perSecond(g.AckMessages))
		w.Int("avgEventLoopLagMs", g.avg(g.loopLag))
		w.Int("maxEventLoopLagMs", g.LoopLagMax)
		w.Int("avgFreeSlots", 0)
		w.Int("minFreeSlots", 0)
		w.Int("dbConnections", 0)
		w.Int("avgJobQueueSize", g.avg(g.jobsAvg))
		w.Int("maxJobQueueSize", g.JobsMax)
		w.Int("backoffSize", 0)
		w.Int("avgLagMs", meanLag(g.LagSum, g.PopMessages))
		w.Int("maxLagMs", g.LagMax)
		w.Int("lagCount", g.PopMessages)
		w.Int("dbErrors", g.DBErrors)
		w.Int("ackSuccess", g.AckSuccess)
		w.Int("ackFailed", g.AckFailed)
		w.Int("dlqCount", g.DLQ)
		w.EndObject()
	}
	w.EndArray()
	a.WriteWorkers(w, q)
	writeQueuePops(w, q.mergeQueues())
	w.Object("summary")
	var t nodeMinute
	for _, n := range q.nodes {
		t.add(&n.totals)
	}
	w.Int("totalPushMessages", t.PushMessages)
	w.Int("totalPopMessages", t.PopMessages)
	w.Int("totalAckMessages", t.AckMessages)
	w.Int("totalPushRequests", t.PushRequests)
	w.Int("totalPopRequests", t.PopRequests)
	w.Int("totalAckRequests", t.AckRequests)
	w.Int("totalDbErrors", t.DBErrors)
	w.Int("totalAckFailed", t.AckFailed)
	w.Int("totalDlq", t.DLQ)
	w.Int("pendingMessages", t.PushMessages-t.PopMessages)
	w.EndObject()
	w.EndObject()
	return nil
}

// WriteWorkers writes worker-metrics' "workers": each node over the last
// five minutes, whatever the range and filters.
func (a *Analytics) WriteWorkers(w *wire.Writer, q *Query) {
	now := q.now.UnixMicro()
	recent := a.series(q.self, ceilDiv(now-int64(workersWindow/time.Microsecond), minuteUS), floorDiv(now, minuteUS))
	w.Array("workers")
	for _, n := range recent {
		if len(n.minutes) == 0 {
			continue
		}
		var g workerAgg
		for i := range n.minutes {
			g.add(&n.minutes[i])
		}
		w.Object("")
		w.Str("hostname", n.id)
		w.Int("workerId", 0)
		w.Int("avgEventLoopLagMs", g.avg(g.loopLag))
		w.Int("maxEventLoopLagMs", g.LoopLagMax)
		w.Int("freeSlots", 0)
		w.Int("dbConnections", 0)
		w.Int("jobQueueSize", g.JobsMax)
		w.Int("backoffSize", 0)
		w.Int("messagesProcessed", g.PushMessages+g.AckMessages)
		w.TimeLayout("lastSeen", g.newest*minuteUS, layoutSeconds)
		w.EndObject()
	}
	w.EndArray()
}

// writeQueuePops writes worker-metrics' "queues": each queue's pops over
// the range, most popped first.
func writeQueuePops(w *wire.Writer, minutes []minuteQueues) {
	byQ := map[string]*queueAgg{}
	var all []*queueAgg
	for _, mq := range minutes {
		for i := range mq.queues {
			m := &mq.queues[i]
			agg := byQ[m.Queue]
			if agg == nil {
				agg = &queueAgg{queueMinute: queueMinute{Queue: m.Queue, Partitions: -1}}
				byQ[m.Queue] = agg
				all = append(all, agg)
			}
			agg.add(&m.queueMinute)
		}
	}
	slices.SortFunc(all, func(a, b *queueAgg) int {
		return cmp.Or(cmp.Compare(b.PopMessages, a.PopMessages), strings.Compare(a.Queue, b.Queue))
	})
	w.Array("queues")
	for _, a := range all {
		w.Object("")
		w.Str("queueName", a.Queue)
		w.Int("popCount", a.PopMessages)
		w.Int("avgLagMs", meanLag(a.LagSum, a.PopMessages))
		w.Int("maxLagMs", a.LagMax)
		w.EndObject()
	}
	w.EndArray()
}
