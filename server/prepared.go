package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// A follower prepares the pushes it is sent (ARCHITECTURE.md, "Forwarding"):
// it decodes, validates, seals and compresses them as the leader would
// (raft.PrepareEntry), and POSTs the prepared command to the leader's
// preparedPushPath with the cluster secret. The leader stamps and proposes
// it and answers with the results in pushResults' format; the follower
// writes the client's answer. The leader's own answers (503 not_leader, 507,
// a refused secret) are relayed as they are.
const preparedPushPath = "/internal/v1/push"

// PreparedProposer is a broker that proposes commands another node prepared
// (raft.Node, raft.Local).
type PreparedProposer interface {
	ProposePrepared(ctx context.Context, entry []byte) (engine.Result, error)
}

// errLeaderSpools is the leader's answer to a prepared push during push
// maintenance: the follower that prepared it buffers it in its own spool,
// as it would have had its applied state shown the switch already.
var errLeaderSpools = errors.New("server: push maintenance is on; buffer the push where it was received")

// codeLeaderSpools is errLeaderSpools' code in the error table.
const codeLeaderSpools = "push_maintenance"

// preparesFor reports whether this node prepares pushes for a leader, and
// the status that said so: it is a follower that knows its leader's HTTP
// address and shares the cluster secret with it, and the request is a
// client's (a request relayed to this node is never relayed again).
func (s *Server) preparesFor(ctx *fasthttp.RequestCtx, st raft.Status) bool {
	return s.opts.ClusterSecret != "" && !s.grouped() && st.Role != "leader" && st.LeaderHTTP != "" &&
		st.Leader != st.ID && len(ctx.Request.Header.Peek(forwardedHeader)) == 0
}

// pushViaLeader answers a push this follower decoded and sealed: it
// prepares the items, has the leader propose them and writes the answer.
func (s *Server) pushViaLeader(ctx *fasthttp.RequestCtx, st raft.Status, items []engine.PushItem) {
	entry, err := raft.PrepareEntry(engine.PushCmd{Items: items})
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if len(entry) > s.opts.MaxBodyBytes {
		// Many tiny items make an entry larger than their JSON (a minted
		// transaction id is 36 bytes in the entry and none in the body):
		// past the body limit the leader would refuse it, and it takes
		// the client's request under the same limit.
		if !s.forwardAs(ctx, st) {
			s.writeError(ctx, raft.ErrNotLeader)
		}
		return
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	s.toNode(req, st.LeaderHTTP, preparedPushPath, "application/octet-stream", entry)
	req.Header.Set(deadlineHeader, strconv.FormatInt(time.Now().Add(forwardTimeout).UnixMicro(), 10))
	if err := s.client.DoTimeout(req, resp, forwardTimeout); err != nil {
		s.log.Warn("forward to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
		s.writeError(ctx, errors.Join(raft.ErrForward, err))
		return
	}
	s.awaitApplied(resp)
	switch {
	case resp.StatusCode() == fasthttp.StatusOK:
		s.m.forwarded.Inc()
		res, err := readPushResults(resp.Body(), len(items))
		if err != nil {
			s.writeError(ctx, fmt.Errorf("server: the leader's push answer: %w", err))
			return
		}
		s.answerPush(ctx, items, res)
	case errorCodeOf(resp) == "no_such_route":
		// A leader of an older version: relay the client's request.
		if !s.forwardAs(ctx, st) {
			s.writeError(ctx, raft.ErrNotLeader)
		}
	case errorCodeOf(resp) == codeLeaderSpools:
		s.bufferPush(ctx, items)
	default:
		s.m.forwarded.Inc()
		relayAnswer(resp, &ctx.Response)
	}
}

// errorCodeOf reads the code of an error answer (docs/decisions.md C2).
func errorCodeOf(resp *fasthttp.Response) string {
	if resp.StatusCode() < 400 {
		return ""
	}
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(resp.Body(), &e)
	return e.Code
}

// pushPrepared answers POST /internal/v1/push on the leader: the body is a
// raft.PrepareEntry entry; 200 with the results (appendPushResults). Only a
// node (the cluster secret) may send one: its frames carry producer subjects
// and sealed bits the sending node vouches for.
func (s *Server) pushPrepared(ctx *fasthttp.RequestCtx, p *params) {
	if !p.node {
		s.writeError(ctx, errClusterSecret)
		return
	}
	if m, ok := s.broker.(Maintainer); ok && pushMaintenance(m) {
		s.writeError(ctx, errLeaderSpools)
		return
	}
	r, err := s.prop.ProposePrepared(s.ctx, ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, ok := r.Value.([]engine.PushResult)
	switch {
	case !ok:
		err = fmt.Errorf("%w: a prepared push answered %T", raft.ErrResultType, r.Value)
	case r.Err != nil:
		err = r.Err
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.m.pushed(res)
	s.an.pushed(res)
	ctx.SetContentType("application/octet-stream")
	ctx.SetStatusCode(fasthttp.StatusOK)
	out, err := command.AppendResult(nil, command.TypePushPrepared, res)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	ctx.SetBody(out)
}

// readPushResults reads the want results of a prepared push.
func readPushResults(b []byte, want int) ([]engine.PushResult, error) {
	v, err := command.ReadResult(command.TypePushPrepared, b)
	if err != nil {
		return nil, err
	}
	res := v.([]engine.PushResult)
	if len(res) != want {
		return nil, fmt.Errorf("%w: %d results for %d items", command.ErrCorrupt, len(res), want)
	}
	return res, nil
}
