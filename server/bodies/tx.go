package bodies

import (
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// TxOp is one flattened transaction operation, in request order.
type TxOp struct {
	push bool
	txn  string
}

// Tx is a decoded transaction body: the engine operations, what each was
// in the request (to answer in its order) and the leases the bundle
// requires.
type Tx struct {
	Ops      []engine.TxOp
	Order    []TxOp
	Required []engine.ID
}

// Transaction reads {operations:[...], requiredLeases:[...]} and
// builds the engine operations. A missing or empty operations array, or
// any malformed operation, is a 400.
func Transaction(body []byte) (Tx, error) {
	var (
		req   Tx
		found bool
	)
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		switch string(key) {
		case "operations":
			if sc.Peek() != '[' {
				return SkipThen(sc, wire.BadRequest("operations array required"))
			}
			found = true
			return sc.Array(func(sc *wire.Scanner, _ int) error {
				return decodeTxOp(sc, &req.Ops, &req.Order)
			})
		case "requiredLeases":
			return decodeRequiredLeases(sc, &req.Required)
		}
		return sc.Skip()
	})
	switch {
	case err != nil:
	case !found:
		err = wire.BadRequest("operations array required")
	case len(req.Ops) == 0:
		err = wire.BadRequest("operations array cannot be empty")
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
		return SkipThen(sc, wire.BadRequest("requiredLeases must be an array of lease ids"))
	}
	return sc.Array(func(sc *wire.Scanner, _ int) error {
		id, ok, err := sc.OptID("requiredLeases")
		if ok {
			*required = append(*required, id)
		}
		return err
	})
}

// WriteTxResults writes the results array, one item per operation in
// request order: pushes and acks take their results in turn from res.
func WriteTxResults(w *wire.Writer, order []TxOp, res *engine.TxResult) {
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

// writeTxPushResult writes the members of a push operation's result. A
// push to another Raft group still on its way from the outbox (pending:
// committed, stored once, ids not known yet) succeeded; its ids are null.
func writeTxPushResult(w *wire.Writer, r *engine.PushResult) {
	w.Str("type", "push")
	w.Bool("success", r.Status == engine.Queued || r.Status == engine.Duplicate || r.Status == engine.Pending)
	w.Str("transactionId", r.TransactionID)
	if r.Status == engine.Pending {
		w.Null("messageId")
		w.Null("partitionId")
	} else {
		w.ID("messageId", r.MessageID)
		w.ID("partitionId", r.PartitionID)
	}
	w.Str("queueName", r.Queue)
	switch r.Status {
	case engine.Duplicate:
		w.Str("status", "duplicate")
	case engine.Pending:
		w.Str("status", "pending")
	default:
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
func decodeTxOp(sc *wire.Scanner, ops *[]engine.TxOp, order *[]TxOp) error {
	if sc.Peek() != '{' {
		return SkipThen(sc, wire.BadRequest("each operation must be an object"))
	}
	var (
		typ      string
		items    []engine.PushItem
		hasItems bool
		push     pushFields
		ack      = AckFields{like: &AckFields{}}
	)
	err := sc.Object(func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "type":
			typ, _, err = sc.OptString("type")
			return err
		case "items":
			if sc.Peek() != '[' {
				return SkipThen(sc, wire.BadRequest("items must be an array"))
			}
			hasItems = true
			return sc.Array(func(sc *wire.Scanner, _ int) error {
				it, err := PushItem(sc, items)
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
			*order = append(*order, TxOp{push: true, txn: items[i].TransactionID})
		}
	case "ack":
		switch {
		case !ack.hasTxn || ack.txn == "":
			return wire.BadRequest(textTxnRequired)
		case !ack.hasPart || ack.part == "":
			return wire.BadRequest(textPartRequired)
		}
		it, itemErr := ack.item(nil, nil)
		if itemErr != "" {
			return wire.BadRequest(itemErr)
		}
		*ops = append(*ops, engine.TxOp{Ack: &it})
		*order = append(*order, TxOp{txn: it.TransactionID})
	default:
		return wire.BadRequest("Transaction supports only push and ack operations")
	}
	return nil
}
