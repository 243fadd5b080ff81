package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// A Forwarder is how a Host reaches the other nodes (Client does it over
// HTTP). Forward (raft.Forwarder) proposes a command on the leader of a
// group another node leads.
//
// Read asks the Host at addr for a read of group g this node does not
// host (hostremote.go): req as the Host encodes it, answered by that
// Host's AnswerRead. Its errors are AnswerRead's (a NotLeaderError from a
// node that does not lead g), and raft.ErrForward when the call failed.
//
// StartMove asks the Host at addr to move queue to group to (its
// StartMove): the balancer's way to have a queue moved by a voter of its
// group when the directory's leader is none (balance.go). Its errors are
// StartMove's (a NotLeaderError from a node that hosts no replica of the
// queue's group), and raft.ErrForward when the call failed: whether the move
// began is then unknown, and the directory's move records tell.
type Forwarder interface {
	raft.Forwarder
	Read(ctx context.Context, addr string, g uint32, req []byte) ([]byte, error)
	StartMove(ctx context.Context, addr, queue string, to uint32) error
}

// forward proposes entry on group g's leader at addr (toLeader, with
// this node's replica of g when it serves one).
func (h *Host) forward(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error) {
	return toLeader(ctx, h.opts.Forward, h.served(g), addr, g, entry, h.opts.Node.Logger)
}

// ProposeEntry proposes, on group g, a command another node relayed
// (RelayEntry), as Node.ProposeEntry does. ErrNotLeader (a
// NotLeaderError) when this node does not lead g.
//
// A directory command is then published (Node.Publish): the node that
// relayed it waits until its own replica has applied it (forward), and
// hashicorp/raft would tell that follower the entry committed only with
// the directory's next entry, CommitTimeout later in a quiet directory
// (the first push to a new queue through a follower took ~80 ms). The
// barrier Publish appends carries the commit index to every follower
// within a round trip. A data group's command is not published: its
// relaying node answers its client without waiting, and a read there that
// finds its replica behind asks this leader's read index, which publishes
// (server/relay, Reads.Settle).
func (h *Host) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	if int(g) >= len(h.nodes) {
		return engine.Result{}, fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	}
	n := h.replica(g)
	if n == nil {
		return engine.Result{}, h.groupError(g, raft.ErrNotLeader) // held elsewhere: the asker looks again
	}
	r, err := n.ProposeEntry(ctx, g, entry)
	if g == raft.Directory && err == nil {
		n.Publish(n.Applied())
	}
	return r, h.groupError(g, err)
}

// run proposes c on group g here when this node leads g, else relays it
// to g's leader. A group electing (no leader), a leader this node has not
// learnt the address of yet (it was elected a moment ago), or one that
// refuses (it has just handed over) is waited for, up to addressWait:
// each of those answers says nothing was applied.
func (h *Host) run(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	var entry []byte // encoded once, on the first relay
	return awaitLeader(ctx, func() (engine.Result, bool, error) {
		r, err := engine.Result{}, error(raft.ErrNotLeader)
		if n := h.served(g); n != nil {
			r, err = n.Propose(ctx, c)
		}
		electing := errors.Is(err, raft.ErrNoLeader)
		if !electing && (!errors.Is(err, raft.ErrNotLeader) || h.opts.Forward == nil) {
			return r, false, h.groupError(g, err)
		}
		if st := h.leaderOf(g); !electing && st.LeaderHTTP != "" && st.Leader != h.opts.Node.ID {
			if entry == nil {
				if entry, err = raft.RelayEntry(c); err != nil {
					return engine.Result{}, false, err
				}
			}
			r, err := h.forward(ctx, st.LeaderHTTP, g, entry)
			// A leader that has just handed over refuses, and nothing
			// was applied: the next look finds its successor. So does one
			// that has just stepped down and knows no leader yet.
			refused := errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrNoLeader)
			return r, refused, err
		}
		return r, true, h.groupError(g, err)
	})
}

// httpOf is the HTTP address of the leader st names: the group's own
// record, else another group's (a node announces its address in each group
// it comes to lead, and a leader new to this group may not have yet).
func (h *Host) httpOf(st raft.Status) string {
	if st.LeaderHTTP != "" || st.Leader == "" {
		return st.LeaderHTTP
	}
	for _, n := range h.Replicas() {
		if a := n.Engine().ClusterValue(command.HTTPKey(st.Leader)); a != "" {
			return a
		}
	}
	return ""
}

// runPart proposes a part of a split push or ack on group g, here or
// relayed, with the same command on every attempt, and retries, until
// HostOptions.PartWait, what a retry may cure (Transient):
//
//   - after an attempt certainly not applied (NotApplied: no leader yet,
//     a transfer, a leader's refusal), always;
//   - after one whose outcome is unknown (a relay that failed after its
//     request was sent, a timeout, lost leadership, a fault), only a push,
//     made safe by its transaction ids: the retry is the same prepared
//     entry with its minted ids probed for too, so an item the first
//     attempt stored is not stored twice. Its duplicate names the message
//     id this push minted for it, which no other push has, and is answered
//     queued (ownDuplicates): the client sent it once. A queue with
//     dedup off (dedupWindowSeconds 0) has no such safety: its push is not
//     retried, nor is an ack (a retried ack may answer "already
//     committed" for the ack that committed it).
//
// Its error is certain (NotApplied) or an UnknownError: any attempt whose
// outcome was unknown makes it unknown, whatever the later ones answered.
func (h *Host) runPart(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	a, err := newAttempt(c)
	if err != nil {
		return engine.Result{}, err // prepared here: nothing was proposed
	}
	deadline := time.Now().Add(h.opts.PartWait)
	unknown := false
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 400*time.Millisecond) {
		r, err := h.attempt(ctx, g, a)
		if err == nil {
			err = r.Err
		}
		if err == nil {
			if unknown {
				r = a.ownDuplicates(r)
			}
			return r, nil
		}
		unknown = unknown || !raft.NotApplied(err)
		// A move's refusal is not retried on the same group: the caller
		// routes the items afresh (retryMovingItems).
		retry := raft.Transient(err) && !errors.Is(err, engine.ErrQueueMoving) && (!unknown || a.retryable(h, g)) &&
			ctx.Err() == nil && time.Now().Before(deadline) &&
			(h.opts.Forward != nil || !errors.Is(err, raft.ErrNotLeader))
		if !retry {
			if unknown {
				return engine.Result{}, &raft.UnknownError{Group: g, Err: err}
			}
			return r, h.groupError(g, err)
		}
		if unknown {
			a.probeMinted()
		}
		time.Sleep(wait)
	}
}

// attempt proposes a on group g once: here when this node leads g, else
// through the Forwarder to g's leader; ErrNotLeader (nothing proposed) when
// that leader's address is not known yet.
func (h *Host) attempt(ctx context.Context, g uint32, a *attempt) (engine.Result, error) {
	if n := h.served(g); n != nil && n.IsLeader() {
		if a.seed == (engine.ID{}) {
			return n.Propose(ctx, a.cmd)
		}
		return n.ProposePrepared(ctx, a.cmd, a.seed)
	}
	st := h.leaderOf(g)
	addr := st.LeaderHTTP
	if h.opts.Forward == nil || addr == "" || st.Leader == h.opts.Node.ID {
		if st.Leader == "" {
			return engine.Result{}, raft.ErrNoLeader
		}
		return engine.Result{}, raft.ErrNotLeader
	}
	if a.entry == nil {
		a.entry = command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Seed: a.seed}, Cmd: a.cmd}})
	}
	return h.forward(ctx, addr, g, a.entry)
}

// attempt is a part of a split command as runPart proposes it on every
// attempt: a push prepared once, with its seed (its message ids and
// minted transaction ids the same each time), or an ack as it is.
type attempt struct {
	cmd   engine.Command
	seed  engine.ID // zero: cmd is not prepared, and proposed with Propose
	entry []byte    // cmd as relayed, made when first relayed
	// probed is set once the minted ids are probed for (probeMinted).
	probed bool
}

func newAttempt(c engine.Command) (*attempt, error) {
	if _, ok := c.(engine.PushCmd); !ok {
		if !command.Relayable(c) {
			return nil, fmt.Errorf("%w: %T", raft.ErrNotPreparable, c)
		}
		return &attempt{cmd: c}, nil
	}
	u, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("raft: mint seed: %w", err)
	}
	seed := engine.ID(u)
	p, err := c.(engine.Preparer).Prepare(seed)
	if err != nil {
		return nil, err
	}
	return &attempt{cmd: p, seed: seed}, nil
}

// retryable reports whether a may be proposed again after an attempt
// whose outcome is unknown: a push to queues that all dedup, as this
// node's replica of group g has them (a queue not created yet will be,
// with the default window), or as g's leader has them for a group this
// node does not host (it holds no replica of it) or whose replica
// here has not applied a write this node relayed yet (Node.Behind: a
// configure a moment ago); when that leader cannot be asked, not.
func (a *attempt) retryable(h *Host, g uint32) bool {
	pp, ok := a.cmd.(*engine.PreparedPush)
	if !ok {
		return false
	}
	for _, pg := range pp.Groups {
		var (
			cfg   engine.Config
			found bool
			err   error
		)
		if n := h.served(g); n != nil && !n.Behind() {
			cfg, found = n.Engine().QueueConfig(pg.Queue)
		} else {
			cfg, found, err = remoteGroup{h: h, g: g}.checkedQueueConfig(pg.Queue)
		}
		if err != nil || found && cfg.Get(engine.OptDedupWindowSeconds) == 0 {
			return false
		}
	}
	return true
}

// ownDuplicates answers queued, in r (a retried push's answer), the items
// answered duplicate of the very message this push minted for them: an
// earlier attempt, whose answer was lost, stored them. A duplicate of any
// other message (a client's earlier push, or an earlier item of the same
// request) stays one.
func (a *attempt) ownDuplicates(r engine.Result) engine.Result {
	pp, ok := a.cmd.(*engine.PreparedPush)
	res, _ := r.Value.([]engine.PushResult)
	if !ok || len(res) != len(pp.Items) {
		return r
	}
	res = slices.Clone(res)
	for i := range res {
		if res[i].Status == engine.Duplicate && res[i].MessageID == pp.Items[i].MessageID {
			res[i].Status = engine.Queued
		}
	}
	r.Value = res
	return r
}

// probeMinted makes a's items whose transaction ids were minted probed
// for, as a client's are: an earlier attempt may have stored them. A copy,
// since an earlier attempt's proposal may still read the command.
func (a *attempt) probeMinted() {
	if a.probed {
		return
	}
	a.probed = true
	pp := a.cmd.(*engine.PreparedPush)
	again := *pp
	again.Items = slices.Clone(pp.Items)
	for i := range again.Items {
		again.Items[i].Minted = false
	}
	a.cmd, a.entry = &again, nil
}
