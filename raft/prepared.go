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
// proposer stamps with its own (ProposePrepared). A command that cannot be
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

// preparedCommand decodes what PrepareEntry made: exactly one prepared push.
// The entry is copied first, since the command's bytes alias it and may
// outlive the caller's buffer (a proposal abandoned by its context is still
// encoded by the proposer later).
func preparedCommand(entry []byte) (engine.Command, engine.ID, error) {
	cmds, err := command.DecodeEntry(bytes.Clone(entry))
	if err != nil {
		return nil, engine.ID{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
	}
	if len(cmds) != 1 {
		return nil, engine.ID{}, fmt.Errorf("%w: %d commands", ErrNotPreparable, len(cmds))
	}
	pp, ok := cmds[0].Cmd.(*engine.PreparedPush)
	if !ok {
		return nil, engine.ID{}, fmt.Errorf("%w: %T", ErrNotPreparable, cmds[0].Cmd)
	}
	return pp, cmds[0].Stamp.Seed, nil
}

// ProposePrepared proposes a command another node prepared (PrepareEntry),
// stamped with its seed and this node's time, and returns its result as
// Propose does.
func (n *Node) ProposePrepared(ctx context.Context, entry []byte) (engine.Result, error) {
	if err := n.leading(); err != nil {
		return engine.Result{}, err
	}
	c, seed, err := preparedCommand(entry)
	if err != nil {
		return engine.Result{}, err
	}
	return n.propose(ctx, c, seed)
}

// ProposePrepared is Node.ProposePrepared on the local engine.
func (l *Local) ProposePrepared(ctx context.Context, entry []byte) (engine.Result, error) {
	if err := ctx.Err(); err != nil {
		return engine.Result{}, err
	}
	c, seed, err := preparedCommand(entry)
	if err != nil {
		return engine.Result{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.apply(c, seed)
}
