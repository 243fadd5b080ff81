package server

import (
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/meter"
)

// routeStats are one route's request counters (by status class) and its
// latency histogram.
type routeStats struct {
	byClass [6]*metrics.Counter // index: status / 100
	latency *metrics.PrometheusHistogram
}

func newRouteStats(set *metrics.Set, name string) *routeStats {
	rs := &routeStats{latency: set.GetOrCreatePrometheusHistogram(`queen_http_request_duration_seconds{route="` + name + `"}`)}
	for class := 1; class <= 5; class++ {
		rs.byClass[class] = set.GetOrCreateCounter(`queen_http_requests_total{route="` + name + `",status="` + string(rune('0'+class)) + `xx"}`)
	}
	return rs
}

func (rs *routeStats) observe(status int, start time.Time) {
	if c := status / 100; c >= 1 && c <= 5 {
		rs.byClass[c].Inc()
	}
	rs.latency.UpdateDuration(start)
}

// brokerMetrics are the edge's counters: the message counts derived from
// the broker's answers (package meter's Messages: pushes, pops, acks, the
// failure path; docs/decisions.md B8), and what the edge itself did.
type brokerMetrics struct {
	*meter.Messages

	requests       atomic.Uint64 // every request, for the /metrics JSON summary
	popParked      atomic.Int64  // long polls waiting for messages
	popAbandoned   *metrics.Counter
	popReleased    *metrics.Counter
	forwarded      *metrics.Counter
	overloaded     *metrics.Counter
	payloadsSealed *metrics.Counter
}

func newBrokerMetrics(set *metrics.Set) *brokerMetrics {
	m := &brokerMetrics{
		Messages:       meter.NewMessages(set),
		popAbandoned:   set.GetOrCreateCounter(`queen_pop_abandoned_total`),
		popReleased:    set.GetOrCreateCounter(`queen_pop_released_total`),
		forwarded:      set.GetOrCreateCounter(`queen_forwarded_requests_total`),
		overloaded:     set.GetOrCreateCounter(`queen_http_overloaded_total`),
		payloadsSealed: set.GetOrCreateCounter(`queen_payloads_encrypted_total`),
	}
	set.GetOrCreateGauge(`queen_pop_parked`, func() float64 { return float64(m.popParked.Load()) })
	return m
}

// countPushed counts a push's results in /metrics and the analytics. A
// push is counted once in the cluster: by the node that turns the broker's
// results into the answer to the request (or, for a spool, into its
// replay), never by a node that serves another node's relayed command
// (ARCHITECTURE.md, "Counting once").
func (s *Server) countPushed(res []engine.PushResult) {
	s.m.Pushed(res)
	s.an.Pushed(res)
}
