package server

import (
	"net"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/analytics"
	"github.com/queenmq/queen/server/wire"
)

// The server's side of the analytics (package analytics): it binds the
// recorder, runs its loops, and routes the /api/v1/analytics requests and
// the followers' shipments to it. The counting calls sit in the handlers
// that count (countPushed, pop, ack).

// startAnalytics takes Options.Analytics (or a new recorder) and binds it
// to this server; Serve starts its loops (runAnalytics).
func (s *Server) startAnalytics() {
	if s.an = s.opts.Analytics; s.an == nil {
		s.an = analytics.New(analytics.Options{})
	}
	port := 0
	if _, p, err := net.SplitHostPort(s.opts.Addr); err == nil {
		port, _ = strconv.Atoi(p)
	}
	s.an.Bind(s.broker, port)
}

// runAnalytics starts the recorder's two loops, once: the sampler, and the
// follower's shipments to the leader. Shutdown stops them.
func (s *Server) runAnalytics() {
	s.an.Once(func() {
		select {
		case <-s.stop:
			return // shut down before serving
		default:
		}
		s.loops.Add(2)
		go func() {
			defer s.loops.Done()
			s.an.SampleLoop(s.stop, s.m.requests.Load)
		}()
		go s.shipLoop(s.stop)
	})
}

// shipLoop sends this node's sealed minutes to the leader while it follows
// (POST /internal/v1/cluster/analytics, with the cluster secret).
func (s *Server) shipLoop(stop <-chan struct{}) {
	var outcome changeLog
	s.followLoop(stop, s.an.ShipInterval(),
		"this node's analytics are not sent to the leader: they need the cluster secret (--cluster-secret-file); the leader's analytics will show only its own minutes",
		func(st raft.Status) {
			err := s.an.Ship(st.ID, st.Leader, func(body []byte) ([]byte, error) {
				return s.postToLeader(st.LeaderHTTP, cluster.AnalyticsPath, body, forwardTimeout, fasthttp.StatusOK)
			})
			outcome.note(s.log, err, "analytics shipment to the leader failed", "analytics shipments reach the leader again", "leader", st.Leader)
		})
}

// analyticsReport keeps another node's minutes:
// POST /internal/v1/cluster/analytics {"id", "port", "minutes", "totals",
// "have"} → 200 {"instance", "nodes", "more"}: the leader's process (a
// follower whose leader restarted sends everything again) and the other
// nodes' minutes the sender lacks, so that every node holds the cluster's
// history and a new leader starts with it.
func (s *Server) analyticsReport(ctx *fasthttp.RequestCtx, _ *params) {
	if !s.clustered() {
		s.writeError(ctx, notImplemented("this broker is not a cluster"))
		return
	}
	body, err := s.an.Receive(s.nodeID(), ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	ctx.Response.SetBodyRaw(body)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType("application/json")
}

// relayAnalytics relays the request to the leader from a follower; false
// when this node answers it (it leads, or knows no leader to relay to).
// The analytics routes, /api/v1/status and the overview's rates answer
// from the leader, which holds every node's minutes.
func (s *Server) relayAnalytics(ctx *fasthttp.RequestCtx) bool {
	return s.broker.Status().Role != "leader" && s.forward(ctx)
}

// The /api/v1/analytics routes (docs/api.md §11), answered by the recorder
// from every node's minutes: a follower has the leader answer.

func (s *Server) queueLag(ctx *fasthttp.RequestCtx, _ *params) { s.answerAnalytics(ctx, s.an.QueueLag) }
func (s *Server) queueOps(ctx *fasthttp.RequestCtx, _ *params) { s.answerAnalytics(ctx, s.an.QueueOps) }
func (s *Server) workerMetrics(ctx *fasthttp.RequestCtx, _ *params) {
	s.answerAnalytics(ctx, s.an.WorkerMetrics)
}
func (s *Server) systemMetrics(ctx *fasthttp.RequestCtx, _ *params) {
	s.answerAnalytics(ctx, s.an.SystemMetrics)
}
func (s *Server) queueParkedReplicas(ctx *fasthttp.RequestCtx, _ *params) {
	s.answerAnalytics(ctx, s.an.QueueParkedReplicas)
}
func (s *Server) retentionAnalytics(ctx *fasthttp.RequestCtx, _ *params) {
	s.answerAnalytics(ctx, s.an.Retention)
}

// postgresStats answers GET /api/v1/analytics/postgres-stats from this
// node's own store: it is not relayed.
func (s *Server) postgresStats(ctx *fasthttp.RequestCtx, _ *params) {
	w := startReply(ctx)
	if err := s.an.PostgresStats(&w); err != nil {
		s.writeError(ctx, err)
		return
	}
	sendReply(ctx, fasthttp.StatusOK, w)
}

// answerAnalytics has the leader answer a follower's analytics request;
// else it reads the query and answers it with what route writes, or with
// route's error through the error table.
func (s *Server) answerAnalytics(ctx *fasthttp.RequestCtx, route func(*analytics.Query, *wire.Writer) error) {
	if s.relayAnalytics(ctx) {
		return
	}
	q, err := s.an.ParseQuery(ctx.QueryArgs())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	if err := route(&q, &w); err != nil {
		s.writeError(ctx, err)
		return
	}
	sendReply(ctx, fasthttp.StatusOK, w)
}
