package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// Local or leader (ARCHITECTURE.md, "Forwarding"): whether a command is
// proposed here or sent to its group's leader is decided in this package,
// and only here, whether the node runs one group (Proxy) or several
// (Host.run, Host.attempt). Either way a command sent to a leader leaves on
// one function, toLeader, which notes what the leader had applied and waits
// for it or not by the same rule. The HTTP edge keeps only the relay of a
// whole request, for what this path did not carry (server/forward.go).

// A Proxy is the proposer of a node that runs one Raft group (group 1): it
// proposes a command here, and when this node does not lead the group
// (raft.ErrNotLeader, answered before anything was proposed) it sends a
// command whose row has a result codec (command.Relayable) to the leader on
// the cluster path, as a Host sends a command of a group led elsewhere. What
// it does not send is answered with the local error, which the edge relays
// whole to the leader:
//
//   - a command without a result codec;
//   - a request another node relayed here (WithoutRelay): a request hops
//     at most once;
//   - while no leader's HTTP address is known, once it waited for it up
//     to addressWait (awaitLeader);
//   - an entry past ProxyOptions.MaxEntry, which the leader would refuse
//     (a push of many tiny items prepares larger than its JSON; the error
//     is then ErrNoPath too);
//   - a leader that refuses it without proposing it (it no longer leads),
//     or has no such path (ProxyOptions.NoPath: an older version; the
//     error is then ErrNoPath too).
type Proxy struct {
	b Single
	n *raft.Node // b as a replica, nil when it is none (an engine in process)
	o ProxyOptions
}

// Single is a broker of one group as a Proxy sees it (raft.Node): it
// proposes, and knows who leads its group and at which HTTP address.
type Single interface {
	raft.Proposer
	Status() raft.Status
}

// ProxyOptions configures a Proxy.
type ProxyOptions struct {
	// Forward is the cluster path (Client). Nil: the path is closed (no
	// cluster secret), and every command is proposed here or refused.
	Forward raft.Forwarder
	// MaxEntry bounds an entry sent on the path (the leader's body limit);
	// 0: none.
	MaxEntry int
	// NoPath reports whether a leader's refusal says it has no such path
	// (a version without it): the command was not proposed, and the edge
	// relays the request whole. Nil: none does.
	NoPath func(error) bool
	// Logger receives a failed send's warning.
	Logger *slog.Logger
}

// NewProxy makes b, a broker of one group, a Proxy. When b is a
// *raft.Node, what the leader had applied when it answered is noted on it
// (raft.Node.NoteWritten), as a Host notes it on its replica.
func NewProxy(b Single, o ProxyOptions) *Proxy {
	n, _ := b.(*raft.Node)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Proxy{b: b, n: n, o: o}
}

// oneGroup is the group of a node that runs one.
const oneGroup uint32 = 1

// Propose proposes c here or on the leader (see Proxy). A leader this
// node has not learnt the HTTP address of yet (it was elected a moment
// ago, and its first entry, command.Announce, brings the address) is
// waited for as a Host waits for it (awaitLeader), and only then is the
// command left to the edge.
func (p *Proxy) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	if p.o.Forward == nil || ctx.Value(noRelay{}) != nil || !command.Relayable(c) {
		return p.b.Propose(ctx, c)
	}
	var entry []byte // encoded once, on the first send
	return awaitLeader(ctx, func() (engine.Result, bool, error) {
		r, err := p.b.Propose(ctx, c)
		if !errors.Is(err, raft.ErrNotLeader) {
			return r, false, err
		}
		st := p.b.Status()
		switch {
		case st.Leader == st.ID:
			return r, false, err
		case st.LeaderHTTP == "":
			return r, true, err // the address comes with the leader's first entry
		}
		if entry == nil {
			var eerr error
			if entry, eerr = raft.RelayEntry(c); eerr != nil {
				return r, false, err // the leader takes the client's request whole
			}
			if p.o.MaxEntry > 0 && len(entry) > p.o.MaxEntry {
				return r, false, fmt.Errorf("%w: %w", ErrNoPath, err) // ... which is smaller
			}
		}
		fr, ferr := toLeader(ctx, p.o.Forward, p.n, st.LeaderHTTP, oneGroup, entry, p.o.Logger)
		switch {
		case p.o.NoPath != nil && p.o.NoPath(ferr):
			return r, false, fmt.Errorf("%w: %w", ErrNoPath, err) // nothing was proposed
		case errors.Is(ferr, raft.ErrNotLeader):
			return r, false, err // nothing was proposed: the edge relays the request
		case errors.Is(ferr, raft.ErrForward):
			p.o.Logger.Warn("forward to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", ferr)
		}
		return fr, false, ferr
	})
}

// awaitLeader runs try until it answers for good, and answers its last
// answer: try reports whether its answer says nothing was applied and a
// moment may cure it (a group electing, a leader whose HTTP address this
// node has not learnt yet, one that has just handed over), and is then
// tried again, every 20 ms up to addressWait or the end of ctx. The one
// bounded wait for a leader of a Proxy (one group) and a Host (Host.run).
func awaitLeader(ctx context.Context, try func() (engine.Result, bool, error)) (engine.Result, error) {
	deadline := time.Now().Add(addressWait)
	for {
		r, again, err := try()
		if !again || time.Now().After(deadline) || ctx.Err() != nil {
			return r, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addressWait bounds how long a proposal waits for a new leader's address,
// which its first entry (command.Announce) brings within a commit.
const addressWait = 2 * time.Second

// noRelay, a context value (WithoutRelay), keeps a Proxy from sending a
// command on.
type noRelay struct{}

// WithoutRelay marks ctx as a request another node relayed here: a Proxy
// proposes its commands here or answers raft.ErrNotLeader, and sends none
// of them on, so that a request hops at most once. (A Host's parts for
// groups led elsewhere are its own sends, not the request's hop.)
func WithoutRelay(ctx context.Context) context.Context {
	return context.WithValue(ctx, noRelay{}, true)
}

// toLeader proposes entry (one command, raft.RelayEntry) on group g's
// leader at addr through fwd: the one way a command leaves this node for a
// leader. n is this node's replica of g, nil when it holds none.
//
// The index the leader had applied in g when it answered a command is n's
// to catch up with (Node.NoteWritten): a read here right after
// sees the write, as it would had this node proposed it (ARCHITECTURE.md,
// "Reads through any node"). A client's command (WithoutApplyWait) is
// answered at once: the read waits, not the write, which would otherwise
// wait for g's leader to tell this follower the entry committed, with its
// next message (in a group with no other traffic, hashicorp/raft's
// CommitTimeout: 50-100 ms). Any other command, and any command of the
// directory, whose state this node reads next to route, waits up to
// appliedWait until n has applied as far: for the directory's a round
// trip, since its leader publishes them (Host.ProposeEntry); a Host's own
// command in a data group (a move's step, rare) still waits for the
// group's next entry. The write is done whatever the wait gives.
func toLeader(ctx context.Context, fwd raft.Forwarder, n *raft.Node, addr string, g uint32, entry []byte, log *slog.Logger) (engine.Result, error) {
	r, applied, err := fwd.Forward(ctx, addr, g, entry)
	if err != nil || applied == 0 || n == nil {
		return r, err
	}
	n.NoteWritten(applied)
	if g != raft.Directory && ctx.Value(noApplyWait{}) != nil {
		return r, nil
	}
	if werr := AwaitApplied(ctx, n, applied, time.Now().Add(appliedWait), nil); werr != nil {
		log.Debug("forwarded command: not applied here in time", "group", g, "index", applied, "err", werr)
	}
	return r, nil
}

// appliedWait bounds toLeader's wait for this replica to catch up.
const appliedWait = 5 * time.Second

// noApplyWait, a context value (WithoutApplyWait), makes toLeader return
// without waiting for this replica to apply what it forwarded.
type noApplyWait struct{}

// WithoutApplyWait marks ctx as a client's request's (the server marks
// every command it proposes), or one whose effect the caller does not read
// next (a move's import chunks): a command of a data group it makes this
// node send to that group's leader (a Host's, or a Proxy's one group) is
// answered as soon as the leader answers, without waiting for this node's
// replica to apply it (toLeader). What this node reads of its own state afterwards
// catches up first (Node.Written): a linearizable read through its read
// index, a stale one through Written, the Host's own decisions by asking
// the leader while its replica is Behind.
func WithoutApplyWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, noApplyWait{}, true)
}
