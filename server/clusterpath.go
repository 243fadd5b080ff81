package server

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/relay"
)

// The receiving end of the cluster path (package cluster): the propose
// route, the checks every route another node calls runs first, and the
// refusal its sender reads back.

// groupHeader names the Raft group a relayed command or membership change
// is for.
const groupHeader = cluster.GroupHeader

// commandAddsData reports whether a command of type t, sent on the
// cluster path, adds data (the route's disk class, perCommand): every
// command but those whose client routes write little and keep consumers
// going below the disk reserve (an ack, a consumer group's delete or
// subscription), which the leader serves there as it serves those routes.
func commandAddsData(t command.Type) bool {
	switch t {
	case command.TypeAck, command.TypeDeleteGroup, command.TypeUpdateSub:
		return false
	}
	return true
}

// Refusal is the error another node's error answer (status, body) stands
// for: the table's sentinel for its code, with its text. An unknown code
// is a failed relay (raft.ErrForward). It is how package cluster reads a
// refused command (cluster.Options.Refusal).
func Refusal(status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	for _, r := range errorTable {
		if r.code == e.Code {
			return &apiError{Kind: r.err, Msg: e.Error}
		}
	}
	return fmt.Errorf("%w: answered %d %s", raft.ErrForward, status, e.Code)
}

// proposeRelayed answers POST /internal/v1/propose: a command another node
// forwarded (package cluster), proposed on the group groupHeader names.
// Only a node (the cluster secret) may send one: a prepared push's frames
// carry producer subjects and sealed bits the sending node vouches for.
// A single group's leader in push maintenance refuses a prepared push
// (errLeaderSpools): the follower that prepared it spools it. A command
// that adds data is refused while a disk of the cluster is below its
// reserve (commandAddsData), as its client's route would be. Its results
// are counted where they are answered, on the forwarding node
// (countPushed).
func (s *Server) proposeRelayed(ctx *fasthttp.RequestCtx, p *params) {
	g, ok := s.relayedGroup(ctx, p)
	if !ok {
		return
	}
	t, err := command.EntryType(ctx.PostBody())
	if err != nil {
		s.writeError(ctx, fmt.Errorf("%w: %w", raft.ErrNotPreparable, err))
		return
	}
	if commandAddsData(t) {
		release, err := s.admitData(int64(len(ctx.PostBody())))
		if err != nil {
			s.writeError(ctx, err)
			return
		}
		defer release()
	}
	if m, ok := s.broker.(Maintainer); ok && t == command.TypePushPrepared && s.groups.leaderKnownUnread() && pushMaintenance(m) {
		s.writeError(ctx, errLeaderSpools)
		return
	}
	start := time.Now()
	out, r, err := cluster.Answer(s.ctx, s.groups, g, ctx.PostBody())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if _, ok := r.Value.([]engine.PushResult); ok {
		s.prop.Hist(engine.PushCmd{}).UpdateDuration(start)
	}
	ctx.SetContentType("application/octet-stream")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(out)
}

// nodeAsks checks a request another node sent on the cluster path to a
// route only a broker that is a B serves: 501 (cannot) on one that is
// not, as a node without groups answers, then relayedGroup's checks. It
// returns the broker as a B and the group the request names; false when
// it answered the request with the refusal.
func nodeAsks[B any](s *Server, ctx *fasthttp.RequestCtx, p *params, cannot string) (B, uint32, bool) {
	b, ok := s.broker.(B)
	if !ok {
		s.writeError(ctx, notImplemented(cannot))
		return b, 0, false
	}
	g, ok := s.relayedGroup(ctx, p)
	return b, g, ok
}

// relayedGroup checks a request another node sent on the cluster path
// (the cluster secret, its deadline) and reads the group it names; false
// when it answered the request with the refusal.
func (s *Server) relayedGroup(ctx *fasthttp.RequestCtx, p *params) (uint32, bool) {
	var err error
	switch {
	case !p.node:
		err = errClusterSecret
	case relay.Expired(ctx):
		err = errForwardExpired
	}
	g, perr := cluster.ParseGroup(ctx.Request.Header.Peek(groupHeader))
	if err == nil && perr != nil {
		err = badRequest(groupHeader + " must name a group")
	}
	if err != nil {
		s.writeError(ctx, err)
		return 0, false
	}
	return g, true
}
