package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/reply"
	"github.com/queenmq/queen/server/wire"
)

// push answers POST /api/v1/push (docs/api.md §5): 201 with one result per item,
// in input order.
func (s *Server) push(ctx *fasthttp.RequestCtx, p *params) {
	// A follower in push maintenance spools. Otherwise it prepares the
	// push for the leader (prepared.go) or, without the cluster secret
	// to send it with, relays the request unread. A grouped broker routes
	// the push by its items' queues itself (relay.go).
	m, ok := s.broker.(Maintainer)
	spools := ok && pushMaintenance(m)
	var st raft.Status
	prepares := false
	if !spools {
		st = s.broker.Status()
		prepares = s.preparesFor(ctx, st)
		if !prepares && st.Role != "leader" && s.groups.leaderKnownUnread() && s.forwardAs(ctx, st) {
			return
		}
	}
	body := ctx.PostBody()
	var (
		items []engine.PushItem
		found bool
	)
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		if string(key) != "items" {
			return sc.Skip()
		}
		if sc.Peek() != '[' {
			return skipThen(sc, badRequest("items array is required"))
		}
		found = true
		return sc.Array(func(sc *wire.Scanner, _ int) error {
			it, err := decodePushItem(sc, items)
			items = append(items, it)
			return err
		})
	})
	if err == nil && !found {
		err = badRequest("items array is required")
	}
	// A spool replay relayed by another node (it proved the cluster
	// secret) keeps the producerSub its node stamped when it spooled it,
	// and is not spooled again. Its payloads are plain (the relaying node
	// opened what it had sealed) and are sealed here like any push: no
	// request can say its payloads are already sealed (spool.go).
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
	switch {
	case len(items) == 0:
	case spools:
		s.bufferPush(ctx, items)
		return
	case prepares:
		s.pushViaLeader(ctx, st, items)
		return
	}
	var res []engine.PushResult
	if len(items) > 0 {
		if res, err = raft.Propose[[]engine.PushResult](s.ctx, s.forwarding(ctx), engine.PushCmd{Items: items}); err != nil {
			s.forwardOrFail(ctx, err)
			return
		}
		s.countPushed(res)
	}
	s.answerPush(ctx, items, res)
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
	w := reply.Start(ctx)
	w.Array("")
	for i := range res {
		writePushResult(&w, "", i, &items[i], &res[i])
	}
	w.EndArray()
	reply.Send(ctx, fasthttp.StatusCreated, w)
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

// skipThen skips the current value and returns err (a type error found
// by peeking).
func skipThen(sc *wire.Scanner, err error) error {
	if serr := sc.Skip(); serr != nil {
		return serr
	}
	return err
}

// pushFields are the members of a push item, also found flat in a
// transaction's push operation.
type pushFields struct {
	// likeQueue and likePartition are the previous item's, reused when
	// this one spells the same.
	likeQueue, likePartition string
	queue, partition, txn    string
	hasQueue                 bool
	trace                    engine.ID
	hasTrace                 bool
	payload, data            []byte
	producerSub              string
}

// member decodes key if it is a push field.
func (f *pushFields) member(sc *wire.Scanner, key []byte) (handled bool, err error) {
	switch string(key) {
	case "queue":
		f.queue, f.hasQueue, err = sc.OptStringLike("Queue", f.likeQueue)
	case "partition":
		f.partition, _, err = sc.OptStringLike("Partition", f.likePartition)
	case "payload":
		f.payload, err = sc.Raw()
	case "data":
		f.data, err = sc.Raw()
	case "transactionId":
		f.txn, _, err = sc.OptString("TransactionId")
	case "producerSub":
		// Read for spool replays between nodes only; the push handler
		// overwrites it for everyone else.
		f.producerSub, _, err = sc.OptString("producerSub")
	case "traceId":
		var v string
		var ok bool
		if v, ok, err = sc.OptString("TraceId"); err == nil && ok && v != "" {
			if f.trace, err = engine.ParseID(v); err != nil {
				err = badRequest("TraceId must be a UUID")
			}
			f.hasTrace = err == nil
		}
	default:
		return false, nil
	}
	return true, err
}

// item validates the fields (docs/api.md §5) and builds the item. The payload is
// `payload`, else `data`, else {}; an explicit null is stored as null.
func (f *pushFields) item() (engine.PushItem, error) {
	if !f.hasQueue {
		return engine.PushItem{}, badRequest("Queue must be a string")
	}
	if err := validName("queue", f.queue); err != nil {
		return engine.PushItem{}, err
	}
	if f.partition != "" {
		if err := validName("partition", f.partition); err != nil {
			return engine.PushItem{}, err
		}
	}
	if len(f.txn) > 255 {
		return engine.PushItem{}, badRequest("TransactionId must be at most 255 bytes")
	}
	payload := f.payload
	if payload == nil {
		payload = f.data
	}
	if payload == nil {
		payload = []byte("{}")
	}
	return engine.PushItem{Queue: f.queue, Partition: f.partition, TransactionID: f.txn,
		TraceID: f.trace, HasTrace: f.hasTrace, ProducerSub: f.producerSub, Payload: payload}, nil
}

// decodePushItem reads one push item object; before are the items already
// read, whose queue and partition names it reuses.
func decodePushItem(sc *wire.Scanner, before []engine.PushItem) (engine.PushItem, error) {
	if sc.Peek() != '{' {
		return engine.PushItem{}, skipThen(sc, badRequest("each item must be an object"))
	}
	var f pushFields
	if n := len(before); n > 0 {
		f.likeQueue, f.likePartition = before[n-1].Queue, before[n-1].Partition
	}
	err := sc.Object(func(sc *wire.Scanner, key []byte) error {
		if ok, err := f.member(sc, key); ok {
			return err
		}
		return sc.Skip()
	})
	if err != nil {
		return engine.PushItem{}, err
	}
	return f.item()
}

// pushMaintenance reports whether pushes go to the spool (docs/semantics.md §12).
func pushMaintenance(m Maintainer) bool {
	push, _ := m.Maintenance()
	return push
}
