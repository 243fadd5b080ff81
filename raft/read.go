package raft

import (
	"context"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
)

// LeaderRead returns once this node may serve a read from its applied state
// that sees every command any client was answered for: it leads, a quorum
// still says so (a round of heartbeats: a deposed leader that has not
// noticed yet fails here instead of answering from stale state), and it has
// applied every entry of earlier terms (the first read of a term waits for
// a barrier). A command of this term was answered only once applied here,
// by this node, so nothing more is waited for: a read concurrent with a
// command may see it or not. It costs a heartbeat round, not a log entry.
// It returns ErrNotLeader on a follower (the server forwards).
func (n *Node) LeaderRead(ctx context.Context) error {
	if n.raft.State() != hraft.Leader {
		return n.notLeader()
	}
	timeout := n.opts.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if term := n.raft.CurrentTerm(); n.readTerm.Load() != term {
		if err := n.raft.Barrier(timeout).Error(); err != nil {
			return n.mapError(err)
		}
		n.readTerm.Store(term)
	}
	return n.mapError(n.raft.VerifyLeader().Error())
}

// readTerm is the term whose barrier LeaderRead has committed.
type readTerm = atomic.Uint64
