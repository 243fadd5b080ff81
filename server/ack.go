package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/reply"
	"github.com/queenmq/queen/server/wire"
)

// Ack request error texts (docs/api.md §7).
const (
	textTxnRequired       = "transactionId is required"
	textPartRequired      = "partitionId is required to ensure message uniqueness"
	textBatchTxnRequired  = "Each acknowledgment must have a valid transactionId string"
	textBatchPartRequired = "Each acknowledgment must have a valid partitionId string to ensure message uniqueness"
	textBadPartition      = "invalid partitionId: not a UUID"
	textBadLease          = "invalid or expired lease"
)

// ackFields are the members of one acknowledgment.
type ackFields struct {
	like                                  *ackFields // while decoding: the previous item, whose strings are reused
	txn, part, status, group, lease, text string
	hasTxn, hasPart                       bool
}

// member decodes key if it is an ack field.
func (f *ackFields) member(sc *wire.Scanner, key []byte) (handled bool, err error) {
	switch string(key) {
	case "transactionId":
		f.txn, f.hasTxn, err = sc.OptString("transactionId")
	case "partitionId":
		f.part, f.hasPart, err = sc.OptStringLike("partitionId", f.like.part)
	case "status":
		f.status, _, err = sc.OptStringLike("status", f.like.status) // absent/null: "" = completed (docs/decisions.md C8)
	case "consumerGroup":
		f.group, _, err = sc.OptStringLike("consumerGroup", f.like.group)
	case "leaseId":
		f.lease, _, err = sc.OptStringLike("leaseId", f.like.lease)
	case "error":
		f.text, _, err = sc.OptString("error")
	default:
		return false, nil
	}
	return true, err
}

// item builds the engine item. A partitionId or leaseId that is not a UUID
// cannot name anything: it becomes a per-item error (itemErr), not a 400.
// prev and like are the previous item's fields and result (like is nil if
// there is none or it failed): ids it already parsed are reused.
func (f *ackFields) item(prev *ackFields, like *engine.AckItem) (it engine.AckItem, itemErr string) {
	it = engine.AckItem{TransactionID: f.txn, Group: f.group, Status: cursor.ParseStatus(f.status), Error: f.text}
	var err error
	switch {
	case like != nil && f.part == prev.part:
		it.PartitionID = like.PartitionID
	default:
		if it.PartitionID, err = engine.ParseID(f.part); err != nil {
			return it, textBadPartition
		}
	}
	switch {
	case f.lease == "":
	case like != nil && f.lease == prev.lease:
		it.Lease = like.Lease
	default:
		if it.Lease, err = engine.ParseID(f.lease); err != nil {
			return it, textBadLease
		}
	}
	return it, ""
}

// decodeAckFields reads one acknowledgment object; like is the previous
// one (or empty).
func decodeAckFields(sc *wire.Scanner, like *ackFields) (ackFields, error) {
	f := ackFields{like: like}
	if sc.Peek() != '{' {
		return f, skipThen(sc, badRequest("each acknowledgment must be an object"))
	}
	err := sc.Object(func(sc *wire.Scanner, key []byte) error {
		if ok, err := f.member(sc, key); ok {
			return err
		}
		return sc.Skip()
	})
	f.like = nil
	return f, err
}

// ack answers POST /api/v1/ack: an array of one result.
func (s *Server) ack(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayFirst(ctx) {
		return
	}
	f := ackFields{like: &ackFields{}}
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) error {
		if ok, err := f.member(sc, key); ok {
			return err
		}
		return sc.Skip()
	})
	switch {
	case err != nil:
	case !f.hasTxn || f.txn == "":
		err = badRequest(textTxnRequired)
	case !f.hasPart || f.part == "":
		err = badRequest(textPartRequired)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.acknowledge(ctx, []ackFields{f})
}

// ackBatch answers POST /api/v1/ack/batch: a top-level consumerGroup applies
// to every item (overriding theirs); results come back in input order.
func (s *Server) ackBatch(ctx *fasthttp.RequestCtx, _ *params) {
	if s.relayFirst(ctx) {
		return
	}
	var (
		fields      []ackFields
		found       bool
		group       string
		hasGroup    bool
		errRequired error
		none        ackFields
	)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "consumerGroup":
			group, hasGroup, err = sc.OptString("consumerGroup")
			return err
		case "acknowledgments":
			if sc.Peek() != '[' {
				return skipThen(sc, badRequest("acknowledgments array is required"))
			}
			found = true
			return sc.Array(func(sc *wire.Scanner, _ int) error {
				like := &none
				if len(fields) > 0 {
					like = &fields[len(fields)-1]
				}
				f, err := decodeAckFields(sc, like)
				switch {
				case err != nil:
					return err
				case errRequired != nil:
				case !f.hasTxn || f.txn == "":
					errRequired = badRequest(textBatchTxnRequired)
				case !f.hasPart || f.part == "":
					errRequired = badRequest(textBatchPartRequired)
				}
				fields = append(fields, f)
				return nil
			})
		}
		return sc.Skip()
	})
	switch {
	case err != nil:
	case !found:
		err = badRequest("acknowledgments array is required")
	default:
		err = errRequired
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if hasGroup {
		for i := range fields {
			fields[i].group = group
		}
	}
	s.acknowledge(ctx, fields)
}

// acknowledge sends the well-formed items to the broker in one command and
// answers the array of results, per-item errors included.
func (s *Server) acknowledge(ctx *fasthttp.RequestCtx, fields []ackFields) {
	items := make([]engine.AckItem, 0, len(fields))
	itemErrs := make([]string, len(fields))
	var like *engine.AckItem
	for i := range fields {
		var prev *ackFields
		if i > 0 && itemErrs[i-1] == "" {
			prev = &fields[i-1]
		} else {
			like = nil
		}
		it, itemErr := fields[i].item(prev, like)
		if itemErrs[i] = itemErr; itemErr == "" {
			items = append(items, it)
			like = &items[len(items)-1]
		}
	}
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
	w := reply.Start(ctx)
	w.Array("")
	next := 0
	for i := range fields {
		if itemErrs[i] != "" {
			s.m.AckFailed.Inc()
			writeAckResult(&w, i, fields[i].txn, &engine.AckResult{TransactionID: fields[i].txn, Error: itemErrs[i]})
			continue
		}
		writeAckResult(&w, i, fields[i].txn, &res[next])
		next++
	}
	w.EndArray()
	reply.Send(ctx, fasthttp.StatusOK, w)
}

// writeAckResult writes one ack result item (docs/api.md §7.2, docs/decisions.md C7).
func writeAckResult(w *wire.Writer, index int, txn string, r *engine.AckResult) {
	w.Object("")
	w.Int("index", int64(index))
	w.Str("transactionId", txn)
	w.Bool("success", r.Success)
	w.StrOrNull("error", r.Error)
	w.StrOrNull("queueName", r.Queue)
	w.StrOrNull("partitionName", r.Partition)
	w.Bool("leaseReleased", r.LeaseReleased)
	w.Bool("dlq", r.DLQ)
	w.Bool("noop", r.Noop)
	w.Bool("dropped", r.Dropped)
	w.EndObject()
}

// txOp is one flattened transaction operation, in request order.
type txOp struct {
	push bool
	txn  string
}

// txRequest is a decoded transaction body: the engine operations, what
// each was in the request (to answer in its order) and the leases the
// bundle requires.
type txRequest struct {
	ops      []engine.TxOp
	order    []txOp
	required []engine.ID
}

// transaction answers POST /api/v1/transaction (docs/semantics.md §13): always 200
// with success true or false once the bundle reached the broker.
func (s *Server) transaction(ctx *fasthttp.RequestCtx, p *params) {
	if s.relayFirst(ctx) {
		return
	}
	req, err := decodeTransaction(ctx.PostBody())
	if err == nil {
		err = s.sealTxPushes(req.ops, p.subject)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, err := raft.Propose[engine.TxResult](s.ctx, s.forwarding(ctx), engine.TransactionCmd{Ops: req.ops, RequiredLeases: req.required})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	s.writeTransaction(ctx, &req, &res)
}

// decodeTransaction reads {operations:[...], requiredLeases:[...]} and
// builds the engine operations. A missing or empty operations array, or
// any malformed operation, is a 400.
func decodeTransaction(body []byte) (txRequest, error) {
	var (
		req   txRequest
		found bool
	)
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		switch string(key) {
		case "operations":
			if sc.Peek() != '[' {
				return skipThen(sc, badRequest("operations array required"))
			}
			found = true
			return sc.Array(func(sc *wire.Scanner, _ int) error {
				return decodeTxOp(sc, &req.ops, &req.order)
			})
		case "requiredLeases":
			return decodeRequiredLeases(sc, &req.required)
		}
		return sc.Skip()
	})
	switch {
	case err != nil:
	case !found:
		err = badRequest("operations array required")
	case len(req.ops) == 0:
		err = badRequest("operations array cannot be empty")
	}
	return req, err
}

// decodeRequiredLeases reads requiredLeases: null, or an array of lease
// ids (null entries are skipped).
func decodeRequiredLeases(sc *wire.Scanner, required *[]engine.ID) error {
	if sc.Peek() != '[' {
		if sc.Peek() == 'n' {
			return sc.Literal("null")
		}
		return skipThen(sc, badRequest("requiredLeases must be an array of lease ids"))
	}
	return sc.Array(func(sc *wire.Scanner, _ int) error {
		id, ok, err := sc.OptID("requiredLeases")
		if ok {
			*required = append(*required, id)
		}
		return err
	})
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
func (s *Server) writeTransaction(ctx *fasthttp.RequestCtx, req *txRequest, res *engine.TxResult) {
	w := reply.Start(ctx)
	w.Object("")
	w.ID("transactionId", res.ID)
	w.Bool("success", res.Success)
	if res.Success {
		s.txApplied(req.ops, res)
		s.an.Transacted(res)
		writeTxResults(&w, req.order, res)
	} else {
		s.m.TxFailed.Inc()
		w.Str("error", res.Error)
		w.Array("results")
		w.EndArray()
	}
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
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

// writeTxResults writes the results array, one item per operation in
// request order: pushes and acks take their results in turn from res.
func writeTxResults(w *wire.Writer, order []txOp, res *engine.TxResult) {
	w.Array("results")
	pi, ai := 0, 0
	for i, op := range order {
		w.Object("")
		w.Int("index", int64(i))
		if op.push {
			writeTxPushResult(w, &res.Pushes[pi])
			pi++
		} else {
			writeTxAckResult(w, op.txn, &res.Acks[ai])
			ai++
		}
		w.EndObject()
	}
	w.EndArray()
}

// writeTxPushResult writes the members of a push operation's result.
func writeTxPushResult(w *wire.Writer, r *engine.PushResult) {
	w.Str("type", "push")
	w.Bool("success", r.Status == engine.Queued || r.Status == engine.Duplicate)
	w.Str("transactionId", r.TransactionID)
	w.ID("messageId", r.MessageID)
	w.ID("partitionId", r.PartitionID)
	w.Str("queueName", r.Queue)
	if r.Status == engine.Duplicate {
		w.Str("status", "duplicate")
	} else {
		w.Str("status", "queued")
	}
}

// writeTxAckResult writes the members of an ack operation's result; txn is
// the transactionId the request gave.
func writeTxAckResult(w *wire.Writer, txn string, r *engine.AckResult) {
	w.Str("type", "ack")
	w.Bool("success", r.Success)
	w.Str("transactionId", txn)
	w.StrOrNull("error", r.Error)
	w.Bool("dlq", r.DLQ)
	w.Bool("dropped", r.Dropped)
	w.Bool("leaseReleased", r.LeaseReleased)
	w.Bool("noop", r.Noop)
}

// decodeTxOp reads one operation: {type:"push", items:[...]}, a flat push
// {type:"push", queue, payload|data, ...} or {type:"ack", transactionId,
// partitionId, ...}. Malformed operations are a 400: nothing reaches the
// broker.
func decodeTxOp(sc *wire.Scanner, ops *[]engine.TxOp, order *[]txOp) error {
	if sc.Peek() != '{' {
		return skipThen(sc, badRequest("each operation must be an object"))
	}
	var (
		typ      string
		items    []engine.PushItem
		hasItems bool
		push     pushFields
		ack      = ackFields{like: &ackFields{}}
	)
	err := sc.Object(func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "type":
			typ, _, err = sc.OptString("type")
			return err
		case "items":
			if sc.Peek() != '[' {
				return skipThen(sc, badRequest("items must be an array"))
			}
			hasItems = true
			return sc.Array(func(sc *wire.Scanner, _ int) error {
				it, err := decodePushItem(sc, items)
				items = append(items, it)
				return err
			})
		case "transactionId":
			ack.txn, ack.hasTxn, err = sc.OptString("transactionId")
			push.txn = ack.txn
			return err
		}
		if ok, err := push.member(sc, key); ok {
			return err
		}
		if ok, err := ack.member(sc, key); ok {
			return err
		}
		return sc.Skip()
	})
	if err != nil {
		return err
	}
	switch typ {
	case "push":
		if !hasItems {
			it, err := push.item()
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		for i := range items {
			*ops = append(*ops, engine.TxOp{Push: &items[i]})
			*order = append(*order, txOp{push: true, txn: items[i].TransactionID})
		}
	case "ack":
		switch {
		case !ack.hasTxn || ack.txn == "":
			return badRequest(textTxnRequired)
		case !ack.hasPart || ack.part == "":
			return badRequest(textPartRequired)
		}
		it, itemErr := ack.item(nil, nil)
		if itemErr != "" {
			return badRequest(itemErr)
		}
		*ops = append(*ops, engine.TxOp{Ack: &it})
		*order = append(*order, txOp{txn: it.TransactionID})
	default:
		return badRequest("Transaction supports only push and ack operations")
	}
	return nil
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
	w := reply.Start(ctx)
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
	reply.Send(ctx, fasthttp.StatusOK, w)
}
