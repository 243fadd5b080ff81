package server

import (
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/bodies"
	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/wire"
)

// push answers POST /api/v1/push (docs/api.md §5): 201 with one result per item,
// in input order.
func (s *Server) push(ctx *fasthttp.RequestCtx, p *params) {
	// A follower in push maintenance spools. Otherwise, without the
	// cluster secret to send a prepared push with, a follower relays the
	// request unread (relayUnread); with it, the push is read and sealed
	// here, and its proposer prepares it for the leader (prepared.go).
	m, ok := s.broker.(Maintainer)
	spools := ok && pushMaintenance(m)
	if !spools && s.relayUnread(ctx) {
		return
	}
	body := ctx.PostBody()
	items, err := bodies.PushItems(body)
	// A spool replay relayed by another node (it proved the cluster
	// secret) keeps the producerSub its node stamped when it spooled it,
	// and is not spooled again. Its payloads are plain (the relaying node
	// opened what it had sealed) and are sealed here like any push: no
	// request can say its payloads are already sealed (spool.go). A
	// follower of this version replays on the cluster path instead, and
	// relays so only to a leader without it; one of an older version
	// relays so to any leader, which is why this route keeps reading it.
	replay := p.node && len(ctx.Request.Header.Peek(spoolReplayHeader)) > 0
	if !replay {
		stamp(items, p.subject)
	}
	z := sealer{s: s}
	for i := 0; err == nil && i < len(items); i++ {
		err = z.item(&items[i])
	}
	if err == nil {
		var extra int64
		extra, err = s.chargeItems(int64(len(body)), len(items))
		defer s.reclaim.Ended(extra)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if spools && len(items) > 0 {
		s.bufferPush(ctx, items)
		return
	}
	var res []engine.PushResult
	if len(items) > 0 {
		res, err = raft.Propose[[]engine.PushResult](s.ctx, s.forwarding(ctx), engine.PushCmd{Items: items})
		if err == nil && len(res) != len(items) {
			err = fmt.Errorf("%w: %d results for %d items", command.ErrCorrupt, len(res), len(items))
		}
		switch {
		case errors.Is(err, errLeaderSpools):
			s.bufferPush(ctx, items) // the leader is in push maintenance
			return
		case err != nil:
			s.forwardOrFail(ctx, err)
			return
		}
		s.countPushed(res)
		if err := noneStored(res); err != nil {
			s.writeError(ctx, err)
			return
		}
	}
	s.answerPush(ctx, items, res)
}

// noneStored is the error to answer a push with instead of its items'
// results when none of them was stored and each failed for a reason a
// retry may cure (raft.Transient: no leader, a hand-off, a queue moving):
// with --groups such a push's parts fail one by one, and a client must
// see the 503 with Retry-After that one group answers, which Queen's SDKs
// retry, not a 201 whose every item is failed (docs/api.md §5). A push
// of which any item was stored or is a duplicate, or failed for a
// permanent reason, keeps its per-item answers.
func noneStored(res []engine.PushResult) error {
	for i := range res {
		if res[i].Status != engine.Rejected || !raft.Transient(res[i].Err) {
			return nil
		}
	}
	if len(res) == 0 {
		return nil
	}
	return res[0].Err
}

// chargeItems adds a decoded push's items to its charge (takeBody charged
// its body), and returns the bytes added, which the caller gives back
// (reclaim.ended) once the request is answered. The budget not holding
// them is errOverloaded: the body was read, but nothing has been proposed.
func (s *Server) chargeItems(bodyLen int64, items int) (int64, error) {
	body := s.budget.Charge(memory.BodyCost * bodyLen)
	held, ok := s.budget.Grow(body, memory.BodyCost*bodyLen+memory.PushItemCost*int64(items))
	if !ok {
		s.m.overloaded.Inc()
		s.reclaim.Refused()
		return 0, errOverloaded
	}
	return held - body, nil
}

// answerPush answers a push with its results: 201, one per item in order.
func (s *Server) answerPush(ctx *fasthttp.RequestCtx, items []engine.PushItem, res []engine.PushResult) {
	w := startReply(ctx)
	w.Array("")
	for i := range res {
		writePushResult(&w, "", i, &items[i], &res[i])
	}
	w.EndArray()
	sendReply(ctx, fasthttp.StatusCreated, w)
}

// writePushResult writes one push result item (as member k; "" in an
// array): snake_case ids and camelCase queueName, as Queen's clients read
// them.
func writePushResult(w *wire.Writer, k string, index int, it *engine.PushItem, r *engine.PushResult) {
	w.Object(k)
	w.Int("index", int64(index))
	w.Str("transaction_id", r.TransactionID)
	switch r.Status {
	case engine.Queued, engine.Duplicate:
		w.ID("message_id", r.MessageID)
		w.ID("partition_id", r.PartitionID)
		if it.HasTrace {
			w.ID("trace_id", it.TraceID)
		} else {
			w.Null("trace_id")
		}
		w.Str("queueName", r.Queue)
		if r.Status == engine.Queued {
			w.Str("status", "queued")
		} else {
			w.Str("status", "duplicate")
		}
	default:
		w.Str("queueName", r.Queue)
		w.Str("status", "failed")
		w.Str("error", itemError(r.Err))
	}
	w.EndObject()
}

// itemError is the text of a failed item's error, never empty.
func itemError(err error) string {
	if err == nil {
		return "rejected"
	}
	return publicText(err)
}

// stamp sets every item's producerSub to the caller's verified token
// subject ("" with auth off): a producerSub in the body is never trusted.
func stamp(items []engine.PushItem, subject string) {
	for i := range items {
		items[i].ProducerSub = subject
	}
}

// pushMaintenance reports whether pushes go to the spool (docs/semantics.md §12).
func pushMaintenance(m Maintainer) bool {
	push, _ := m.Maintenance()
	return push
}
