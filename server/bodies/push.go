package bodies

import (
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// PushItems reads a push body, {"items":[...]} (docs/api.md §5): every
// item, validated. A missing items array is a 400.
func PushItems(body []byte) ([]engine.PushItem, error) {
	var (
		items []engine.PushItem
		found bool
	)
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		if string(key) != "items" {
			return sc.Skip()
		}
		if sc.Peek() != '[' {
			return SkipThen(sc, wire.BadRequest("items array is required"))
		}
		found = true
		return sc.Array(func(sc *wire.Scanner, _ int) error {
			it, err := PushItem(sc, items)
			items = append(items, it)
			return err
		})
	})
	if err == nil && !found {
		err = wire.BadRequest("items array is required")
	}
	return items, err
}

// SkipThen skips the current value and returns err (a type error found
// by peeking).
func SkipThen(sc *wire.Scanner, err error) error {
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
				err = wire.BadRequest("TraceId must be a UUID")
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
		return engine.PushItem{}, wire.BadRequest("Queue must be a string")
	}
	if err := Name("queue", f.queue); err != nil {
		return engine.PushItem{}, err
	}
	if f.partition != "" {
		if err := Name("partition", f.partition); err != nil {
			return engine.PushItem{}, err
		}
	}
	if len(f.txn) > 255 {
		return engine.PushItem{}, wire.BadRequest("TransactionId must be at most 255 bytes")
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

// PushItem reads one push item object; before are the items already
// read, whose queue and partition names it reuses.
func PushItem(sc *wire.Scanner, before []engine.PushItem) (engine.PushItem, error) {
	if sc.Peek() != '{' {
		return engine.PushItem{}, SkipThen(sc, wire.BadRequest("each item must be an object"))
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
