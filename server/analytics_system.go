package server

import "github.com/valyala/fasthttp"

// systemMetrics answers GET /api/v1/analytics/system-metrics?from&to&hostname&workerId:
// per node, its sampled process figures per bucket, ascending.
func (s *Server) systemMetrics(ctx *fasthttp.RequestCtx, _ *params) {
	q, ok := s.parseAnalytics(ctx)
	if !ok {
		return
	}
	type point struct {
		at      int64
		samples int64
		stats   [numSys]sysStat
	}
	w := q.head(ctx, false)
	w.array("replicas")
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
		w.object("")
		w.str("hostname", n.id)
		w.int("port", int64(n.port))
		w.int("workerId", 0)
		w.array("timeSeries")
		for _, p := range series {
			w.object("")
			w.timeMillis("timestamp", p.at*minuteUS)
			w.int("sampleCount", p.samples)
			writeSysMetrics(&w, &p.stats, p.samples)
			w.endObject()
		}
		w.endArray()
		w.endObject()
	}
	w.endArray()
	w.int("replicaCount", int64(replicas))
	w.int("bucketMinutes", q.bucket)
	w.int("pointCount", int64(points))
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// writeSysMetrics writes one point's "metrics". What this broker has no
// counterpart for (a database pool, thread pools, peer sync) is 0.
func writeSysMetrics(w *jsonWriter, st *[numSys]sysStat, samples int64) {
	leaf := func(k string, s sysStat) {
		w.object(k)
		w.float("avg", round2(float64(s.Sum)/float64(max(samples, 1))))
		w.int("min", s.Min)
		w.int("max", s.Max)
		w.int("last", s.Last)
		w.endObject()
	}
	zeros := func(keys ...string) {
		for _, k := range keys {
			leaf(k, sysStat{})
		}
	}
	counts := func(k string, keys ...string) {
		w.object(k)
		for _, c := range keys {
			w.int(c, 0)
		}
		w.endObject()
	}
	w.object("metrics")
	w.object("cpu")
	leaf("user_us", st[sysCPUUser])
	leaf("system_us", st[sysCPUSystem])
	w.endObject()
	w.object("memory")
	leaf("rss_bytes", st[sysRSS])
	leaf("virtual_bytes", st[sysVirtual])
	w.endObject()
	w.object("database")
	zeros("pool_size", "pool_idle", "pool_active")
	w.endObject()
	w.object("threadpool")
	w.object("db")
	zeros("pool_size", "queue_size")
	w.endObject()
	w.object("system")
	zeros("pool_size", "queue_size")
	w.endObject()
	w.endObject()
	w.object("registries")
	leaf("response", st[sysInflight])
	w.endObject()
	w.object("shared_state")
	w.bool("enabled", false)
	w.object("sidecar_ops")
	for _, op := range []string{"push", "pop", "ack"} {
		counts(op, "count", "latency_us", "items")
	}
	w.endObject()
	counts("queue_backoff", "queues_with_backoff", "total_backed_off_groups", "avg_interval_ms")
	w.array("queue_backoff_summary")
	w.endArray()
	counts("queue_config_cache", "size", "hits", "misses")
	counts("consumer_presence", "queues_tracked", "servers_tracked", "total_registrations")
	counts("server_health", "alive", "dead")
	counts("transport", "sent", "received", "dropped")
	w.endObject()
	w.endObject()
}

// sharedState answers GET /api/v1/system/shared-state: Queen's UDP peer
// sync has no counterpart here (nodes share state through Raft).
func (s *Server) sharedState(ctx *fasthttp.RequestCtx, _ *params) {
	w := startBody(ctx)
	w.object("")
	w.bool("enabled", false)
	w.str("reason", "not_initialized")
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}
