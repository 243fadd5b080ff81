package raft

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

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
// the other relayable commands (relayable says which) go as they are.
func RelayEntry(c engine.Command) ([]byte, error) {
	if _, ok := c.(engine.PushCmd); ok {
		return PrepareEntry(c)
	}
	if !relayable(c) {
		return nil, fmt.Errorf("%w: %T", ErrNotPreparable, c)
	}
	return command.AppendEntry(nil, []command.Stamped{{Cmd: c}}), nil
}

// relayable reports the commands a Host relays besides pushes: parts of
// split acks, placements and their lookups, the commands sent to every
// group, and DLQ replays (a redrive walks rows of every group).
func relayable(c engine.Command) bool {
	switch c.(type) {
	case engine.AckCmd, engine.DeleteGroupCmd, engine.UpdateSubscriptionCmd, engine.ReplayCmd,
		command.PlaceQueue, command.LookupQueue, command.LookupPartition, command.LookupLease:
		return true
	}
	return false
}

// ProposeEntry proposes, on group g, a command another node relayed
// (RelayEntry): a prepared push with the seed it was prepared with, or a
// relayable command. It answers as Propose does; ErrNotLeader (a
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
		if !relayable(c) {
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
