package bodies

import (
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
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

// AckFields are the members of one acknowledgment.
type AckFields struct {
	like                                  *AckFields // while decoding: the previous item, whose strings are reused
	txn, part, status, group, lease, text string
	hasTxn, hasPart                       bool
}

// member decodes key if it is an ack field.
func (f *AckFields) member(sc *wire.Scanner, key []byte) (handled bool, err error) {
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
func (f *AckFields) item(prev *AckFields, like *engine.AckItem) (it engine.AckItem, itemErr string) {
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
func decodeAckFields(sc *wire.Scanner, like *AckFields) (AckFields, error) {
	f := AckFields{like: like}
	if sc.Peek() != '{' {
		return f, SkipThen(sc, wire.BadRequest("each acknowledgment must be an object"))
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

// TransactionID is the acknowledgment's transactionId.
func (f *AckFields) TransactionID() string { return f.txn }

// Ack reads POST /api/v1/ack's body: one acknowledgment, whose
// transactionId and partitionId are required.
func Ack(body []byte) (AckFields, error) {
	f := AckFields{like: &AckFields{}}
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		if ok, err := f.member(sc, key); ok {
			return err
		}
		return sc.Skip()
	})
	switch {
	case err != nil:
	case !f.hasTxn || f.txn == "":
		err = wire.BadRequest(textTxnRequired)
	case !f.hasPart || f.part == "":
		err = wire.BadRequest(textPartRequired)
	}
	f.like = nil
	return f, err
}

// AckBatch reads POST /api/v1/ack/batch's body: a top-level
// consumerGroup applies to every item (overriding theirs). Every item
// needs a transactionId and a partitionId.
func AckBatch(body []byte) ([]AckFields, error) {
	var (
		fields      []AckFields
		found       bool
		group       string
		hasGroup    bool
		errRequired error
		none        AckFields
	)
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "consumerGroup":
			group, hasGroup, err = sc.OptString("consumerGroup")
			return err
		case "acknowledgments":
			if sc.Peek() != '[' {
				return SkipThen(sc, wire.BadRequest("acknowledgments array is required"))
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
					errRequired = wire.BadRequest(textBatchTxnRequired)
				case !f.hasPart || f.part == "":
					errRequired = wire.BadRequest(textBatchPartRequired)
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
		err = wire.BadRequest("acknowledgments array is required")
	default:
		err = errRequired
	}
	if err != nil {
		return nil, err
	}
	if hasGroup {
		for i := range fields {
			fields[i].group = group
		}
	}
	return fields, nil
}

// AckItems builds the engine items of the well-formed acknowledgments;
// itemErrs[i] is the per-item error of fields[i] when it names nothing
// (answered inside the 200, not as a 400), "" when it is in items.
func AckItems(fields []AckFields) (items []engine.AckItem, itemErrs []string) {
	items = make([]engine.AckItem, 0, len(fields))
	itemErrs = make([]string, len(fields))
	var like *engine.AckItem
	for i := range fields {
		var prev *AckFields
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
	return items, itemErrs
}

// WriteAckResult writes one ack result item (docs/api.md §7.2, docs/decisions.md C7).
func WriteAckResult(w *wire.Writer, index int, txn string, r *engine.AckResult) {
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
