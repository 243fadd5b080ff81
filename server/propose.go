package server

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/server/relay"
)

// Forwarding is a step of proposing, not of writing errors. A broker that
// does not lead a command's group says so (raft.ErrNotLeader) before it
// proposes anything, so what follows cannot apply a command twice:
//
//  1. the command goes to the leader on the one path between nodes
//     (package cluster) when its row in the command table has a result
//     codec (command.Relayable) and this node knows the leader before
//     reading a request (one group; a broker of many forwards its
//     commands itself);
//  2. else the whole request is relayed to the leader (forwardNotLeader),
//     whose answer is the client's.
//
// A request another node sent is never relayed again (relay.Forwarded),
// and one that arrives after its sender gave up is refused
// (relay.Expired): a request hops at most once.

// forwardOrFail answers a request whose proposal (or membership change,
// or leader read) failed with err: relayed whole to the leader on
// raft.ErrNotLeader when there is one to relay to, else with the error.
func (s *Server) forwardOrFail(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, raft.ErrNotLeader) && s.forwardNotLeader(ctx, err) {
		return
	}
	s.writeError(ctx, err)
}

// forwarding is the proposer for the request ctx answers: the broker's
// (timed), and, on raft.ErrNotLeader, the cluster path to the leader for
// a command that has one (sendToLeader).
func (s *Server) forwarding(ctx *fasthttp.RequestCtx) raft.Proposer {
	return forwarder{s: s, req: ctx}
}

type forwarder struct {
	s   *Server
	req *fasthttp.RequestCtx
}

func (f forwarder) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	r, err := f.s.prop.Propose(ctx, c)
	if errors.Is(err, raft.ErrNotLeader) {
		if fr, sent, ferr := f.s.sendToLeader(ctx, f.req, c); sent {
			return fr, ferr
		}
	}
	return r, err
}

// sendToLeader proposes c on the leader through package cluster, when
// this node knows its one leader, shares the cluster secret with it, and
// c's row has a result codec; sent is false when it did not send it, or
// the leader proposed nothing (it no longer leads, or it is of a version
// without the path): the request is then relayed whole. The answer does
// not wait for this node to apply the command: it notes the index the
// leader had applied (relay.Reads.NoteIndex), which a read here right
// after waits for. A maintenance switch, which this node reads itself,
// waits (relay.Reads.Settle).
func (s *Server) sendToLeader(ctx context.Context, req *fasthttp.RequestCtx, c engine.Command) (r engine.Result, sent bool, err error) {
	if s.cluster == nil || !s.groups.leaderKnownUnread() || !command.Relayable(c) ||
		relay.Forwarded(req) {
		return r, false, nil
	}
	st := s.broker.Status()
	if st.LeaderHTTP == "" || st.Leader == st.ID {
		return r, false, nil
	}
	entry, err := raft.RelayEntry(c)
	if err != nil || len(entry) > s.opts.MaxBodyBytes {
		return r, false, nil // the leader takes the client's request whole
	}
	r, applied, err := s.cluster.Forward(ctx, st.LeaderHTTP, singleGroup, entry)
	s.reads.NoteIndex(singleGroup, applied)
	if _, ok := c.(command.Maintenance); ok && err == nil {
		// This node routes its next pushes and pops by the switch as its
		// own replica has it, and answers with it.
		s.reads.Settle()
	}
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, errNoSuchRoute), errors.Is(err, errNotImplemented):
		return r, false, nil
	case errors.Is(err, raft.ErrForward):
		s.log.Warn("forward to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
	}
	return r, true, err
}
