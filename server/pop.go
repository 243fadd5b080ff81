package server

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/bodies"
	"github.com/queenmq/queen/server/envelope"
	"github.com/queenmq/queen/server/listener"
	"github.com/queenmq/queen/server/wire"
)

// Pop limits. A batch above maxPopBatch is clamped; partitions above the
// engine's candidate cap would be ignored anyway.
const (
	maxPopBatch      = 10000
	maxPopPartitions = 512
)

// Long-poll re-check schedule (docs/semantics.md §4.7, POP_WAIT_*): a parked pop
// re-checks every pollInitial, doubling after pollBackoffAfter empty checks,
// up to pollMax. A notification from Broker.Watch re-checks at once.
const (
	pollInitial      = 100 * time.Millisecond
	pollBackoffAfter = 3
	pollMax          = time.Second
)

// popQueue answers GET /api/v1/pop/queue/{queue}: any partition.
func (s *Server) popQueue(ctx *fasthttp.RequestCtx, p *params) {
	s.pop(ctx, p.get("queue"), "")
}

// popPartition answers GET /api/v1/pop/queue/{queue}/partition/{partition}.
func (s *Server) popPartition(ctx *fasthttp.RequestCtx, p *params) {
	s.pop(ctx, p.get("queue"), p.get("partition"))
}

// popDiscovery answers GET /api/v1/pop?namespace=&task=: any queue whose
// labels match; at least one filter is required.
func (s *Server) popDiscovery(ctx *fasthttp.RequestCtx, _ *params) {
	s.pop(ctx, "", "")
}

// popRequest is a decoded pop: the command and its long-poll deadline (0:
// no waiting).
type popRequest struct {
	cmd  engine.PopCmd
	wait time.Duration
}

func (s *Server) decodePop(ctx *fasthttp.RequestCtx, queue, partition string) (popRequest, error) {
	args := ctx.QueryArgs()
	var r popRequest
	c := &r.cmd
	c.Queue, c.Partition = queue, partition
	if queue == "" {
		c.Namespace, c.Task = queryString(args, "namespace"), queryString(args, "task")
		if c.Namespace == "" && c.Task == "" {
			return r, badRequest("namespace or task is required")
		}
	} else if err := bodies.Name("queue", queue); err != nil {
		return r, err
	}
	c.Group = queryString(args, "consumerGroup")
	if c.Group != "" {
		if err := bodies.Name("consumer group", c.Group); err != nil {
			return r, err
		}
	}
	batch, err := queryInt(args, "batch", 1, 1) // docs/decisions.md C3
	if err != nil {
		return r, err
	}
	parts, err := queryInt(args, "partitions", 1, 1)
	if err != nil {
		return r, err
	}
	if c.LeaseSeconds, err = queryInt(args, "leaseSeconds", 0, 0); err != nil {
		return r, err
	}
	if _, err := queryInt(args, "timeout", 0, 0); err != nil {
		return r, err
	}
	c.Batch, c.Partitions = int(min(batch, maxPopBatch)), int(min(parts, maxPopPartitions))
	c.AutoAck = queryBool(args, "autoAck", false)
	switch queryString(args, "subscriptionMode") {
	case "new", "new-only":
		c.SubscriptionMode = engine.SubNew
	}
	switch from := queryString(args, "subscriptionFrom"); from {
	case "":
	case "now":
		c.SubscriptionMode = engine.SubNew
	default:
		t, ok := wire.ParseTime(from)
		if !ok {
			return r, badRequest("subscriptionFrom must be 'now' or an ISO-8601 timestamp") // docs/decisions.md C6
		}
		c.SubscriptionMode, c.SubscriptionFrom = engine.SubFrom, engine.Micros(t)
	}
	if queryBool(args, "wait", false) {
		r.wait = s.popTimeout(args)
	}
	return r, nil
}

// popTimeout is a long-poll's deadline: the timeout parameter (ms), the
// default when it is missing or not positive, capped.
func (s *Server) popTimeout(args *fasthttp.Args) time.Duration {
	ms, _ := queryInt(args, "timeout", 0, 0) // checked by decodePop
	if ms <= 0 {
		return s.opts.DefaultPopTimeout
	}
	return min(time.Duration(ms)*time.Millisecond, s.opts.MaxPopTimeout)
}

// pop decodes, pops (long-polling if asked) and answers 200 with the
// envelope of docs/api.md §6.4, or 204 when nothing was delivered.
func (s *Server) pop(ctx *fasthttp.RequestCtx, queue, partition string) {
	req, err := s.decodePop(ctx, queue, partition)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if m, ok := s.broker.(Maintainer); ok {
		if _, paused := m.Maintenance(); paused {
			// Pop maintenance: leases and cursors untouched. The request
			// is counted as the empty pop it answers (Queen counts every
			// pop request in its worker metrics).
			var none engine.PopResult
			s.m.Popped(&none)
			s.an.Popped(req.cmd.Queue, false, &none)
			noContent(ctx)
			return
		}
	}
	res, err := raft.Propose[engine.PopResult](s.ctx, s.forwarding(ctx), req.cmd)
	if err == nil && len(res.Messages) == 0 && req.wait > 0 {
		res, err = s.park(ctx, req.cmd, req.wait)
	}
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	s.m.Popped(&res)
	s.an.Popped(req.cmd.Queue, req.cmd.AutoAck, &res)
	if len(res.Messages) == 0 {
		noContent(ctx)
		return
	}
	w := startReply(ctx)
	writePop(&w, &res, s.crypt)
	sendReply(ctx, fasthttp.StatusOK, w)
}

// park long-polls: it waits for a Watch notification or the next re-check
// and pops again, until messages come, the deadline passes (an empty
// result: 204), the server shuts down, or the client goes away. A parked
// pop holds no lease; if the client is found gone after a pop delivered
// messages, their lease is released at once (a "retry" ack: budget
// untouched) so the next consumer gets them without waiting for expiry.
func (s *Server) park(ctx *fasthttp.RequestCtx, cmd engine.PopCmd, wait time.Duration) (engine.PopResult, error) {
	deadline := time.Now().Add(wait)
	// Registering the watch before the next pop closes the race with a push
	// landing between the first pop and the watch.
	notify, cancel := s.broker.Watch(cmd.Queue)
	defer cancel()
	s.m.popParked.Add(1)
	defer s.m.popParked.Add(-1)
	s.an.Park(cmd.Queue, 1)
	defer s.an.Park(cmd.Queue, -1)
	timer := time.NewTimer(pollInitial)
	defer timer.Stop()
	conn := ctx.Conn()
	interval, empties := pollInitial, 0
	for {
		if listener.PeerClosed(conn) {
			s.m.popAbandoned.Inc()
			ctx.SetConnectionClose()
			return engine.PopResult{}, nil
		}
		res, err := raft.Propose[engine.PopResult](s.ctx, s.prop, cmd)
		if err != nil {
			return res, err
		}
		if len(res.Messages) > 0 {
			if listener.PeerClosed(conn) {
				s.m.popAbandoned.Inc()
				s.release(&res)
				ctx.SetConnectionClose()
				return engine.PopResult{}, nil
			}
			return res, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, nil
		}
		timer.Reset(min(interval, left))
		select {
		case <-notify:
			// Re-check now; the loop resets the timer (Go 1.23+ timers
			// need no draining).
		case <-timer.C:
			if empties++; empties >= pollBackoffAfter {
				interval = min(interval*2, pollMax)
			}
		case <-ctx.Done(): // server shutdown
			return engine.PopResult{}, nil
		}
	}
}

// release gives back the lease of messages nobody will receive: a "retry"
// ack on the first message of each claimed partition releases it without
// charging the retry budget. An autoAck pop has no lease: its messages are
// lost, as autoAck is at-most-once.
func (s *Server) release(res *engine.PopResult) {
	if res.LeaseID == (engine.ID{}) {
		return
	}
	var items []engine.AckItem
	seen := map[engine.ID]bool{}
	for i := range res.Messages {
		m := &res.Messages[i]
		if seen[m.PartitionID] {
			continue
		}
		seen[m.PartitionID] = true
		items = append(items, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID,
			Group: res.Group, Status: cursor.Retry, Lease: res.LeaseID})
	}
	if _, err := raft.Propose[[]engine.AckResult](s.ctx, s.prop, engine.AckCmd{Items: items}); err != nil {
		s.log.Warn("release abandoned pop", "err", err)
		return
	}
	s.m.popReleased.Add(len(items))
}

// writePop writes the pop envelope. Top-level partition fields are the
// first claim's; per-message fields are authoritative for acks. A payload
// the broker sealed is written decrypted when c opens it; any other is
// written as stored.
func writePop(w *wire.Writer, res *engine.PopResult, c *envelope.Cipher) {
	first := &res.Claims[0]
	w.Object("")
	w.Bool("success", true)
	w.Str("queue", first.Queue)
	w.Str("partition", first.Partition)
	w.ID("partitionId", first.PartitionID)
	leaseField(w, "leaseId", res.LeaseID)
	w.TimeMillis("leaseExpiresAt", first.LeaseExpiresAt)
	w.Str("consumerGroup", res.Group)
	w.Int("partitionsClaimed", int64(len(res.Claims)))
	w.Array("messages")
	for i := range res.Messages {
		m := &res.Messages[i]
		w.Object("")
		w.ID("id", m.ID)
		w.Str("transactionId", m.TransactionID)
		if m.HasTrace {
			w.ID("traceId", m.TraceID)
		} else {
			w.Null("traceId")
		}
		data, _ := c.Reveal(m.Payload, m.Sealed)
		w.Raw("data", data)
		w.StrOrNull("producerSub", m.ProducerSub)
		w.TimeMicros("createdAt", m.CreatedAt)
		w.ID("partitionId", m.PartitionID)
		w.Str("partition", m.Partition)
		leaseField(w, "leaseId", res.LeaseID)
		w.Str("consumerGroup", res.Group)
		w.Str("queue", m.Queue)
		w.Int("retryCount", int64(m.RetryCount))
		w.Int("deliveryAttempt", int64(m.Attempt))
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
}

// leaseField writes a lease id, or "" for none (autoAck).
func leaseField(w *wire.Writer, k string, id engine.ID) {
	if id == (engine.ID{}) {
		w.Str(k, "")
		return
	}
	w.ID(k, id)
}
