package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/bodies"
	"github.com/queenmq/queen/server/wire"
)

// ack answers POST /api/v1/ack: an array of one result.
func (s *Server) ack(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayUnread(ctx) {
		return
	}
	f, err := bodies.Ack(ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.acknowledge(ctx, []bodies.AckFields{f})
}

// ackBatch answers POST /api/v1/ack/batch: a top-level consumerGroup applies
// to every item (overriding theirs); results come back in input order.
func (s *Server) ackBatch(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayUnread(ctx) {
		return
	}
	fields, err := bodies.AckBatch(ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.acknowledge(ctx, fields)
}

// acknowledge sends the well-formed items to the broker in one command and
// answers the array of results, per-item errors included. On a follower
// the broker's proposer sends the command to the leader on the cluster
// path (cluster.Proxy): its row relays its result.
func (s *Server) acknowledge(ctx *fasthttp.RequestCtx, fields []bodies.AckFields) {
	items, itemErrs := bodies.AckItems(fields)
	var res []engine.AckResult
	if len(items) > 0 {
		var err error
		if res, err = raft.Propose[[]engine.AckResult](s.ctx, s.forwarding(ctx), engine.AckCmd{Items: items}); err != nil {
			s.forwardOrFail(ctx, err)
			return
		}
		s.m.Acked(items, res)
	}
	s.an.Acked(res, len(fields)-len(items))
	w := startReply(ctx)
	w.Array("")
	next := 0
	for i := range fields {
		if itemErrs[i] != "" {
			s.m.AckFailed.Inc()
			txn := fields[i].TransactionID()
			bodies.WriteAckResult(&w, i, txn, &engine.AckResult{TransactionID: txn, Error: itemErrs[i]})
			continue
		}
		bodies.WriteAckResult(&w, i, fields[i].TransactionID(), &res[next])
		next++
	}
	w.EndArray()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// transaction answers POST /api/v1/transaction (docs/semantics.md §13): always 200
// with success true or false once the bundle reached the broker.
//
// On a follower the bundle is read and its pushes sealed here, once, and
// the broker's proposer sends the command to the leader on the cluster
// path (cluster.Proxy). What that path does not carry is relayed whole
// (forwardOrFail): the leader reads the client's body and seals it, and
// what was sealed here is dropped.
func (s *Server) transaction(ctx *fasthttp.RequestCtx, p *params) {
	if s.relayUnread(ctx) {
		return
	}
	req, err := bodies.Transaction(ctx.PostBody())
	if err == nil {
		err = s.sealTxPushes(req.Ops, p.subject)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, err := raft.Propose[engine.TxResult](s.ctx, s.forwarding(ctx), engine.TransactionCmd{Ops: req.Ops, RequiredLeases: req.Required})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	s.writeTransaction(ctx, &req, &res)
}

// sealTxPushes stamps every push with the caller's producerSub (never the
// body's) and seals its payload if its queue is encrypted, stopping at the
// first error.
func (s *Server) sealTxPushes(ops []engine.TxOp, subject string) error {
	z := sealer{s: s}
	for i := range ops {
		if ops[i].Push == nil {
			continue
		}
		ops[i].Push.ProducerSub = subject
		if err := z.item(ops[i].Push); err != nil {
			return err
		}
	}
	return nil
}

// writeTransaction counts the outcome and answers it: on failure the
// error and no results, on success one result per operation.
func (s *Server) writeTransaction(ctx *fasthttp.RequestCtx, req *bodies.Tx, res *engine.TxResult) {
	w := startReply(ctx)
	w.Object("")
	w.ID("transactionId", res.ID)
	w.Bool("success", res.Success)
	if res.Success {
		s.txApplied(req.Ops, res)
		s.an.Transacted(res)
		bodies.WriteTxResults(&w, req.Order, res)
	} else {
		s.m.TxFailed.Inc()
		w.Str("error", res.Error)
		w.Array("results")
		w.EndArray()
	}
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// txApplied counts a transaction that succeeded, with its pushes and acks.
func (s *Server) txApplied(ops []engine.TxOp, res *engine.TxResult) {
	s.m.TxSuccess.Inc()
	s.m.Pushed(res.Pushes)
	var acks []engine.AckItem
	for _, op := range ops {
		if op.Ack != nil {
			acks = append(acks, *op.Ack)
		}
	}
	s.m.Acked(acks, res.Acks)
}

// extendLease answers POST /api/v1/lease/{leaseId}/extend (docs/semantics.md §5):
// always 200, success:false with renewed:0 when no live lease has this id.
// The body is optional (docs/decisions.md C9) and seconds defaults to 60.
func (s *Server) extendLease(ctx *fasthttp.RequestCtx, p *params) {
	leaseText := p.get("leaseId")
	seconds := int64(60)
	err := wire.DecodeObject(ctx.PostBody(), true, func(sc *wire.Scanner, key []byte) error {
		if string(key) != "seconds" {
			return sc.Skip()
		}
		v, ok, err := sc.OptInt("seconds")
		if ok && v > 0 {
			seconds = v
		}
		return err
	})
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	var res engine.ExtendResult
	if lease, perr := engine.ParseID(leaseText); perr == nil {
		if res, err = raft.Propose[engine.ExtendResult](s.ctx, s.forwarding(ctx), engine.ExtendLeaseCmd{Lease: lease, Seconds: seconds}); err != nil {
			s.forwardOrFail(ctx, err)
			return
		}
	}
	w := startReply(ctx)
	w.Object("")
	w.Str("leaseId", leaseText)
	w.Bool("success", res.Renewed > 0)
	w.Int("renewed", int64(res.Renewed))
	w.TimeMillis("expiresAt", res.ExpiresAt)
	w.TimeMillis("newExpiresAt", res.ExpiresAt)
	w.TimeMillis("lease_expires_at", res.ExpiresAt)
	if res.Renewed == 0 {
		w.Str("error", "Lease not found or expired")
	} else {
		w.Null("error")
	}
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
