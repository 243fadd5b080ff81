package server

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/relay"
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

// relayUnread relays a write to the leader before its body is read, when
// this node has no cluster path to send its command on (no cluster
// secret), is not the leader, and knows who is: it would decode, validate
// and seal the body only to be told raft.ErrNotLeader, and relay it whole
// for the leader to do all of it again. Bad input is answered by the
// leader, with the same 400 the follower would have given. It reports
// whether the request was answered. With the path, the body is read here
// and the command, not the request, goes to the leader (cluster.Proxy).
func (s *Server) relayUnread(ctx *fasthttp.RequestCtx) bool {
	if s.cluster != nil || !s.groups.leaderKnownUnread() {
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
