package server

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/relay"
	"github.com/queenmq/queen/server/reply"
	"github.com/queenmq/queen/server/wire"
)

// forwardTimeout bounds a relayed request that is not a long-poll.
const forwardTimeout = relay.Timeout

// forward relays a request this node cannot serve to the leader and copies
// the leader's answer back. It is used only for raft.ErrNotLeader, which the
// node returns before proposing anything, so the relayed request cannot be
// applied twice. It reports false when there is nowhere to relay to: the
// request was already relayed once, or the leader's HTTP address is not
// known yet (the caller then answers 503 and the client retries).
func (s *Server) forward(ctx *fasthttp.RequestCtx) bool {
	return s.forwardAs(ctx, s.broker.Status())
}

// forwardNotLeader forwards a request the broker answered
// raft.ErrNotLeader: to the leader of the group a *raft.NotLeaderError
// names, else, with one group, to the leader. A grouped broker's plain
// ErrNotLeader (a relayed part answered so) is not forwarded: which group
// it meant is lost, and the client retries the 503.
func (s *Server) forwardNotLeader(ctx *fasthttp.RequestCtx, err error) bool {
	var nl *raft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return s.forwardAs(ctx, nl.Status)
	case !s.groups.leaderKnownUnread():
		return false
	}
	return s.forward(ctx)
}

// relayFirst relays a write to the leader before its body is read, when
// this node is not the leader and knows who is: a follower would decode,
// validate and seal the body only to be told raft.ErrNotLeader, and the
// leader does all of it again. Bad input is answered by the leader, with
// the same 400 the follower would have given. It reports whether the
// request was answered.
func (s *Server) relayFirst(ctx *fasthttp.RequestCtx) bool {
	if !s.groups.leaderKnownUnread() {
		return false // which group's leader serves it is in the body
	}
	st := s.broker.Status()
	return st.Role != "leader" && s.forwardAs(ctx, st)
}

// forwardAs relays the request to the leader st names (relay.Requests):
// false when there is nowhere to relay to. A relayed long-poll parks on
// the leader for up to its own timeout.
func (s *Server) forwardAs(ctx *fasthttp.RequestCtx, st raft.Status) bool {
	var poll time.Duration
	if queryBool(ctx.QueryArgs(), "wait", false) {
		poll = s.popTimeout(ctx.QueryArgs())
	}
	relayed, err := s.relay.Request(ctx, st, poll)
	if err != nil {
		s.writeError(ctx, err)
	}
	return relayed
}

// Membership is implemented by brokers whose cluster can grow and shrink
// (raft.Node). The join and leave routes answer 501 without it.
// force makes a change the broker would refuse as a risk to its quorum.
type Membership interface {
	Join(id, addr string, force bool) error
	JoinNonvoter(id, addr string, force bool) error
	Leave(id string, force bool) error
}

// clustered reports whether the broker is a cluster of nodes (rather
// than one engine in process): other nodes send it reports.
func (s *Server) clustered() bool {
	_, ok := s.broker.(Membership)
	_, groups := s.broker.(GroupMembership)
	return ok || groups
}

// join adds a voter or a non-voter, or promotes a non-voter: POST
// /internal/v1/cluster/join {"id","addr","force","as"}.
func (s *Server) join(ctx *fasthttp.RequestCtx, _ *params) {
	s.membership(ctx, true)
}

// The suffrages a join asks for ("as"; a voter when absent).
const (
	asVoter    = "voter"
	asNonvoter = "nonvoter"
)

// leave removes a server: POST /internal/v1/cluster/leave {"id","force"}.
func (s *Server) leave(ctx *fasthttp.RequestCtx, _ *params) {
	s.membership(ctx, false)
}

func (s *Server) membership(ctx *fasthttp.RequestCtx, join bool) {
	m, ok := s.broker.(Membership)
	gm, grouped := s.broker.(GroupMembership)
	if !ok && !grouped {
		s.writeError(ctx, notImplemented("this broker has no cluster membership"))
		return
	}
	var id, addr string
	var force bool
	as := asVoter
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "id":
			id, _, err = sc.OptString("id")
		case "addr":
			addr, _, err = sc.OptString("addr")
		case "force":
			force, _, err = sc.OptBool("force")
		case "as":
			as, _, err = sc.OptString("as")
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case id == "":
		err = badRequest("id is required")
	case join && addr == "":
		err = badRequest("addr (the node's Raft host:port) is required")
	case as != asVoter && as != asNonvoter:
		err = badRequest(`as must be "voter" (the default) or "nonvoter"`)
	case grouped:
		err = s.changeGroups(ctx, gm, membershipChange{join: join, nonvoter: as == asNonvoter, id: id, addr: addr, force: force})
	case join && as == asNonvoter:
		err = m.JoinNonvoter(id, addr, force)
	case join:
		err = m.Join(id, addr, force)
	default:
		err = m.Leave(id, force)
	}
	if err != nil {
		s.forwardOrFail(ctx, err) // a follower relays the change to the leader
		return
	}
	w := reply.Start(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("id", id)
	// What this node had applied once the change was made (the
	// directory's, with groups): a non-voter that joined waits until it
	// has applied as much before it asks to be promoted.
	w.Int("applied", int64(s.broker.Status().Applied))
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}
