package server

import (
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/reply"
	"github.com/queenmq/queen/server/wire"
)

// health answers GET /health: 200 "healthy" while the node knows a leader
// (commands can be applied) and its storage is sound, else 503 "unhealthy";
// "fault" says what is wrong with the storage ("" when nothing is). The
// CLI's ping reads status, database and version. "storage" says whether
// this node takes data and why not (storage.go); a node below its reserve
// is still healthy: it serves reads, pops and acks.
func (s *Server) health(ctx *fasthttp.RequestCtx, _ *params) {
	st := s.broker.Status()
	groups := s.groupStatuses()
	leaderless := !st.HasLeader()
	for _, g := range groups {
		leaderless = leaderless || !g.HasLeader()
	}
	status, database, code := "healthy", "connected", fasthttp.StatusOK
	switch {
	case st.Fault != "":
		status, database, code = "unhealthy", "faulted", fasthttp.StatusServiceUnavailable
	case leaderless:
		status, database, code = "unhealthy", "disconnected", fasthttp.StatusServiceUnavailable
	}
	w := reply.Start(ctx)
	w.Object("")
	w.Str("status", status)
	w.Str("database", database)
	w.Str("server", "queen")
	w.Str("version", s.opts.Version)
	w.Str("id", st.ID)
	w.Str("worker_id", st.ID)
	w.Str("role", st.Role)
	w.Str("leader", st.Leader)
	w.Str("leaderHttp", st.LeaderHTTP)
	w.Str("fault", st.Fault)
	w.Int("applied", int64(st.Applied))
	w.Int("term", int64(st.Term))
	w.Int("voters", int64(st.Voters))
	w.Int("uptime", int64(time.Since(s.started).Seconds()))
	s.writeVersions(&w, st)
	w.Object("shared_state")
	w.Bool("enabled", false)
	w.EndObject()
	w.Object("queen")
	w.Str("worker_id", st.ID)
	w.Str("status", "active")
	w.EndObject()
	s.storageView().WriteJSON(&w, "storage")
	if groups != nil {
		// A grouped broker: the fields above are the directory's, and
		// each data group has its row (ARCHITECTURE.md, "Scale-out").
		w.Array("groups")
		for _, g := range groups {
			w.Object("")
			w.Int("group", int64(g.group))
			w.Str("role", g.Role)
			w.Str("leader", g.Leader)
			w.Str("leaderHttp", g.LeaderHTTP)
			w.Int("applied", int64(g.Applied))
			w.Int("term", int64(g.Term))
			w.Int("voters", int64(g.Voters))
			w.Str("fault", g.Fault)
			w.EndObject()
		}
		w.EndArray()
	}
	w.EndObject()
	reply.Send(ctx, code, w)
}

// writeVersions writes the command version this node advertises (read by
// the other nodes, raft/version.go: a /health without it is version 1),
// the cluster's as this node last read it, and every server's.
func (s *Server) writeVersions(w *wire.Writer, st raft.Status) {
	w.Int("commandVersion", int64(st.CommandVersion))
	w.Int("clusterVersion", int64(st.ClusterVersion))
	vb, ok := s.broker.(interface{ Versions() []raft.NodeVersion })
	if !ok {
		return
	}
	w.Array("nodes")
	for _, v := range vb.Versions() {
		w.Object("")
		w.Str("id", v.ID)
		w.Str("version", v.Binary)
		w.Int("commandVersion", int64(v.Command))
		w.Bool("known", v.Known)
		w.EndObject()
	}
	w.EndArray()
}

// groupStatus is one Raft group's status on this node.
type groupStatus struct {
	group uint32
	raft.Status
}

// groupStatuses are the groups queues are spread over, the directory
// first; none when one group holds every queue.
func (s *Server) groupStatuses() []groupStatus {
	var out []groupStatus
	for _, g := range s.groups.list() {
		out = append(out, groupStatus{group: g, Status: s.groups.status(g)})
	}
	return out
}

// metricsJSON answers GET /metrics: Queen's small JSON snapshot.
func (s *Server) metricsJSON(ctx *fasthttp.RequestCtx, _ *params) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st := s.broker.Status()
	w := reply.Start(ctx)
	w.Object("")
	w.Int("uptime", int64(time.Since(s.started).Seconds()))
	w.Object("requests")
	w.Int("total", int64(s.m.requests.Load()))
	w.Int("rate", 0)
	w.EndObject()
	w.Object("messages")
	w.Int("total", int64(s.m.pushQueued.Get()))
	w.Int("rate", 0)
	w.EndObject()
	w.Object("database")
	w.Int("poolSize", 0)
	w.Int("idleConnections", 0)
	w.Int("waitingRequests", 0)
	w.EndObject()
	w.Object("memory")
	w.Int("rss", int64(ms.Sys))
	w.Int("heapTotal", int64(ms.HeapSys))
	w.Int("heapUsed", int64(ms.HeapAlloc))
	w.Int("external", 0)
	w.Int("arrayBuffers", 0)
	w.EndObject()
	w.Object("cpu")
	w.Int("user", 0)
	w.Int("system", 0)
	w.EndObject()
	w.Object("raft")
	w.Str("role", st.Role)
	w.Int("applied", int64(st.Applied))
	w.EndObject()
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}

// metricsPrometheus answers GET /metrics/prometheus: the metric set, the
// process and Go runtime series, and gauges read from the broker at scrape
// time (DLQ depth per queue and per (queue, group), docs/decisions.md B8; the node's Raft view).
func (s *Server) metricsPrometheus(ctx *fasthttp.RequestCtx, _ *params) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	s.opts.Metrics.WritePrometheus(ctx)
	metrics.WriteProcessMetrics(ctx)
	st := s.broker.Status()
	metrics.WriteGaugeUint64(ctx, "queen_raft_applied_index", st.Applied)
	metrics.WriteGaugeUint64(ctx, "queen_raft_term", st.Term)
	metrics.WriteGaugeUint64(ctx, "queen_raft_has_leader", boolGauge(st.HasLeader()))
	metrics.WriteGaugeUint64(ctx, "queen_raft_is_leader", boolGauge(st.Role == "leader"))
	metrics.WriteCounterUint64(ctx, "queen_storage_errors_total", st.StorageErrors)
	metrics.WriteGaugeUint64(ctx, "queen_storage_faulted", boolGauge(st.Fault != ""))
	groups := s.groupStatuses()
	for _, g := range groups {
		label := `{group="` + strconv.FormatUint(uint64(g.group), 10) + `"}`
		metrics.WriteGaugeUint64(ctx, "queen_raft_group_applied_index"+label, g.Applied)
		metrics.WriteGaugeUint64(ctx, "queen_raft_group_term"+label, g.Term)
		metrics.WriteGaugeUint64(ctx, "queen_raft_group_has_leader"+label, boolGauge(g.HasLeader()))
		metrics.WriteGaugeUint64(ctx, "queen_raft_group_is_leader"+label, boolGauge(g.Role == "leader"))
	}
	s.writeStorageMetrics(ctx)
	if len(groups) > 0 {
		// Which group holds each queue: where its writes go.
		if qs, err := s.broker.Queues(); err == nil {
			for _, q := range qs {
				metrics.WriteGaugeUint64(ctx, `queen_queue_group{queue=`+strconv.Quote(q.Name)+`}`, uint64(s.groups.placement(q.Name)))
			}
		}
	}
	if err := s.writeDLQDepth(ctx); err != nil {
		s.log.Warn("metrics: dlq depth", "err", err)
	}
}

func boolGauge(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// writeDLQDepth writes queen_dlq_depth{queue} and
// queen_dlq_depth_by_group{queue,group} for the groups with a cursor on the
// queue. The counts come from the DLQ indexes, not from reading rows.
func (s *Server) writeDLQDepth(w io.Writer) error {
	qs, err := s.broker.Queues()
	if err != nil {
		return err
	}
	cursors, err := s.broker.Cursors(time.Now().UnixMicro(), "")
	if err != nil {
		return err
	}
	groups := map[string][]string{} // by queue, in group order
	seen := map[[2]string]bool{}
	for i := range cursors {
		k := [2]string{cursors[i].Queue, cursors[i].Group}
		if !seen[k] {
			seen[k] = true
			groups[k[0]] = append(groups[k[0]], k[1])
		}
	}
	for i := range qs {
		q := qs[i].Name
		_, total, err := s.broker.ListDLQ(dlqCount(q, ""))
		if err != nil {
			return err
		}
		metrics.WriteGaugeUint64(w, `queen_dlq_depth{queue="`+labelValue(q)+`"}`, uint64(total))
		for _, g := range groups[q] {
			_, n, err := s.broker.ListDLQ(dlqCount(q, g))
			if err != nil {
				return err
			}
			metrics.WriteGaugeUint64(w, `queen_dlq_depth_by_group{queue="`+labelValue(q)+`",group="`+labelValue(g)+`"}`, uint64(n))
		}
	}
	return nil
}

// dlqCount is a filter whose only use is its total.
func dlqCount(queue, group string) engine.DLQFilter {
	return engine.DLQFilter{Queue: queue, Group: group, Limit: 1}
}

// labelValue escapes a Prometheus label value.
func labelValue(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}
