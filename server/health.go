package server

import (
	"runtime"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/meter"
	"github.com/queenmq/queen/server/wire"
)

// memberLister is a grouped broker (cluster.Host): the voters of every
// group, where Status has the directory's.
type memberLister interface{ Members() []string }

// health answers GET /health: 200 "healthy" while the node knows a leader
// (commands can be applied) and its storage is sound, else 503 "unhealthy";
// "fault" says what is wrong with the storage ("" when nothing is). The
// CLI's ping reads status, database and version. "storage" says whether
// this node takes data and why not (storage.go); a node below its reserve
// is still healthy: it serves reads, pops and acks.
//
// "members" are the ids whose votes the cluster counts: the voters of its
// one group, or with groups every group's (memberLister). A node whose
// store was lost reads them before it joins again (cmd/queen).
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
	w := startReply(ctx)
	w.Object("")
	w.Str("status", status)
	w.Str("database", database)
	w.Str("server", "queen")
	w.Str("version", s.opts.Version)
	w.Str("id", st.ID)
	w.Str("store", st.Store)
	w.Str("cluster", st.Cluster)
	w.Str("worker_id", st.ID)
	w.Str("role", st.Role)
	w.Str("leader", st.Leader)
	w.Str("leaderHttp", st.LeaderHTTP)
	w.Str("fault", st.Fault)
	w.Int("applied", int64(st.Applied))
	w.Int("term", int64(st.Term))
	w.Int("voters", int64(st.Voters))
	members := st.Members
	if ml, ok := s.broker.(memberLister); ok {
		members = ml.Members()
	}
	w.Array("members")
	for _, m := range members {
		w.Str("", m)
	}
	w.EndArray()
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
	sendReply(ctx, code, w)
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
	w := startReply(ctx)
	w.Object("")
	w.Int("uptime", int64(time.Since(s.started).Seconds()))
	w.Object("requests")
	w.Int("total", int64(s.m.requests.Load()))
	w.Int("rate", 0)
	w.EndObject()
	w.Object("messages")
	w.Int("total", int64(s.m.PushQueued.Get()))
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
	sendReply(ctx, fasthttp.StatusOK, w)
}

// metricsPrometheus answers GET /metrics/prometheus: the metric set, the
// process and Go runtime series, and the gauges read at scrape time
// (package meter: the node's Raft view, free space, DLQ depth per queue and
// per (queue, group), with --groups each group's, its voters, the groups
// under-replicated and the moves under way, docs/decisions.md B8).
func (s *Server) metricsPrometheus(ctx *fasthttp.RequestCtx, _ *params) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	s.opts.Metrics.WritePrometheus(ctx)
	metrics.WriteProcessMetrics(ctx)
	meter.WriteRaft(ctx, s.broker.Status())
	groups := s.groupStatuses()
	for _, g := range groups {
		meter.WriteGroup(ctx, g.group, g.Status)
	}
	meter.WriteStorage(ctx, s.storageView())
	if len(groups) > 0 {
		if qs, err := s.broker.Queues(); err == nil {
			meter.WriteQueueGroups(ctx, qs, s.groups.placement)
		}
		if m, ok := s.broker.(Mover); ok {
			meter.WritePlacement(ctx, len(m.Moves()), s.groups.list(), m.QueuesPlaced)
		}
		if gm, ok := s.broker.(GroupMembership); ok {
			meter.WriteVoters(ctx, s.groups.layout(), gm.ReplicaCount())
		}
	}
	if err := meter.WriteDLQDepth(ctx, s.broker); err != nil {
		s.log.Warn("metrics: dlq depth", "err", err)
	}
}
