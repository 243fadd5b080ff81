package server

import (
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
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

// brokerMetrics count what the edge can derive from the broker's answers:
// messages pushed, delivered and acked, and the failure path (docs/decisions.md B8).
type brokerMetrics struct {
	requests atomic.Uint64 // every request, for the /metrics JSON summary

	pushQueued, pushDuplicate, pushFailed *metrics.Counter
	popMessages, popEmpty, popRedelivered *metrics.Counter
	popParked                             atomic.Int64
	popAbandoned, popReleased             *metrics.Counter
	ackSuccess, ackFailed                 *metrics.Counter
	nackFailed, nackRetry, nackDLQ        *metrics.Counter
	retryCharges                          *metrics.Counter
	deadLettersAck, deadLettersMaxDeliv   *metrics.Counter
	deadLettersAdmin, drops               *metrics.Counter
	replays, dlqDeletes                   *metrics.Counter
	txSuccess, txFailed                   *metrics.Counter
	forwarded                             *metrics.Counter
	overloaded                            *metrics.Counter
	payloadsSealed                        *metrics.Counter
}

func newBrokerMetrics(set *metrics.Set) *brokerMetrics {
	m := &brokerMetrics{
		pushQueued:          set.GetOrCreateCounter(`queen_push_messages_total{status="queued"}`),
		pushDuplicate:       set.GetOrCreateCounter(`queen_push_messages_total{status="duplicate"}`),
		pushFailed:          set.GetOrCreateCounter(`queen_push_messages_total{status="failed"}`),
		popMessages:         set.GetOrCreateCounter(`queen_pop_messages_total`),
		forwarded:           set.GetOrCreateCounter(`queen_forwarded_requests_total`),
		overloaded:          set.GetOrCreateCounter(`queen_http_overloaded_total`),
		payloadsSealed:      set.GetOrCreateCounter(`queen_payloads_encrypted_total`),
		popEmpty:            set.GetOrCreateCounter(`queen_pop_empty_total`),
		popRedelivered:      set.GetOrCreateCounter(`queen_redeliveries_total`),
		popAbandoned:        set.GetOrCreateCounter(`queen_pop_abandoned_total`),
		popReleased:         set.GetOrCreateCounter(`queen_pop_released_total`),
		ackSuccess:          set.GetOrCreateCounter(`queen_ack_messages_total{result="success"}`),
		ackFailed:           set.GetOrCreateCounter(`queen_ack_messages_total{result="failed"}`),
		nackFailed:          set.GetOrCreateCounter(`queen_nacks_total{status="failed"}`),
		nackRetry:           set.GetOrCreateCounter(`queen_nacks_total{status="retry"}`),
		nackDLQ:             set.GetOrCreateCounter(`queen_nacks_total{status="dlq"}`),
		retryCharges:        set.GetOrCreateCounter(`queen_retry_budget_charges_total`),
		deadLettersAck:      set.GetOrCreateCounter(`queen_dead_letters_total{reason="ack"}`),
		deadLettersMaxDeliv: set.GetOrCreateCounter(`queen_dead_letters_total{reason="max_deliveries"}`),
		deadLettersAdmin:    set.GetOrCreateCounter(`queen_dead_letters_total{reason="admin"}`),
		drops:               set.GetOrCreateCounter(`queen_drops_total`),
		replays:             set.GetOrCreateCounter(`queen_dlq_replays_total`),
		dlqDeletes:          set.GetOrCreateCounter(`queen_dlq_deletes_total`),
		txSuccess:           set.GetOrCreateCounter(`queen_transactions_total{result="success"}`),
		txFailed:            set.GetOrCreateCounter(`queen_transactions_total{result="failed"}`),
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
	s.m.pushed(res)
	s.an.Pushed(res)
}

// pushed counts push results.
func (m *brokerMetrics) pushed(res []engine.PushResult) {
	for i := range res {
		switch res[i].Status {
		case engine.Queued:
			m.pushQueued.Inc()
		case engine.Duplicate:
			m.pushDuplicate.Inc()
		default:
			m.pushFailed.Inc()
		}
	}
}

// popped counts a pop's deliveries; a message whose batch was delivered
// before (attempt > 1) is a redelivery.
func (m *brokerMetrics) popped(res *engine.PopResult) {
	m.popMessages.Add(len(res.Messages))
	if len(res.Messages) == 0 {
		m.popEmpty.Inc()
	}
	for i := range res.Messages {
		if res.Messages[i].Attempt > 1 {
			m.popRedelivered.Inc()
		}
	}
	m.deadLettersMaxDeliv.Add(res.DeadLettered)
}

// acked counts ack results. The retry budget is charged once per
// (partition, group) whose call carried an applied "failed" and ended in
// neither a dead-letter nor a drop (docs/semantics.md §6.3); the edge sees exactly
// that from the per-item flags.
func (m *brokerMetrics) acked(items []engine.AckItem, res []engine.AckResult) {
	type key struct {
		part  engine.ID
		group string
	}
	var charged, terminal map[key]bool
	for i := range res {
		r, it := &res[i], &items[i]
		if r.Success {
			m.ackSuccess.Inc()
		} else {
			m.ackFailed.Inc()
		}
		if r.DLQ {
			m.deadLettersAck.Inc()
		}
		if r.Dropped {
			m.drops.Inc()
		}
		if !r.Success || r.Noop {
			continue
		}
		k := key{it.PartitionID, it.Group}
		switch it.Status {
		case cursor.Failed:
			m.nackFailed.Inc()
			if charged == nil {
				charged = map[key]bool{}
			}
			charged[k] = true
		case cursor.Retry:
			m.nackRetry.Inc()
		case cursor.DeadLetter:
			m.nackDLQ.Inc()
		}
		if r.DLQ || r.Dropped {
			if terminal == nil {
				terminal = map[key]bool{}
			}
			terminal[k] = true
		}
	}
	for k := range charged {
		if !terminal[k] {
			m.retryCharges.Inc()
		}
	}
}
