package raft

import (
	"bytes"
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// Preparing on a follower (ARCHITECTURE.md, "Forwarding"): a push's prepare
// step (validation, message ids, segment encoding and compression) reads no
// state, so the node a client reached can do it and hand the leader a
// command ready for the log. The leader then only stamps the time and
// proposes: its serial work per pushed message is the log and the apply.

// PrepareEntry prepares c (a push) for another node to propose: it mints
// the seed, prepares c with it, and returns one log entry (package command)
// holding the prepared command with that seed and no time, which the
// proposer stamps with its own (ProposeEntry). A command that cannot be
// prepared this way is ErrNotPreparable.
func PrepareEntry(c engine.Command) ([]byte, error) {
	if _, ok := c.(engine.PushCmd); !ok {
		return nil, fmt.Errorf("%w: %T", ErrNotPreparable, c)
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
	return command.AppendEntry(nil, []command.Stamped{{Stamp: engine.Stamp{Seed: seed}, Cmd: p}}), nil
}

// RelayEntry encodes c for a Forwarder: a push is prepared here (PrepareEntry),
// the commands whose row in the table has a result codec
// (command.Relayable) go as they are.
func RelayEntry(c engine.Command) ([]byte, error) {
	if _, ok := c.(engine.PushCmd); ok {
		return PrepareEntry(c)
	}
	if !command.Relayable(c) {
		return nil, fmt.Errorf("%w: %T", ErrNotPreparable, c)
	}
	return command.AppendEntry(nil, []command.Stamped{{Cmd: c}}), nil
}

// A Forwarder proposes a command on the leader of another node's group
// (package cluster's Client does it over HTTP): entry (RelayEntry: one
// command) on group g of the node whose HTTP address is addr. It answers
// the command's result with the typed Value the command answers, and the
// index that node had applied in g when it answered. Its errors are those
// a proposal's could be, and ErrForward when the forwarding itself failed:
// the command's outcome is then unknown. A Node relays only its own HTTP
// address through it (version.go); a cluster.Host relays commands of
// groups led elsewhere.
type Forwarder interface {
	Forward(ctx context.Context, addr string, g uint32, entry []byte) (r engine.Result, applied uint64, err error)
}

// ProposeEntry proposes a command another node sent (RelayEntry) on
// group g, which must be this node's, and answers as Propose does.
func (n *Node) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	if g != n.group {
		return engine.Result{}, fmt.Errorf("%w: group %d is not this node's (%d)", engine.ErrInvalid, g, n.group)
	}
	return n.proposeEntry(ctx, entry)
}

// proposeEntry proposes entry, one command another node sent. A prepared
// push is proposed as the bytes it came as (command.Stamped.Raw), with
// the seed it was prepared with and this node's time written over the
// sender's: it is read once to check that it decodes (the log must never
// hold what this node's own FSM cannot read), never encoded again. Any
// other command is decoded and proposed as Propose does; it must be one
// whose row relays (command.Relayable).
func (n *Node) proposeEntry(ctx context.Context, entry []byte) (engine.Result, error) {
	t, raw, err := command.Single(entry)
	if err != nil {
		return engine.Result{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
	}
	if err := n.leading(); err != nil {
		return engine.Result{}, err
	}
	if t == command.TypePushPrepared {
		if _, err := command.DecodeEntry(entry); err != nil {
			return engine.Result{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
		}
		// The bytes are the caller's: they are copied into the entry
		// only once proposed, which may be after the caller returned.
		return n.submit(ctx, command.Stamped{Raw: bytes.Clone(raw)})
	}
	// A command's byte slices alias what it was decoded from: a copy,
	// for the same reason.
	cmds, err := command.DecodeEntry(bytes.Clone(entry))
	if err != nil {
		return engine.Result{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
	}
	c := cmds[0].Cmd
	if _, ok := c.(engine.Preparer); ok || !command.Relayable(c) {
		return engine.Result{}, fmt.Errorf("%w: %T", ErrNotPreparable, c)
	}
	return n.Propose(ctx, c)
}

// ProposeEntry is Node.ProposeEntry on the local engine (group 1).
func (l *Local) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	if err := ctx.Err(); err != nil {
		return engine.Result{}, err
	}
	if g != 1 {
		return engine.Result{}, fmt.Errorf("%w: group %d is not this node's (1)", engine.ErrInvalid, g)
	}
	cmds, err := command.DecodeEntry(bytes.Clone(entry))
	switch {
	case err != nil:
		return engine.Result{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
	case len(cmds) != 1:
		return engine.Result{}, fmt.Errorf("%w: %d commands", ErrNotPreparable, len(cmds))
	}
	if pp, ok := cmds[0].Cmd.(*engine.PreparedPush); ok {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.apply(pp, cmds[0].Stamp.Seed)
	}
	if _, ok := cmds[0].Cmd.(engine.Preparer); ok || !command.Relayable(cmds[0].Cmd) {
		return engine.Result{}, fmt.Errorf("%w: %T", ErrNotPreparable, cmds[0].Cmd)
	}
	return l.Propose(ctx, cmds[0].Cmd)
}
