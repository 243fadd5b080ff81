package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/bodies"
)

// The streams routes (docs/api.md §14.2): what Queen's streaming SDKs call
// to register a query, read its state and commit a cycle. A cycle is one
// command (engine.StreamCycleCmd): its state changes, sink pushes and ack
// are applied together on every replica, or not at all. Its body is read
// once (bodies.StreamCycle); what a client got wrong in a way Queen reports
// as a failed cycle is answered 200 success:false and never proposed, and
// its sink pushes are read, sealed, counted and answered as pushes are
// (push.go, crypt.go).

// streamReader is the read side of streams a broker offers (raft.Node and
// the tests' brokers, through their engine).
type streamReader interface {
	StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error)
	StreamState(f engine.StateFilter) ([]engine.StateRow, error)
}

// streamSource is the broker's stream reader; a broker without streams
// reads as one where no query exists.
func (s *Server) streamSource() streamReader {
	if r, ok := s.broker.(streamReader); ok {
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

// registerQuery answers POST /streams/v1/queries.
func (s *Server) registerQuery(ctx *fasthttp.RequestCtx, _ *params) {
	cmd, err := bodies.StreamQuery(ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, err := raft.Propose[engine.StreamRegistered](s.ctx, s.forwarding(ctx), cmd)
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	if res.Mismatch {
		w.Bool("success", false)
		w.ID("query_id", res.ID)
		w.Str("name", cmd.Name)
		w.Str("error", fmt.Sprintf("config_hash mismatch: operator chain changed for queryId '%s'. "+
			"Pass reset:true to wipe its state and start over, or choose a new queryId.", cmd.Name))
		w.Str("code", "config_hash_mismatch")
		w.EndObject()
		sendReply(ctx, fasthttp.StatusConflict, w)
		return
	}
	w.Bool("success", true)
	w.ID("query_id", res.ID)
	w.Str("name", cmd.Name)
	w.Str("config_hash", cmd.ConfigHash)
	w.Bool("fresh", res.Fresh)
	w.Bool("reset", res.Reset)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// deleteQuery answers DELETE /streams/v1/queries/{name} (ours: Queen has no
// route that deletes a query): the query and all its state go.
func (s *Server) deleteQuery(ctx *fasthttp.RequestCtx, p *params) {
	existed, err := raft.Propose[bool](s.ctx, s.forwarding(ctx), engine.StreamDeleteCmd{Name: p.get("name")})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Bool("deleted", existed)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// stateGet answers POST /streams/v1/state/get. The rows are read on the
// leader once it has confirmed it leads and applied every earlier term
// (streamLeaderRead): a follower forwards the read, so a runner never folds
// a batch into stale state.
func (s *Server) stateGet(ctx *fasthttp.RequestCtx, _ *params) {
	f, err := bodies.StreamState(ctx.PostBody())
	if err == nil {
		err = s.streamLeaderRead()
	}
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	r := s.streamSource()
	if _, found, err := r.StreamQueryByID(f.QueryID); err != nil || !found {
		s.writeQueryError(ctx, err)
		return
	}
	rows, err := r.StreamState(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
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
	sendReply(ctx, fasthttp.StatusOK, w)
}

// streamLeaderRead readies a read that must see every cycle a client was
// answered for: the broker's LeaderRead (raft.Node: leadership confirmed,
// earlier terms applied), else a leader check. A follower answers
// raft.ErrNotLeader and the request is forwarded.
func (s *Server) streamLeaderRead() error {
	if r, ok := s.broker.(interface{ LeaderRead(context.Context) error }); ok {
		return r.LeaderRead(s.ctx)
	}
	if s.broker.Status().Role != "leader" {
		return raft.ErrNotLeader
	}
	return nil
}

// writeQueryError answers an unregistered query (docs/decisions.md C14),
// or a failed lookup.
func (s *Server) writeQueryError(ctx *fasthttp.RequestCtx, err error) {
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", false)
	w.Str("error", "query not found")
	w.Str("code", "query_not_found")
	w.EndObject()
	sendReply(ctx, fasthttp.StatusNotFound, w)
}

// cycle answers POST /streams/v1/cycle. The items are stamped with the
// verified token's sub ("" with auth off; docs/decisions.md C15) and
// sealed as a push's are.
func (s *Server) cycle(ctx *fasthttp.RequestCtx, p *params) {
	body := ctx.PostBody()
	req, err := bodies.StreamCycle(body, publicText)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	req.Cmd.Digest = sha256.Sum256(body)
	for i := range req.Cmd.Items {
		req.Cmd.Items[i].ProducerSub = p.subject // docs/decisions.md C15
	}
	seal := (&sealer{s: s}).item
	for i := 0; req.Fail == "" && i < len(req.Cmd.Items); i++ {
		if err := seal(&req.Cmd.Items[i]); err != nil {
			s.writeError(ctx, err)
			return
		}
	}
	if req.Fail != "" {
		writeCycle(ctx, &req, engine.StreamCycleResult{Error: req.Fail})
		return
	}
	res, err := raft.Propose[engine.StreamCycleResult](s.ctx, s.forwarding(ctx), req.Cmd)
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
		s.m.Pushed(res.Pushes)
	}
	writeCycle(ctx, &req, res)
}

// writeCycle writes a cycle's answer: 200 whether it applied or failed
// (success says which; the SDKs read that shape), with the counts and
// results of a failed cycle empty, since nothing of it was applied.
func writeCycle(ctx *fasthttp.RequestCtx, req *bodies.Cycle, res engine.StreamCycleResult) {
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", res.Success)
	w.Str("query_id", req.QueryID)
	w.Str("partition_id", req.PartitionID)
	w.StrOrNull("queueName", res.QueueName)
	w.Int("state_ops_applied", int64(res.StateOpsApplied))
	w.Array("push_results")
	for i := range res.Pushes {
		writePushResult(&w, "", i, &req.Cmd.Items[i], &res.Pushes[i])
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
	sendReply(ctx, fasthttp.StatusOK, w)
}
