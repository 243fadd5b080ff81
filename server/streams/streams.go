package streams

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/reply"
	"github.com/queenmq/queen/server/wire"
)

// Register answers POST /streams/v1/queries.
func (r *Routes) Register(ctx *fasthttp.RequestCtx) {
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
		err = wire.BadRequest("name is required")
	case !hasQueue:
		err = wire.BadRequest("source_queue is required")
	case !hasHash:
		err = wire.BadRequest("config_hash is required")
	}
	if err != nil {
		r.host.Fail(ctx, err)
		return
	}
	res, err := raft.Propose[engine.StreamRegistered](r.ctx, r.host.Proposer(ctx), cmd)
	if err != nil {
		r.host.ForwardOrFail(ctx, err)
		return
	}
	w := reply.Start(ctx)
	w.Object("")
	if res.Mismatch {
		w.Bool("success", false)
		w.ID("query_id", res.ID)
		w.Str("name", cmd.Name)
		w.Str("error", fmt.Sprintf("config_hash mismatch: operator chain changed for queryId '%s'. "+
			"Pass reset:true to wipe its state and start over, or choose a new queryId.", cmd.Name))
		w.Str("code", "config_hash_mismatch")
		w.EndObject()
		reply.Send(ctx, fasthttp.StatusConflict, w)
		return
	}
	w.Bool("success", true)
	w.ID("query_id", res.ID)
	w.Str("name", cmd.Name)
	w.Str("config_hash", cmd.ConfigHash)
	w.Bool("fresh", res.Fresh)
	w.Bool("reset", res.Reset)
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}

// Delete answers DELETE /streams/v1/queries/{name} (ours: Queen has no
// route that deletes a query): the query and all its state go.
func (r *Routes) Delete(ctx *fasthttp.RequestCtx, name string) {
	existed, err := raft.Propose[bool](r.ctx, r.host.Proposer(ctx), engine.StreamDeleteCmd{Name: name})
	if err != nil {
		r.host.ForwardOrFail(ctx, err)
		return
	}
	w := reply.Start(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Bool("deleted", existed)
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}

// StateGet answers POST /streams/v1/state/get. The rows are read on the
// leader once it has confirmed it leads and applied every earlier term
// (raft.Node.LeaderRead): a follower forwards the read, so a runner never
// folds a batch into stale state.
func (r *Routes) StateGet(ctx *fasthttp.RequestCtx) {
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
		err = wire.BadRequest("query_id is required")
	case !hasPart:
		err = wire.BadRequest("partition_id is required")
	default:
		err = r.host.LeaderRead()
	}
	if err != nil {
		r.host.ForwardOrFail(ctx, err)
		return
	}
	if _, found, err := r.reader.StreamQueryByID(f.QueryID); err != nil || !found {
		r.writeQueryError(ctx, err)
		return
	}
	rows, err := r.reader.StreamState(f)
	if err != nil {
		r.host.Fail(ctx, err)
		return
	}
	w := reply.Start(ctx)
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
	reply.Send(ctx, fasthttp.StatusOK, w)
}

// noStreams is the reader of a broker without streams: no query exists.
type noStreams struct{}

func (noStreams) StreamQueryByID(engine.ID) (engine.StreamQuery, bool, error) {
	return engine.StreamQuery{}, false, nil
}
func (noStreams) StreamState(engine.StateFilter) ([]engine.StateRow, error) { return nil, nil }

// writeQueryError answers an unregistered query (docs/decisions.md C14),
// or a failed lookup.
func (r *Routes) writeQueryError(ctx *fasthttp.RequestCtx, err error) {
	if err != nil {
		r.host.Fail(ctx, err)
		return
	}
	w := reply.Start(ctx)
	w.Object("")
	w.Bool("success", false)
	w.Str("error", "query not found")
	w.Str("code", "query_not_found")
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusNotFound, w)
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

// Cycle answers POST /streams/v1/cycle.
// The items are stamped with subject, the verified token's sub ("" with
// auth off; docs/decisions.md C15).
func (r *Routes) Cycle(ctx *fasthttp.RequestCtx, subject string) {
	body := ctx.PostBody()
	req, err := decodeCycle(body, r.host)
	if err != nil {
		r.host.Fail(ctx, err)
		return
	}
	req.cmd.Digest = sha256.Sum256(body)
	for i := range req.cmd.Items {
		req.cmd.Items[i].ProducerSub = subject // docs/decisions.md C15
	}
	seal := r.host.Sealer()
	for i := 0; req.fail == "" && i < len(req.cmd.Items); i++ {
		if err := seal(&req.cmd.Items[i]); err != nil {
			r.host.Fail(ctx, err)
			return
		}
	}
	if req.fail != "" {
		r.writeCycle(ctx, &req, engine.StreamCycleResult{Error: req.fail})
		return
	}
	res, err := raft.Propose[engine.StreamCycleResult](r.ctx, r.host.Proposer(ctx), req.cmd)
	switch {
	case err == nil:
	case errors.Is(err, engine.ErrQueryNotFound):
		r.writeQueryError(ctx, nil)
		return
	default:
		r.host.ForwardOrFail(ctx, err)
		return
	}
	if res.Success && !res.Replayed {
		r.host.Pushed(res.Pushes)
	}
	r.writeCycle(ctx, &req, res)
}

// writeCycle writes a cycle's answer: 200 whether it applied or failed
// (success says which; the SDKs read that shape), with the counts and
// results of a failed cycle empty, since nothing of it was applied.
func (r *Routes) writeCycle(ctx *fasthttp.RequestCtx, req *cycleRequest, res engine.StreamCycleResult) {
	w := reply.Start(ctx)
	w.Object("")
	w.Bool("success", res.Success)
	w.Str("query_id", req.queryID)
	w.Str("partition_id", req.partID)
	w.StrOrNull("queueName", res.QueueName)
	w.Int("state_ops_applied", int64(res.StateOpsApplied))
	w.Array("push_results")
	for i := range res.Pushes {
		r.host.WritePushResult(&w, i, &req.cmd.Items[i], &res.Pushes[i])
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
	reply.Send(ctx, fasthttp.StatusOK, w)
}
