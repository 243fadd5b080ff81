package bodies

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/server/wire"
)

// The streams bodies (docs/api.md §14.2): a query's registration, a state
// read and a cycle, each read in one pass into its engine command or
// filter.

// StreamQuery reads a query's registration (POST /streams/v1/queries):
// name, source_queue and config_hash are required non-empty strings,
// sink_queue is optional, and reset is a boolean or one of the strings
// PostgreSQL casts to one.
func StreamQuery(body []byte) (engine.StreamRegisterCmd, error) {
	var (
		cmd               engine.StreamRegisterCmd
		hasName, hasQueue bool
		hasHash           bool
	)
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "name":
			cmd.Name, hasName, err = optNonEmpty(sc)
		case "source_queue":
			cmd.SourceQueue, hasQueue, err = optNonEmpty(sc)
		case "config_hash":
			cmd.ConfigHash, hasHash, err = optNonEmpty(sc)
		case "sink_queue":
			cmd.SinkQueue, cmd.HasSink, err = optNonEmpty(sc)
		case "reset":
			cmd.Reset, err = looseBool(sc)
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case !hasName:
		err = wire.BadRequest("name is required")
	case !hasQueue:
		err = wire.BadRequest("source_queue is required")
	case !hasHash:
		err = wire.BadRequest("config_hash is required")
	}
	return cmd, err
}

// StreamState reads a state read (POST /streams/v1/state/get): query_id
// and partition_id are required UUIDs; keys (an array of strings),
// key_prefix (a string) and ripe_at_or_before (a finite number) narrow the
// rows, and a member of another type is no filter.
func StreamState(body []byte) (engine.StateFilter, error) {
	var f engine.StateFilter
	var hasQuery, hasPart bool
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "query_id":
			f.QueryID, hasQuery, err = idMember(sc, "query_id")
		case "partition_id":
			f.PartitionID, hasPart, err = idMember(sc, "partition_id")
		case "keys":
			if sc.Peek() != '[' {
				return sc.Skip() // not an array: no key filter
			}
			err = sc.Array(func(sc *wire.Scanner, _ int) error {
				if sc.Peek() != '"' {
					return sc.Skip()
				}
				k, err := sc.StringValue()
				f.Keys = append(f.Keys, k)
				return err
			})
		case "key_prefix":
			if sc.Peek() != '"' {
				return sc.Skip()
			}
			f.Prefix, err = sc.StringValue()
		case "ripe_at_or_before":
			f.Ripe, f.HasRipe, err = numberMember(sc)
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case !hasQuery:
		err = wire.BadRequest("query_id is required")
	case !hasPart:
		err = wire.BadRequest("partition_id is required")
	}
	return f, err
}

// Cycle is a decoded cycle body (POST /streams/v1/cycle).
type Cycle struct {
	// Cmd is the cycle's one command: its state ops, sink pushes and ack,
	// applied together on every replica or not at all.
	Cmd engine.StreamCycleCmd
	// QueryID and PartitionID are the ids as the client spelled them: the
	// answer echoes them.
	QueryID, PartitionID string
	// Fail is a failure Queen reports as a failed cycle (an unknown state
	// op type or ack status, a bad push item): the cycle is answered 200
	// success:false and never proposed. Empty when the cycle may go.
	Fail string
}

// StreamCycle reads a cycle body (docs/api.md §14.2). A malformed body or a
// missing query_id or partition_id is an error (400); what Queen reports as
// a failed cycle is Cycle.Fail, its push items read as a push's are
// (PushItem) and a bad one's error told as text tells it: the edge's
// client-facing text, so that the failure reads as the 400 a push of that
// item gets.
func StreamCycle(body []byte, text func(error) string) (Cycle, error) {
	var (
		req               Cycle
		hasQuery, hasPart bool
	)
	c := &req.Cmd
	release := true
	failf := func(format string, args ...any) {
		if req.Fail == "" {
			req.Fail = fmt.Sprintf(format, args...)
		}
	}
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "query_id":
			if req.QueryID, hasQuery, err = sc.OptString("query_id"); err == nil && hasQuery {
				if c.QueryID, err = engine.ParseID(req.QueryID); err != nil {
					err = wire.BadRequest("query_id must be a UUID")
				}
			}
		case "partition_id":
			if req.PartitionID, hasPart, err = sc.OptString("partition_id"); err == nil && hasPart {
				if c.PartitionID, err = engine.ParseID(req.PartitionID); err != nil {
					err = wire.BadRequest("partition_id must be a UUID")
				}
			}
		case "consumer_group":
			c.Group, _, err = sc.OptString("consumer_group")
		case "state_ops":
			err = optArray(sc, "state_ops", failf, func(sc *wire.Scanner) error {
				op, fail, err := decodeStateOp(sc)
				if fail != "" {
					failf("%s", fail)
				}
				c.Ops = append(c.Ops, op)
				return err
			})
		case "push_items":
			err = optArray(sc, "push_items", failf, func(sc *wire.Scanner) error {
				it, err := PushItem(sc, c.Items)
				if err != nil {
					if !isBadRequest(err) {
						return err
					}
					failf("push_items[%d]: %s", len(c.Items), text(err))
				}
				c.Items = append(c.Items, it)
				return nil
			})
		case "ack":
			if sc.Peek() != '{' {
				return sc.Skip() // null (or nothing usable): no ack
			}
			var fail string
			c.Ack, fail, err = decodeCycleAck(sc, text)
			if fail != "" {
				failf("%s", fail)
			}
		case "release_lease":
			if sc.Peek() == 'n' {
				return sc.Skip()
			}
			release, _, err = sc.OptBool("release_lease")
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case !hasQuery:
		err = wire.BadRequest("query_id is required")
	case !hasPart:
		err = wire.BadRequest("partition_id is required")
	}
	c.KeepLease = !release
	return req, err
}

// optArray reads an array member whose elements elem decodes; null is an
// empty array, and another value is a failed cycle (Queen fails on it).
func optArray(sc *wire.Scanner, name string, failf func(string, ...any), elem func(sc *wire.Scanner) error) error {
	switch sc.Peek() {
	case '[':
		return sc.Array(func(sc *wire.Scanner, _ int) error { return elem(sc) })
	case 'n':
		return sc.Skip()
	}
	failf("%s must be an array", name)
	return sc.Skip()
}

// decodeStateOp reads one state op; fail says why the cycle fails on it.
func decodeStateOp(sc *wire.Scanner) (engine.StateOp, string, error) {
	var (
		op              engine.StateOp
		typ             string
		hasType, hasKey bool
		value           []byte
	)
	if sc.Peek() != '{' {
		return op, "each state op must be an object", sc.Skip()
	}
	err := sc.Object(func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "type":
			if sc.Peek() != '"' {
				return sc.Skip()
			}
			typ, err = sc.StringValue()
			hasType = true
		case "key":
			if sc.Peek() != '"' {
				return sc.Skip()
			}
			op.Key, err = sc.StringValue()
			hasKey = true
		case "value":
			value, err = sc.Raw()
		default:
			err = sc.Skip()
		}
		return err
	})
	if err != nil {
		return op, "", err
	}
	switch {
	case !hasType:
		return op, "Unknown state_op type: null", nil
	case typ != "upsert" && typ != "delete":
		return op, "Unknown state_op type: " + typ, nil
	case !hasKey:
		return op, "state_op key is required", nil
	}
	if typ == "delete" {
		op.Delete = true
		return op, "", nil
	}
	if value == nil || string(value) == "null" {
		value = []byte("{}")
	}
	op.Value = value
	op.WindowEnd, op.HasWindowEnd = windowEnd(value)
	return op, "", nil
}

// windowEnd returns the value's top-level windowEnd when it is a finite
// JSON number: the field ripe_at_or_before compares.
func windowEnd(value []byte) (float64, bool) {
	var (
		v  float64
		ok bool
	)
	if len(value) == 0 || value[0] != '{' {
		return 0, false
	}
	_ = wire.DecodeObject(value, false, func(sc *wire.Scanner, key []byte) error {
		if string(key) != "windowEnd" {
			return sc.Skip()
		}
		var err error
		v, ok, err = numberMember(sc)
		return err
	})
	return v, ok
}

// numberMember reads a member that counts only as a finite JSON number;
// anything else is skipped and reported absent.
func numberMember(sc *wire.Scanner) (float64, bool, error) {
	if c := sc.Peek(); c != '-' && (c < '0' || c > '9') {
		return 0, false, sc.Skip()
	}
	raw, err := sc.Raw()
	if err != nil {
		return 0, false, err
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, nil
	}
	return f, true, nil
}

// decodeCycleAck reads the ack object; fail says why the cycle fails on it.
func decodeCycleAck(sc *wire.Scanner, text func(error) string) (*engine.CycleAck, string, error) {
	a := &engine.CycleAck{Status: cursor.Completed, Count: 1}
	var status, lease string
	hasStatus := false
	err := sc.Object(func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "transactionId":
			a.TransactionID, _, err = sc.OptString("transactionId")
		case "leaseId":
			lease, _, err = sc.OptString("leaseId")
		case "status":
			status, hasStatus, err = sc.OptString("status")
		case "count":
			var n int64
			var ok bool
			if n, ok, err = sc.OptInt("count"); ok && err == nil {
				a.Count = n
			}
		case "error":
			a.Error, _, err = sc.OptString("error")
		default:
			err = sc.Skip()
		}
		return err
	})
	if err != nil {
		if isBadRequest(err) {
			return a, text(err), nil
		}
		return a, "", err
	}
	if hasStatus {
		switch status {
		case "completed", "success":
		case "failed":
			a.Status = cursor.Failed
		case "dlq":
			a.Status = cursor.DeadLetter
		default:
			return a, "Unknown ack.status: " + status, nil
		}
	}
	if a.TransactionID == "" {
		return a, "ack.transactionId is required", nil
	}
	if lease != "" {
		id, err := engine.ParseID(lease)
		if err != nil {
			return a, "Invalid or expired lease", nil
		}
		a.Lease = id
	}
	return a, "", nil
}

// optNonEmpty reads a member that counts as present only as a non-empty
// string.
func optNonEmpty(sc *wire.Scanner) (string, bool, error) {
	if sc.Peek() != '"' {
		return "", false, sc.Skip()
	}
	v, err := sc.StringValue()
	return v, err == nil && v != "", err
}

// looseBool reads register's reset: a boolean, or one of the strings
// PostgreSQL casts to one (Queen accepts those); anything else is a 400.
func looseBool(sc *wire.Scanner) (bool, error) {
	switch sc.Peek() {
	case 't', 'f':
		v, _, err := sc.OptBool("reset")
		return v, err
	case 'n':
		return false, sc.Skip()
	case '"':
		v, err := sc.StringValue()
		if err != nil {
			return false, err
		}
		switch v {
		case "true", "t", "yes", "y", "on", "1":
			return true, nil
		case "false", "f", "no", "n", "off", "0":
			return false, nil
		}
	default:
		if err := sc.Skip(); err != nil {
			return false, err
		}
	}
	return false, wire.BadRequest("reset must be a boolean")
}

// idMember reads a member that must be a string holding a UUID.
func idMember(sc *wire.Scanner, name string) (engine.ID, bool, error) {
	if sc.Peek() != '"' {
		return engine.ID{}, false, sc.Skip()
	}
	v, err := sc.StringValue()
	if err != nil {
		return engine.ID{}, false, err
	}
	id, err := engine.ParseID(v)
	if err != nil {
		return engine.ID{}, false, wire.BadRequest(name + " must be a UUID")
	}
	return id, true, nil
}

// isBadRequest reports an edge validation error (a 400 elsewhere), which a
// cycle reports as its failure instead.
func isBadRequest(err error) bool { return errors.Is(err, engine.ErrInvalid) }
