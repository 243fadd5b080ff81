package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
)

// startAnalytics takes Options.Analytics (or a new recorder); Serve starts
// its loops (runAnalytics).
func (s *Server) startAnalytics() {
	if s.an = s.opts.Analytics; s.an == nil {
		s.an = NewAnalytics(AnalyticsOptions{})
	}
	if _, port, err := net.SplitHostPort(s.opts.Addr); err == nil {
		p, _ := strconv.Atoi(port)
		s.an.mu.Lock()
		s.an.port = p
		s.an.mu.Unlock()
	}
}

// runAnalytics starts the recorder's two loops, once: the sampler, and the
// follower's shipments to the leader. Shutdown stops them.
func (s *Server) runAnalytics() {
	s.an.started.Do(func() {
		select {
		case <-s.stop:
			return // shut down before serving
		default:
		}
		s.loops.Add(2)
		go s.sampleLoop(s.stop)
		go s.shipLoop(s.stop)
	})
}

// sampleLoop samples the gauges every SampleInterval and seals each minute
// once the clock has passed it.
func (s *Server) sampleLoop(stop <-chan struct{}) {
	defer s.loops.Done()
	t := time.NewTicker(s.an.sampleEvery)
	defer t.Stop()
	for {
		var tick time.Time
		select {
		case <-stop:
			return
		case tick = <-t.C:
		}
		lag := time.Since(tick)
		s.an.rotate(s.broker)
		s.an.sample(gauges{loopLag: lag, proc: readProc(), wall: time.Now(), requests: s.m.requests.Load()})
	}
}

// shipLoop sends this node's sealed minutes to the leader while it follows
// (POST /internal/v1/cluster/analytics, with the cluster secret).
func (s *Server) shipLoop(stop <-chan struct{}) {
	var outcome changeLog
	s.followLoop(stop, s.an.shipEvery,
		"this node's analytics are not sent to the leader: they need the cluster secret (--cluster-secret-file); the leader's analytics will show only its own minutes",
		func(st raft.Status) {
			sh, worth := s.an.outbox(st.ID, st.Leader)
			if !worth {
				return
			}
			reply, err := s.ship(st.LeaderHTTP, &sh)
			if err == nil {
				var through int64
				if n := len(sh.Minutes); n > 0 {
					through = sh.Minutes[n-1].At
				}
				s.an.shipped(st.ID, st.Leader, through, &reply)
			}
			outcome.note(s.log, err, "analytics shipment to the leader failed", "analytics shipments reach the leader again", "leader", st.Leader)
		})
}

// followLoop calls each every interval while this node follows a leader
// whose HTTP address it knows (the storage reports, the analytics
// shipments). Those calls carry the cluster secret: without one it logs
// noSecret once and stops.
func (s *Server) followLoop(stop <-chan struct{}, every time.Duration, noSecret string, each func(st raft.Status)) {
	defer s.loops.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st := s.broker.Status()
		if st.Role == "leader" || st.LeaderHTTP == "" || st.Leader == "" || st.Leader == st.ID {
			continue
		}
		if s.opts.ClusterSecret == "" {
			s.log.Warn(noSecret)
			return
		}
		each(st)
	}
}

// changeLog logs a loop's outcome when it changes: the first failure (and
// a different one), and the first success after failures.
type changeLog struct{ last string }

func (c *changeLog) note(log *slog.Logger, err error, failed, recovered string, args ...any) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == c.last:
	case msg != "":
		log.Warn(failed, append(args, "err", msg)...)
	default:
		log.Info(recovered, args...)
	}
	c.last = msg
}

// postToLeader posts a JSON body to path on the leader at addr as node id,
// with the cluster secret, and returns the answer's body when its status is
// want.
func (s *Server) postToLeader(addr, path, id string, body []byte, timeout time.Duration, want int) ([]byte, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	s.toNode(req, addr, path, "application/json", body)
	req.Header.Set(forwardedHeader, id)
	if err := s.client.DoTimeout(req, resp, timeout); err != nil {
		return nil, err
	}
	if resp.StatusCode() != want {
		return nil, fmt.Errorf("leader answered %d: %s", resp.StatusCode(), resp.Body())
	}
	return append([]byte(nil), resp.Body()...), nil
}

// ship posts sh to the leader at addr and returns its reply.
func (s *Server) ship(addr string, sh *shipment) (shipReply, error) {
	var reply shipReply
	body, err := json.Marshal(sh)
	if err != nil {
		return reply, err
	}
	answer, err := s.postToLeader(addr, "/internal/v1/cluster/analytics", sh.ID, body, forwardTimeout, fasthttp.StatusOK)
	if err != nil {
		return reply, err
	}
	if err := json.Unmarshal(answer, &reply); err != nil || reply.Instance == "" {
		return reply, fmt.Errorf("leader answered %.200q", answer)
	}
	return reply, nil
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
	var sh shipment
	if err := json.Unmarshal(ctx.PostBody(), &sh); err != nil {
		s.writeError(ctx, invalidJSON(err.Error()))
		return
	}
	reply, err := s.an.receive(s.nodeID(), &sh)
	if err == nil {
		var body []byte
		if body, err = json.Marshal(&reply); err == nil {
			ctx.Response.SetBodyRaw(body)
			ctx.SetStatusCode(fasthttp.StatusOK)
			ctx.Response.Header.SetContentType("application/json")
			return
		}
	}
	s.writeError(ctx, err)
}
