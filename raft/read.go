package raft

import (
	"context"
	"sync"
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

// ReadIndex returns an index at which this group's state, on any of its
// replicas, holds every command a client was answered for before the call:
// this node's applied index once LeaderRead has passed. A follower that
// has applied that far may serve a linearizable read from its own state
// (the read index of the Raft thesis, §6.4, with the applied index rather
// than the commit index, since a command is answered only once applied by
// the leader that answers it). Concurrent callers share one LeaderRead,
// which starts after each of them arrived (internal/rounds). It returns
// ErrNotLeader on a follower.
func (n *Node) ReadIndex(ctx context.Context) (uint64, error) {
	if err := n.leading(); err != nil {
		return 0, err
	}
	return n.readIndex.Do(ctx)
}

// confirmRead is one round of ReadIndex.
func (n *Node) confirmRead(ctx context.Context) (uint64, error) {
	if err := n.LeaderRead(ctx); err != nil {
		return 0, err
	}
	return n.engine.Applied(), nil
}

// Publish makes the followers learn soon that index, applied here (a read
// index this leader answered a follower), is committed: that follower
// waits to apply it, and hashicorp/raft tells a follower the commit index
// only with the next entries it sends it (its heartbeats carry none), which
// come with the next command, or CommitTimeout later (50-100 ms) in a group
// with no other traffic. So it appends a barrier (a no-op entry, never
// applied to the engine) unless one appended in this term after index was
// applied here is on its way already: the append request that carries the
// barrier carries the commit index as it is when it is sent, at or past
// index. A barrier does not move the engine's applied index, so asks at
// rest append one barrier, not one each; under writes, at most one per
// read-index round that found the applied index moved. It changes nothing
// but when the followers learn the index: what they wait for is the same.
// It returns at once; a barrier that fails (this node no longer leads) is
// forgotten, and the next ask appends another.
func (n *Node) Publish(index uint64) {
	term := n.raft.CurrentTerm()
	at := n.engine.Applied() // at or past index, and committed
	p := &n.publish
	p.mu.Lock()
	if p.term == term && index <= p.covered {
		p.mu.Unlock()
		return
	}
	p.term, p.covered = term, at
	p.mu.Unlock()
	go func() {
		if err := n.raft.Barrier(n.opts.ApplyTimeout).Error(); err != nil {
			p.mu.Lock()
			if p.term == term && p.covered == at {
				p.covered = 0 // not appended, or not by a leader: ask again
			}
			p.mu.Unlock()
		}
	}()
}

// publisher is Publish's state: the highest index a barrier of term was
// appended after.
type publisher struct {
	mu      sync.Mutex
	term    uint64
	covered uint64
}

// WaitApplied returns once this node's engine has applied index, or with
// ctx's error (or ErrShutdown) if that comes first.
func (n *Node) WaitApplied(ctx context.Context, index uint64) error {
	for {
		advanced := n.fsm.progress.next()
		if n.engine.Applied() >= index {
			return nil
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			return ErrShutdown
		}
	}
}

// NoteWritten records that a command this node relayed to its group's
// leader was answered there once that leader had applied index. The node
// answers its client at once, without waiting to apply as far: what must
// see the write here waits instead (Written), so a write through a
// follower costs the leader's latency and one hop, and only a read of this
// node's own state right after it pays for the follower's catching up.
func (n *Node) NoteWritten(index uint64) {
	for {
		w := n.written.Load()
		if index <= w || n.written.CompareAndSwap(w, index) {
			return
		}
	}
}

// Written is the highest index NoteWritten recorded: once this node has
// applied it, its state holds every write it relayed and answered. A
// linearizable read's read index is never below it; a stale read, or a
// step that decides from this node's state, waits for it (or asks the
// leader) instead.
func (n *Node) Written() uint64 { return n.written.Load() }

// Behind reports whether this node has not yet applied a write it relayed
// and answered (Written).
func (n *Node) Behind() bool { return n.engine.Applied() < n.written.Load() }

// Applied is the last Raft index this node's engine has applied.
func (n *Node) Applied() uint64 { return n.engine.Applied() }

// GroupID is the Raft group this node runs: 1 for a node opened alone,
// the Host's group id otherwise (Directory is 0).
func (n *Node) GroupID() uint32 { return n.group }

// Replicas is the node itself: the one group whose state it reads from
// (a Host has one replica per group).
func (n *Node) Replicas() []*Node { return []*Node{n} }

// progress tells waiters that the engine's applied index moved.
type progress struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next advance; nil while nobody waits
}

// next returns a channel closed at the next advance. A caller takes it
// before it reads the applied index, so an advance between the two is not
// missed.
func (p *progress) next() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	return p.ch
}

// advance wakes every waiter. It costs a lock and nothing else when nobody
// waits.
func (p *progress) advance() {
	p.mu.Lock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
	p.mu.Unlock()
}
