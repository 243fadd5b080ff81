package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// A Relay has the leader of group g, whose HTTP address is addr, propose
// entry (RelayEntry: one command) and returns the command's result, with
// the typed Value the command answers. Its errors are those a proposal's
// could be, and ErrForward when the relay itself failed: the command's
// outcome is then unknown.
type Relay func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error)

// SetRelay sets how this host reaches the other groups' leaders; without
// one, a command it must relay is answered NotLeaderError or, split over
// groups, ErrSpansGroups.
func (h *Host) SetRelay(r Relay) { h.relay.Store(&r) }

// RelayEntry encodes c for a Relay: a push is prepared here (PrepareEntry),
// the commands whose row in the table has a result codec
// (command.Relayed) go as they are.
func RelayEntry(c engine.Command) ([]byte, error) {
	if _, ok := c.(engine.PushCmd); ok {
		return PrepareEntry(c)
	}
	if !command.Relayed(c) {
		return nil, fmt.Errorf("%w: %T", ErrNotPreparable, c)
	}
	return command.AppendEntry(nil, []command.Stamped{{Cmd: c}}), nil
}

// ProposeEntry proposes, on group g, a command another node relayed
// (RelayEntry): a prepared push with the seed it was prepared with, or a
// command that relays (command.Relayed). It answers as Propose does; ErrNotLeader (a
// NotLeaderError) when this node does not lead g.
func (h *Host) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	n := h.Group(g)
	if n == nil {
		return engine.Result{}, fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	}
	cmds, err := command.DecodeEntry(bytes.Clone(entry))
	switch {
	case err != nil:
		return engine.Result{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
	case len(cmds) != 1:
		return engine.Result{}, fmt.Errorf("%w: %d commands", ErrNotPreparable, len(cmds))
	}
	if err := n.leading(); err != nil {
		return engine.Result{}, h.groupError(g, err)
	}
	var r engine.Result
	switch c := cmds[0].Cmd.(type) {
	case *engine.PreparedPush:
		r, err = n.propose(ctx, c, cmds[0].Stamp.Seed)
	default:
		if !command.Relayed(c) {
			return engine.Result{}, fmt.Errorf("%w: %T", ErrNotPreparable, c)
		}
		r, err = n.Propose(ctx, c)
	}
	return r, h.groupError(g, err)
}

// ProposePrepared proposes a push another node prepared (PrepareEntry) on
// the group of its queues, which must be one.
func (h *Host) ProposePrepared(ctx context.Context, entry []byte) (engine.Result, error) {
	c, _, err := preparedCommand(entry)
	if err != nil {
		return engine.Result{}, err
	}
	var g uint32
	for _, pg := range c.(*engine.PreparedPush).Groups {
		q := h.Placement(pg.Queue)
		if g != 0 && q != g {
			return engine.Result{}, fmt.Errorf("%w: a prepared push for several groups", ErrNotPreparable)
		}
		g = q
	}
	if g == 0 {
		return engine.Result{}, fmt.Errorf("%w: a prepared push to queues not placed", ErrNotPreparable)
	}
	return h.ProposeEntry(ctx, g, entry)
}

// run proposes c on group g here when this node leads g, else relays it
// to g's leader. A leader this node has not learnt the address of yet (it
// was elected a moment ago) is waited for, up to addressWait.
func (h *Host) run(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	n := h.nodes[g]
	relay := h.relay.Load()
	deadline := time.Now().Add(addressWait)
	for {
		r, err := n.Propose(ctx, c)
		if !errors.Is(err, ErrNotLeader) || relay == nil {
			return r, h.groupError(g, err)
		}
		st := n.Status()
		if addr := h.httpOf(st); addr != "" && st.Leader != st.ID {
			entry, err := RelayEntry(c)
			if err != nil {
				return engine.Result{}, err
			}
			return (*relay)(ctx, addr, g, entry)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r, h.groupError(g, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addressWait bounds how long a relay waits for a new leader's address,
// which its first entry (command.Announce) brings within a commit.
const addressWait = 2 * time.Second

// httpOf is the HTTP address of the leader st names: the group's own
// record, else another group's (a node announces its address in each group
// it comes to lead, and a leader new to this group may not have yet).
func (h *Host) httpOf(st Status) string {
	if st.LeaderHTTP != "" || st.Leader == "" {
		return st.LeaderHTTP
	}
	for _, n := range h.nodes {
		if a := n.engine.ClusterValue(command.HTTPKey(st.Leader)); a != "" {
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
//     attempt stored is answered duplicate, not stored twice. A queue with
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
			return r, nil
		}
		unknown = unknown || !NotApplied(err)
		retry := Transient(err) && (!unknown || a.retryable(h.nodes[g].engine)) &&
			ctx.Err() == nil && time.Now().Before(deadline) &&
			(h.relay.Load() != nil || !errors.Is(err, ErrNotLeader))
		if !retry {
			if unknown {
				return engine.Result{}, &UnknownError{Group: g, Err: err}
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
// through the relay to g's leader; ErrNotLeader (nothing proposed) when
// that leader's address is not known yet.
func (h *Host) attempt(ctx context.Context, g uint32, a *attempt) (engine.Result, error) {
	n := h.nodes[g]
	if n.leading() == nil {
		if a.seed == (engine.ID{}) {
			return n.Propose(ctx, a.cmd)
		}
		return n.propose(ctx, a.cmd, a.seed)
	}
	relay := h.relay.Load()
	st := n.Status()
	addr := h.httpOf(st)
	if relay == nil || addr == "" || st.Leader == st.ID {
		return engine.Result{}, n.notLeader()
	}
	if a.entry == nil {
		a.entry = command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Seed: a.seed}, Cmd: a.cmd}})
	}
	return (*relay)(ctx, addr, g, a.entry)
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
		if !command.Relayed(c) {
			return nil, fmt.Errorf("%w: %T", ErrNotPreparable, c)
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
// node's replica of the group (e) has them (a queue not created yet will
// be, with the default window).
func (a *attempt) retryable(e *engine.Engine) bool {
	pp, ok := a.cmd.(*engine.PreparedPush)
	if !ok {
		return false
	}
	for _, pg := range pp.Groups {
		if cfg, ok := e.QueueConfig(pg.Queue); ok && cfg.Get(engine.OptDedupWindowSeconds) == 0 {
			return false
		}
	}
	return true
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
