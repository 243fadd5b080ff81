package cluster

import (
	"context"
	"fmt"
	"strconv"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// Proposer proposes a command another node forwarded (Host).
type Proposer interface {
	ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error)
}

// Answer proposes entry on group g through p and returns the result
// encoded for the node that forwarded it, and the result itself (the
// caller counts what it did). The command's own error is the error.
func Answer(ctx context.Context, p Proposer, g uint32, entry []byte) ([]byte, engine.Result, error) {
	t, err := command.EntryType(entry)
	if err != nil {
		return nil, engine.Result{}, fmt.Errorf("%w: %w", raft.ErrNotPreparable, err)
	}
	r, err := p.ProposeEntry(ctx, g, entry)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return nil, r, err
	}
	out, err := command.AppendResult(nil, t, r.Value)
	return out, r, err
}

// ParseGroup reads a GroupHeader value.
func ParseGroup(v []byte) (uint32, error) {
	g, err := strconv.ParseUint(string(v), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must name a group", engine.ErrInvalid, GroupHeader)
	}
	return uint32(g), nil
}
