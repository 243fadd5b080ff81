package server

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/relay"
)

// Forwarding is a step of proposing, not of writing errors. Whether a
// command is proposed here or on its group's leader is decided in package
// cluster, for one group (cluster.Proxy) as for several (cluster.Host):
// a command whose row has a result codec (command.Relayable) goes to the
// leader on the one path between nodes, and its answer is the client's.
// What that path did not carry comes back as raft.ErrNotLeader, which a
// broker answers before it proposes anything, so what follows cannot
// apply a command twice: the whole request is relayed to the leader
// (forwardNotLeader), whose answer is the client's.
//
// A request another node sent is never sent on again (relay.Forwarded,
// cluster.WithoutRelay), and one that arrives after its sender gave up is
// refused (relay.Expired): a request hops at most once.

// forwardOrFail answers a request whose proposal (or membership change,
// or leader read) failed with err: relayed whole to the leader on
// raft.ErrNotLeader when there is one to relay to, else with the error.
func (s *Server) forwardOrFail(ctx *fasthttp.RequestCtx, err error) {
	if errors.Is(err, raft.ErrNotLeader) && s.forwardNotLeader(ctx, err) {
		return
	}
	s.writeError(ctx, err)
}

// forwarding is the proposer for the request ctx answers: local or leader
// (Server.send), which sends nothing on for a request another node
// relayed here.
func (s *Server) forwarding(ctx *fasthttp.RequestCtx) raft.Proposer {
	if relay.Forwarded(ctx) {
		return relayedHere{s.send}
	}
	return s.send
}

// relayedHere proposes a relayed request's commands without a second hop.
type relayedHere struct{ p raft.Proposer }

func (r relayedHere) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	return r.p.Propose(cluster.WithoutRelay(ctx), c)
}

// sender is the proposer of the commands a client's request makes: the
// broker's own, timed (prop), when it decides local or leader itself (a
// Grouped broker, cluster.Host) or has no one to send to (no cluster
// secret); else the broker of one group behind a cluster.Proxy, timed.
// A leader without the path answers 404 no_such_route or 501
// not_implemented, and one whose command table does not relay the
// command (a version before its row had a result codec: a transaction)
// 400 not_preparable, before proposing it: the Proxy then leaves the
// request to the relay (cluster.ErrNoPath).
func (s *Server) sender(b Broker) raft.Proposer {
	if s.cluster == nil || !s.groups.leaderKnownUnread() {
		return s.prop
	}
	p := cluster.NewProxy(b, cluster.ProxyOptions{Forward: s.cluster, MaxEntry: s.opts.MaxBodyBytes, Logger: s.log, NoPath: noPath})
	return relay.NewTimedProposer(p, s.opts.Metrics)
}

// noPath reports whether a leader's refusal of a command sent on the
// cluster path says it has no path for it (cluster.ProxyOptions.NoPath).
func noPath(err error) bool {
	return errors.Is(err, errNoSuchRoute) || errors.Is(err, errNotImplemented) || errors.Is(err, raft.ErrNotPreparable)
}
