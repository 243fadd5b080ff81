package server

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
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
	defer s.loops.Done()
	t := time.NewTicker(s.an.shipEvery)
	defer t.Stop()
	var lastErr string
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
			s.log.Warn("this node's analytics are not sent to the leader: they need the cluster secret (--cluster-secret-file); the leader's analytics will show only its own minutes")
			return
		}
		sh := s.an.outbox(st.ID, st.Leader)
		if len(sh.Minutes) == 0 {
			continue
		}
		instance, err := s.ship(st.LeaderHTTP, &sh)
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			s.an.shipped(st.Leader, instance, sh.Minutes[len(sh.Minutes)-1].At)
		}
		if msg != lastErr {
			if msg != "" {
				s.log.Warn("analytics shipment to the leader failed", "leader", st.Leader, "err", msg)
			} else {
				s.log.Info("analytics shipments reach the leader again", "leader", st.Leader)
			}
			lastErr = msg
		}
	}
}

// ship posts sh to the leader at addr and returns the leader's process
// instance.
func (s *Server) ship(addr string, sh *shipment) (string, error) {
	body, err := json.Marshal(sh)
	if err != nil {
		return "", err
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(s.relayScheme() + "://" + addr + "/internal/v1/cluster/analytics")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set(forwardedHeader, sh.ID)
	req.Header.Set(clusterSecretHeader, s.opts.ClusterSecret)
	req.SetBodyRaw(body)
	if err := s.client.DoTimeout(req, resp, forwardTimeout); err != nil {
		return "", err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return "", fmt.Errorf("leader answered %d: %s", resp.StatusCode(), resp.Body())
	}
	var reply struct {
		Instance string `json:"instance"`
	}
	if err := json.Unmarshal(resp.Body(), &reply); err != nil || reply.Instance == "" {
		return "", fmt.Errorf("leader answered %q", resp.Body())
	}
	return reply.Instance, nil
}

// analyticsReport keeps another node's minutes:
// POST /internal/v1/cluster/analytics {"id", "port", "minutes", "totals"}
// → 200 {"instance"}: the leader's process, so a follower whose leader
// restarted sends everything again.
func (s *Server) analyticsReport(ctx *fasthttp.RequestCtx, _ *params) {
	if _, ok := s.broker.(Membership); !ok {
		s.writeError(ctx, notImplemented("this broker has no cluster membership"))
		return
	}
	var sh shipment
	if err := json.Unmarshal(ctx.PostBody(), &sh); err != nil {
		s.writeError(ctx, invalidJSON(err.Error()))
		return
	}
	if err := s.an.receive(s.nodeID(), &sh); err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.str("instance", s.an.instance)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}
