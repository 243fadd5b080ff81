package analytics

import (
	"github.com/queenmq/queen/server/wire"
)

// SystemMetrics writes the answer to GET /api/v1/analytics/system-metrics?from&to&hostname&workerId:
// per node, its sampled process figures per bucket, ascending.
func (a *Analytics) SystemMetrics(q *Query, w *wire.Writer) error {
	type point struct {
		at      int64
		samples int64
		stats   [numSys]sysStat
	}
	q.Head(w, false)
	w.Array("replicas")
	replicas, points := 0, 0
	for _, n := range q.nodes {
		if !q.node(n.id) {
			continue
		}
		var series []point
		for i := range n.minutes {
			m := &n.minutes[i]
			if m.Node.Samples == 0 {
				continue
			}
			b := bucketStart(m.At, q.bucket)
			if len(series) == 0 || series[len(series)-1].at != b {
				series = append(series, point{at: b, samples: m.Node.Samples, stats: m.Sys})
				continue
			}
			p := &series[len(series)-1]
			p.samples += m.Node.Samples
			for k := range p.stats {
				o := &m.Sys[k]
				p.stats[k] = sysStat{Sum: p.stats[k].Sum + o.Sum, Min: min(p.stats[k].Min, o.Min), Max: max(p.stats[k].Max, o.Max), Last: o.Last}
			}
		}
		if len(series) == 0 {
			continue
		}
		replicas++
		points += len(series)
		w.Object("")
		w.Str("hostname", n.id)
		w.Int("port", int64(n.port))
		w.Int("workerId", 0)
		w.Array("timeSeries")
		for _, p := range series {
			w.Object("")
			w.TimeMillis("timestamp", p.at*minuteUS)
			w.Int("sampleCount", p.samples)
			writeSysMetrics(w, &p.stats, p.samples)
			w.EndObject()
		}
		w.EndArray()
		w.EndObject()
	}
	w.EndArray()
	w.Int("replicaCount", int64(replicas))
	w.Int("bucketMinutes", q.bucket)
	w.Int("pointCount", int64(points))
	w.EndObject()
	return nil
}

// writeSysMetrics writes one point's "metrics". What this broker has no
// counterpart for (a database pool, thread pools, peer sync) is 0.
func writeSysMetrics(w *wire.Writer, st *[numSys]sysStat, samples int64) {
	leaf := func(k string, s sysStat) {
		w.Object(k)
		w.Float("avg", round2(float64(s.Sum)/float64(max(samples, 1))))
		w.Int("min", s.Min)
		w.Int("max", s.Max)
		w.Int("last", s.Last)
		w.EndObject()
	}
	zeros := func(keys ...string) {
		for _, k := range keys {
			leaf(k, sysStat{})
		}
	}
	counts := func(k string, keys ...string) {
		w.Object(k)
		for _, c := range keys {
			w.Int(c, 0)
		}
		w.EndObject()
	}
	w.Object("metrics")
	w.Object("cpu")
	leaf("user_us", st[sysCPUUser])
	leaf("system_us", st[sysCPUSystem])
	w.EndObject()
	w.Object("memory")
	leaf("rss_bytes", st[sysRSS])
	leaf("virtual_bytes", st[sysVirtual])
	w.EndObject()
	w.Object("database")
	zeros("pool_size", "pool_idle", "pool_active")
	w.EndObject()
	w.Object("threadpool")
	w.Object("db")
	zeros("pool_size", "queue_size")
	w.EndObject()
	w.Object("system")
	zeros("pool_size", "queue_size")
	w.EndObject()
	w.EndObject()
	w.Object("registries")
	leaf("response", st[sysInflight])
	w.EndObject()
	w.Object("shared_state")
	w.Bool("enabled", false)
	w.Object("sidecar_ops")
	for _, op := range []string{"push", "pop", "ack"} {
		counts(op, "count", "latency_us", "items")
	}
	w.EndObject()
	counts("queue_backoff", "queues_with_backoff", "total_backed_off_groups", "avg_interval_ms")
	w.Array("queue_backoff_summary")
	w.EndArray()
	counts("queue_config_cache", "size", "hits", "misses")
	counts("consumer_presence", "queues_tracked", "servers_tracked", "total_registrations")
	counts("server_health", "alive", "dead")
	counts("transport", "sent", "received", "dropped")
	w.EndObject()
	w.EndObject()
}
