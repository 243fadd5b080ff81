package analytics

import (
	"cmp"
	"math"
	"slices"

	"github.com/queenmq/queen/server/wire"
)

// The time series of GET /api/v1/status (docs/api.md §11), built from the
// same minutes worker-metrics and system-metrics serve: each node reports
// what it counted, and the figures here are sums over the nodes, so a
// request is in them as many times as the nodes counted it (once).

// statusBucket is one bucket of the status series: every node's rows,
// the selected queues' entries (when the request filters queues), and
// the means of the nodes' sampled process figures.
type statusBucket struct {
	at      int64 // unix minute the bucket starts
	workers workerAgg
	queues  queueMinute
	// cpuUser, cpuSystem (% × 100) and rss (bytes) add up one mean per
	// node-minute that was sampled; sysRows counts those node-minutes.
	cpuUser, cpuSystem, rss float64
	sysRows                 int
}

// WriteThroughput writes status' "pointCount" and "throughput" over the
// queues in names (nil: every queue and every node's rows).
func (q *Query) WriteThroughput(w *wire.Writer, names map[string]bool) {
	buckets := q.statusBuckets(names)
	w.Int("pointCount", int64(len(buckets)))
	q.writeThroughputRows(w, buckets, names != nil)
}

// statusBuckets sums the minutes in range into buckets, newest first.
// With names nil a bucket is listed when any node has a row in it (Queen:
// its worker rows); with names, when one of those queues has an entry in
// it (Queen: its queue rows), and the worker and process figures are
// still every node's.
func (q *Query) statusBuckets(names map[string]bool) []*statusBucket {
	byAt := map[int64]*statusBucket{}
	bucket := func(m int64) *statusBucket {
		at := bucketStart(m, q.bucket)
		b := byAt[at]
		if b == nil {
			b = &statusBucket{at: at, queues: queueMinute{Partitions: -1}}
			byAt[at] = b
		}
		return b
	}
	listed := map[int64]bool{}
	for _, n := range q.nodes {
		for i := range n.minutes {
			m := &n.minutes[i]
			b := bucket(m.At)
			b.workers.add(m)
			if s := m.Node.Samples; s > 0 {
				b.cpuUser += float64(m.Sys[sysCPUUser].Sum) / float64(s)
				b.cpuSystem += float64(m.Sys[sysCPUSystem].Sum) / float64(s)
				b.rss += float64(m.Sys[sysRSS].Sum) / float64(s)
				b.sysRows++
			}
			if names == nil {
				listed[b.at] = true
				continue
			}
			for j := range m.Queues {
				if names[m.Queues[j].Queue] {
					b.queues.add(&m.Queues[j])
					listed[b.at] = true
				}
			}
		}
	}
	out := make([]*statusBucket, 0, len(listed))
	for at := range listed {
		out = append(out, byAt[at])
	}
	slices.SortFunc(out, func(a, b *statusBucket) int { return cmp.Compare(b.at, a.at) })
	return out
}

// writeThroughputRows writes status' "throughput": one row per bucket,
// newest first. ingested = messages pushed, processed = messages acked
// (successes and failures), popMessages = messages delivered.
func (q *Query) writeThroughputRows(w *wire.Writer, buckets []*statusBucket, filtered bool) {
	w.Array("throughput")
	for _, b := range buckets {
		a := &b.workers
		pushed, acked, popped, ackFailed, lagSum, lagMax := a.PushMessages, a.AckMessages, a.PopMessages, a.AckFailed, a.LagSum, a.LagMax
		if filtered {
			e := &b.queues
			pushed, acked, popped, ackFailed, lagSum, lagMax = e.PushMessages, e.AckSuccess+e.AckFailed, e.PopMessages, e.AckFailed, e.LagSum, e.LagMax
		}
		w.Object("")
		w.TimeLayout("timestamp", b.at*minuteUS, layoutSeconds)
		w.Int("ingested", pushed)
		w.Int("processed", acked)
		w.Int("popMessages", popped)
		w.Float("ingestedPerSecond", q.perSecond(pushed))
		w.Float("processedPerSecond", q.perSecond(acked))
		w.Float("popPerSecond", q.perSecond(popped))
		w.Int("avgLagMs", meanLag(lagSum, popped))
		w.Int("maxLagMs", lagMax)
		w.Int("avgEventLoopLagMs", a.avg(a.loopLag))
		w.Int("maxEventLoopLagMs", a.LoopLagMax)
		w.Int("minFreeSlots", 0)
		w.Int("dbErrors", a.DBErrors)
		w.Int("ackFailed", ackFailed)
		w.Int("dlqCount", a.DLQ)
		if b.sysRows == 0 { // no node sampled itself in the bucket
			for _, k := range []string{"queenCpuUserPct", "queenCpuSysPct", "queenRssMb"} {
				w.Null(k)
			}
		} else {
			rows := float64(b.sysRows)
			w.Float("queenCpuUserPct", round2(b.cpuUser/rows/100))
			w.Float("queenCpuSysPct", round2(b.cpuSystem/rows/100))
			w.Float("queenRssMb", math.Round(b.rss/rows/(1<<20)*10)/10)
		}
		w.Int("dbPoolActive", 0)
		w.Int("dbPoolIdle", 0)
		w.Int("dbPoolSize", 0)
		w.EndObject()
	}
	w.EndArray()
}

// totals sums the nodes' running totals (since each node started).
func (q *Query) totals() nodeMinute {
	var t nodeMinute
	for _, n := range q.nodes {
		t.add(&n.totals)
	}
	return t
}

// WriteRequests writes status' messages.requests and
// messages.batchEfficiency: the requests of each kind and messages per
// request since the nodes started.
func (q *Query) WriteRequests(w *wire.Writer) {
	t := q.totals()
	w.Object("requests")
	w.Int("push", t.PushRequests)
	w.Int("pop", t.PopRequests)
	w.Int("ack", t.AckRequests)
	w.EndObject()
	writeBatchEfficiency(w, &t)
}

// Errors are the storage errors and failed acks since the nodes started.
func (q *Query) Errors() (dbErrors, ackFailed int64) {
	t := q.totals()
	return t.DBErrors, t.AckFailed
}

// perRequest is messages per request, 2 dp (0 without requests).
func perRequest(messages, requests int64) float64 {
	if requests == 0 {
		return 0
	}
	return round2(float64(messages) / float64(requests))
}

// writeBatchEfficiency writes messages.batchEfficiency: messages per
// request of each kind since the nodes started.
func writeBatchEfficiency(w *wire.Writer, t *nodeMinute) {
	w.Object("batchEfficiency")
	w.Float("push", perRequest(t.PushMessages, t.PushRequests))
	w.Float("pop", perRequest(t.PopMessages, t.PopRequests))
	w.Float("ack", perRequest(t.AckMessages, t.AckRequests))
	w.EndObject()
}

// CurrentRates are the messages pushed and acked per second in the last
// complete minute: for each node, the newer of the two minutes before the
// current one that it has reported (a follower's minute reaches the
// leader a second or so after it ends), summed over the nodes.
func (a *Analytics) CurrentRates() (ingested, processed float64) {
	a.rotate(a.broker)
	now := unixMinute(a.now())
	var pushed, acked int64
	for _, n := range a.series(a.broker.Status().ID, now-2, now-1) {
		if k := len(n.minutes); k > 0 {
			pushed += n.minutes[k-1].Node.PushMessages
			acked += n.minutes[k-1].Node.AckMessages
		}
	}
	return round2(float64(pushed) / 60), round2(float64(acked) / 60)
}
