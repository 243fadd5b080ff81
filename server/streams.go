package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/wire"
)

// The streams routes (docs/api.md §14.2): what Queen's streaming SDKs call
// to register a query, read its state and commit a cycle. A cycle is one
// command (engine.StreamCycleCmd): its state changes, sink pushes and ack
// are applied together on every replica, or not at all.

// registerQuery answers POST /streams/v1/queries.
func (s *Server) registerQuery(ctx *fasthttp.RequestCtx, _ *params) {
	var (
		cmd               engine.StreamRegisterCmd
		hasName, hasQueue bool
		hasHash           bool
	)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) error {
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
		err = badRequest("name is required")
	case !hasQueue:
		err = badRequest("source_queue is required")
	case !hasHash:
		err = badRequest("config_hash is required")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, err := raft.Propose[engine.StreamRegistered](s.ctx, s.forwarding(ctx), cmd)
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startBody(ctx)
	w.Object("")
	if res.Mismatch {
		w.Bool("success", false)
		w.ID("query_id", res.ID)
		w.Str("name", cmd.Name)
		w.Str("error", fmt.Sprintf("config_hash mismatch: operator chain changed for queryId '%s'. "+
			"Pass reset:true to wipe its state and start over, or choose a new queryId.", cmd.Name))
		w.Str("code", "config_hash_mismatch")
		w.EndObject()
		send(ctx, fasthttp.StatusConflict, w)
		return
	}
	w.Bool("success", true)
	w.ID("query_id", res.ID)
	w.Str("name", cmd.Name)
	w.Str("config_hash", cmd.ConfigHash)
	w.Bool("fresh", res.Fresh)
	w.Bool("reset", res.Reset)
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// deleteQuery answers DELETE /streams/v1/queries/{name} (ours: Queen has no
// route that deletes a query): the query and all its state go.
func (s *Server) deleteQuery(ctx *fasthttp.RequestCtx, p *params) {
	existed, err := raft.Propose[bool](s.ctx, s.forwarding(ctx), engine.StreamDeleteCmd{Name: p.get("name")})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Bool("deleted", existed)
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// stateGet answers POST /streams/v1/state/get. The rows are read on the
// leader once it has confirmed it leads and applied every earlier term
// (raft.Node.LeaderRead): a follower forwards the read, so a runner never
// folds a batch into stale state.
func (s *Server) stateGet(ctx *fasthttp.RequestCtx, _ *params) {
	var f engine.StateFilter
	var hasQuery, hasPart bool
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) error {
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
		err = badRequest("query_id is required")
	case !hasPart:
		err = badRequest("partition_id is required")
	default:
		err = s.leaderRead()
	}
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	if _, found, err := s.streams().StreamQueryByID(f.QueryID); err != nil || !found {
		s.writeQueryError(ctx, err)
		return
	}
	rows, err := s.streams().StreamState(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Array("rows")
	for i := range rows {
		w.Object("")
		w.Str("key", rows[i].Key)
		w.Raw("value", rows[i].Value)
		w.TimeMicros("updated_at", rows[i].UpdatedAt)
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// leaderRead readies a read that must see every cycle a client was
// answered for: the broker's LeaderRead (raft.Node: leadership confirmed,
// earlier terms applied), else a leader check. A follower answers
// raft.ErrNotLeader and the request is forwarded.
func (s *Server) leaderRead() error {
	if r, ok := s.broker.(interface{ LeaderRead(context.Context) error }); ok {
		return r.LeaderRead(s.ctx)
	}
	if s.broker.Status().Role != "leader" {
		return raft.ErrNotLeader
	}
	return nil
}

// StreamReader is the read side of streams a broker offers (raft.Node and
// the tests' brokers, through their engine).
type StreamReader interface {
	StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error)
	StreamState(f engine.StateFilter) ([]engine.StateRow, error)
}

func (s *Server) streams() StreamReader {
	if r, ok := s.broker.(StreamReader); ok {
		return r
	}
	return noStreams{}
}

// noStreams is the reader of a broker without streams: no query exists.
type noStreams struct{}

func (noStreams) StreamQueryByID(engine.ID) (engine.StreamQuery, bool, error) {
	return engine.StreamQuery{}, false, nil
}
func (noStreams) StreamState(engine.StateFilter) ([]engine.StateRow, error) { return nil, nil }

// writeQueryError answers an unregistered query (docs/decisions.md C14),
// or a failed lookup.
func (s *Server) writeQueryError(ctx *fasthttp.RequestCtx, err error) {
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", false)
	w.Str("error", "query not found")
	w.Str("code", "query_not_found")
	w.EndObject()
	send(ctx, fasthttp.StatusNotFound, w)
}

// cycleRequest is a decoded cycle body.
type cycleRequest struct {
	cmd     engine.StreamCycleCmd
	queryID string
	partID  string
	// fail is a cycle-level failure the edge found (an unknown state op
	// type, a malformed push item): answered success:false, not proposed.
	fail string
}

// cycle answers POST /streams/v1/cycle.
func (s *Server) cycle(ctx *fasthttp.RequestCtx, p *params) {
	body := ctx.PostBody()
	req, err := decodeCycle(body)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	req.cmd.Digest = sha256.Sum256(body)
	stamp(req.cmd.Items, p.subject) // docs/decisions.md C15
	z := sealer{s: s}
	for i := 0; req.fail == "" && i < len(req.cmd.Items); i++ {
		if err := z.item(&req.cmd.Items[i]); err != nil {
			s.writeError(ctx, err)
			return
		}
	}
	if req.fail != "" {
		s.writeCycle(ctx, &req, engine.StreamCycleResult{Error: req.fail})
		return
	}
	res, err := raft.Propose[engine.StreamCycleResult](s.ctx, s.forwarding(ctx), req.cmd)
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrQueryNotFound):
		s.writeQueryError(ctx, nil)
		return
	default:
		s.forwardOrFail(ctx, err)
		return
	}
	if res.Success && !res.Replayed {
		s.m.pushed(res.Pushes)
	}
	s.writeCycle(ctx, &req, res)
}

// writeCycle writes a cycle's answer: 200 whether it applied or failed
// (success says which; the SDKs read that shape), with the counts and
// results of a failed cycle empty, since nothing of it was applied.
func (s *Server) writeCycle(ctx *fasthttp.RequestCtx, req *cycleRequest, res engine.StreamCycleResult) {
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", res.Success)
	w.Str("query_id", req.queryID)
	w.Str("partition_id", req.partID)
	w.StrOrNull("queueName", res.QueueName)
	w.Int("state_ops_applied", int64(res.StateOpsApplied))
	w.Array("push_results")
	for i := range res.Pushes {
		writePushResult(&w, "", i, &req.cmd.Items[i], &res.Pushes[i])
	}
	w.EndArray()
	if a := res.Ack; a != nil && res.Success {
		w.Object("ack_result")
		w.Bool("success", true)
		w.Int("count", a.Count)
		w.Bool("lease_released", a.LeaseReleased)
		w.Bool("dlq", a.DLQ)
		w.EndObject()
	} else {
		w.Null("ack_result")
	}
	if !res.Success {
		w.Str("error", res.Error)
	}
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// decodeCycle reads a cycle body (docs/api.md §14.2). A malformed body or a
// missing query_id or partition_id is an error (400); what Queen reports as
// a failed cycle (an unknown op type or ack status, a bad item) is
// req.fail.
func decodeCycle(body []byte) (cycleRequest, error) {
	var (
		req               cycleRequest
		hasQuery, hasPart bool
	)
	c := &req.cmd
	release := true
	failf := func(format string, args ...any) {
		if req.fail == "" {
			req.fail = fmt.Sprintf(format, args...)
		}
	}
	err := wire.DecodeObject(body, false, func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "query_id":
			if req.queryID, hasQuery, err = sc.OptString("query_id"); err == nil && hasQuery {
				if c.QueryID, err = engine.ParseID(req.queryID); err != nil {
					err = badRequest("query_id must be a UUID")
				}
			}
		case "partition_id":
			if req.partID, hasPart, err = sc.OptString("partition_id"); err == nil && hasPart {
				if c.PartitionID, err = engine.ParseID(req.partID); err != nil {
					err = badRequest("partition_id must be a UUID")
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
				it, err := decodePushItem(sc, c.Items)
				if err != nil {
					if !isBadRequest(err) {
						return err
					}
					failf("push_items[%d]: %s", len(c.Items), publicText(err))
				}
				c.Items = append(c.Items, it)
				return nil
			})
		case "ack":
			if sc.Peek() != '{' {
				return sc.Skip() // null (or nothing usable): no ack
			}
			var fail string
			c.Ack, fail, err = decodeCycleAck(sc)
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
		err = badRequest("query_id is required")
	case !hasPart:
		err = badRequest("partition_id is required")
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
func decodeCycleAck(sc *wire.Scanner) (*engine.CycleAck, string, error) {
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
			return a, publicText(err), nil
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
	return false, badRequest("reset must be a boolean")
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
		return engine.ID{}, false, badRequest(name + " must be a UUID")
	}
	return id, true, nil
}

// isBadRequest reports an edge validation error (a 400 elsewhere), which a
// cycle reports as its failure instead.
func isBadRequest(err error) bool { return errors.Is(err, engine.ErrInvalid) }

// publicText is the client-facing text of an error, never empty: an error
// the table does not know reads "internal error" (it is logged where it
// arose, as writeError logs a 500's).
func publicText(err error) string {
	if _, msg, ok := classify(err); ok && msg != "" {
		return msg
	}
	return "internal error"
}
