package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/internal/rounds"
	"github.com/queenmq/queen/raft"
)

// ReadIndexTimeout bounds a linearizable read's wait for a read index and
// for its replica to catch up: past it the read answers 503
// read_unavailable rather than stale state. It covers an election (a
// second or two) with room to spare. It bounds a stale read's wait for
// the writes this node relayed (Settle) too.
const ReadIndexTimeout = 5 * time.Second

// readRetry is how long a read waits before asking again when no leader
// could be asked (none known yet, or the one asked had just lost office).
const readRetry = 20 * time.Millisecond

// ReadOptions is what Reads needs from the server.
type ReadOptions struct {
	// Ctx is the context of every wait (the server's).
	Ctx context.Context
	// Ask asks the leader of n's group for its read index; it is shared by
	// concurrent reads, one ask per group at a time.
	Ask func(ctx context.Context, n *raft.Node) (uint64, error)
	// Closed says the cluster plane is closed (no cluster secret): a
	// follower cannot ask its leader, and answers Refused at once.
	Closed bool
	// Refused is the error of a read this node cannot confirm with its
	// leader (Ask returns it when the leader refused): the server then
	// relays the read whole. It is returned as it is.
	Refused error
	// Unavailable is the error of a read no leader confirmed in time, with
	// the client's text.
	Unavailable func(msg string) error
	Metrics     *metrics.Set
	Logger      *slog.Logger
	// Hosts, when set, says whether this node serves group g from its own
	// replica now (cluster.Host.Hosts). A replica of a group it does not host
	// is idle, applying nothing: it is never waited for, since the broker
	// reads that group from its leader, which answers linearizably. Nil:
	// every replica is hosted.
	Hosts func(g uint32) bool
}

// Reads is the server's half of linearizable reads and of
// read-your-writes through a relay: this node's replicas, and one round of
// asks per group of them. A nil *Reads is a broker without replicas, whose
// reads are linearizable as they are: every method returns at once.
type Reads struct {
	o        ReadOptions
	replicas func() []*raft.Node // this node's replicas as they are now: a Host opens and closes them
	mu       sync.Mutex
	asks     map[uint32]groupAsks // by group, made on first use (ask)
	wait     *metrics.PrometheusHistogram
	stale    *metrics.Counter
	slow     *metrics.Counter
}

// NewReads makes linearizable the reads of a node holding replicas (as
// replicas returns them on each read).
func NewReads(replicas func() []*raft.Node, o ReadOptions) *Reads {
	set := o.Metrics
	r := &Reads{o: o, replicas: replicas, asks: map[uint32]groupAsks{},
		wait:  set.GetOrCreatePrometheusHistogram(`queen_read_index_wait_seconds`),
		stale: set.GetOrCreateCounter(`queen_reads_total{consistency="stale"}`),
		slow:  set.GetOrCreateCounter(`queen_applied_wait_timeouts_total`)}
	return r
}

// groupAsks is a group's round of asks, through the replica it was made
// for.
type groupAsks struct {
	n      *raft.Node
	rounds *rounds.Rounds[uint64]
}

// ask asks the leader of n's group for its read index, one round of asks
// at a time per group. The round asks through the replica it was made
// for: a replica the Host closed and opened again (a removal undone, a
// replica placed here again) is another Node, so it gets a round of its
// own. One kept for the group would ask through the closed replica, which
// knows no leader, for good: the new replica never caught up to serve.
func (r *Reads) ask(ctx context.Context, n *raft.Node) (uint64, error) {
	r.mu.Lock()
	a := r.asks[n.GroupID()]
	if a.n != n {
		a = groupAsks{n: n, rounds: rounds.New(ReadIndexTimeout, func(ctx context.Context) (uint64, error) { return r.o.Ask(ctx, n) })}
		r.asks[n.GroupID()] = a
	}
	r.mu.Unlock()
	return a.rounds.Do(ctx)
}

// Replica is this node's replica of group g, nil when it holds none.
func (r *Reads) Replica(g uint32) *raft.Node {
	if r == nil {
		return nil
	}
	for _, n := range r.replicas() {
		if n.GroupID() == g {
			return n
		}
	}
	return nil
}

// Barrier readies a read of every group this node holds a replica of
// (BarrierGroups naming none): for a linearizable one (stale false) it
// returns once every replica of this node has applied what its group's
// leader had applied when it was called. For a stale read (which it
// counts) it returns once this node has applied the writes it relayed
// (Settle), at once when it relayed none lately. An error is the read's
// answer: Refused, or Unavailable when no leader confirmed in time.
func (r *Reads) Barrier(stale bool) error { return r.BarrierGroups(stale, nil, nil) }

// BarrierGroups is Barrier for a read of some groups only: it waits for
// this node's replicas of groups (nil or empty: every replica, as
// Barrier), then, when then is set, for its replicas of the groups then
// names, asked once the first have caught up (none: nothing more). A read
// of one queue names the directory, then the queue's group as the
// directory just caught up places it: so a read of a queue in a healthy
// group does not wait for an unrelated group that has no leader. A group
// this node holds no replica of, or does not host (ReadOptions.Hosts), is
// not waited for: its reads go to its leader, which answers them
// linearizably. The wait is bounded by one ReadIndexTimeout for both
// steps. A stale read waits for what this node relayed to the named groups
// (Settle's floor, each replica's raft.Node.Written), no other.
func (r *Reads) BarrierGroups(stale bool, groups []uint32, then func() []uint32) error {
	switch {
	case r == nil:
		return nil
	case stale:
		r.stale.Inc()
		// This node's own writes, as relayed.
		deadline := time.Now().Add(ReadIndexTimeout)
		if r.settle(r.replicasOf(groups), deadline) && then != nil {
			if more := then(); len(more) > 0 {
				r.settle(r.replicasOf(more), deadline)
			}
		}
		return nil
	}
	start := time.Now()
	c, cancel := context.WithTimeout(r.o.Ctx, ReadIndexTimeout)
	defer cancel()
	err := r.catchUpAll(c, r.replicasOf(groups))
	if err == nil && then != nil {
		if more := then(); len(more) > 0 {
			err = r.catchUpAll(c, r.replicasOf(more))
		}
	}
	r.wait.UpdateDuration(start)
	return err
}

// replicasOf is this node's replicas of groups, every one of them when
// groups is empty.
func (r *Reads) replicasOf(groups []uint32) []*raft.Node {
	reps := r.replicas()
	if len(groups) == 0 {
		return reps
	}
	var of []*raft.Node
	for _, n := range reps {
		if slices.Contains(groups, n.GroupID()) {
			of = append(of, n)
		}
	}
	return of
}

// catchUpAll catches up reps (CatchUp), together, and joins their errors.
func (r *Reads) catchUpAll(ctx context.Context, reps []*raft.Node) error {
	switch len(reps) {
	case 0:
		return nil
	case 1:
		return r.CatchUp(ctx, reps[0])
	}
	errs := make([]error, len(reps))
	var wg sync.WaitGroup
	for i, n := range reps {
		wg.Go(func() { errs[i] = r.CatchUp(ctx, n) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hosted reports whether n's group is served from n here (ReadOptions.Hosts).
func (r *Reads) hosted(n *raft.Node) bool { return r.o.Hosts == nil || r.o.Hosts(n.GroupID()) }

// CatchUp waits until n has applied its group's read index; at once for
// a group this node does not host (its reads go to the group's leader),
// and as soon as it stops hosting it: a replica a replica step removed from
// its group applies nothing more, and until this node's directory says so
// it is hosted still; waiting for it held every linearizable read of the
// node for ReadIndexTimeout, then answered 503 (the chaos suite, seed
// 819321041: six seconds of read_unavailable through one node).
func (r *Reads) CatchUp(ctx context.Context, n *raft.Node) error {
	var last error
	for {
		if !r.hosted(n) {
			return nil
		}
		idx, err := n.ReadIndex(ctx) // the leader's own, confirmed
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrNoLeader) {
			if r.o.Closed {
				return r.o.Refused // the cluster plane is closed
			}
			idx, err = r.ask(ctx, n)
		}
		if err == nil {
			// A write this node relayed was answered at an index the
			// leader had applied then: never above the read index asked
			// since, but the larger of the two is waited for all the same.
			if err = r.waitApplied(ctx, n, max(idx, n.Written())); err == nil {
				return nil
			}
		}
		if errors.Is(err, r.o.Refused) {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
			return r.o.Unavailable(fmt.Sprintf(
				"Group %d: no leader confirmed this read within %s (%v); retry, or ask ?consistency=stale for this node's state as it is",
				n.GroupID(), ReadIndexTimeout, last))
		case <-time.After(readRetry):
		}
	}
}

// waitApplied waits until n has applied index, nil also once this node
// stops hosting n's group: it looks again every hostedCheck.
func (r *Reads) waitApplied(ctx context.Context, n *raft.Node, index uint64) error {
	for {
		c, cancel := context.WithTimeout(ctx, hostedCheck)
		err := n.WaitApplied(c, index)
		cancel()
		switch {
		case err == nil || !r.hosted(n):
			return nil
		case ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded):
			return err
		}
	}
}

// hostedCheck is how often a read waiting for a replica asks whether this
// node still hosts its group.
const hostedCheck = 250 * time.Millisecond

// Stamp sets cluster.AppliedHeader on the answer to a request another
// node relayed here: "group:index" for each of this node's replicas,
// comma-separated, read as the request was served. The relaying node
// notes it (NoteApplied): its reads wait until it has applied as far.
func (r *Reads) Stamp(h *fasthttp.ResponseHeader) {
	if r == nil {
		return
	}
	var b []byte
	for _, n := range r.replicas() {
		if !r.hosted(n) {
			continue // a replica not served from: its index is no one's to wait for
		}
		b = cluster.AppendApplied(b, n.GroupID(), n.Applied())
	}
	h.SetBytesV(cluster.AppliedHeader, b)
}

// NoteApplied records, for a request this node relayed, the index each
// group's node that answered resp had applied (cluster.AppliedHeader):
// this node's reads of those groups see the write before they answer
// (Barrier: Node.Written). The answer goes out at once. The header is
// removed: it is for this node, not its client.
func (r *Reads) NoteApplied(resp *fasthttp.Response) {
	v := resp.Header.Peek(cluster.AppliedHeader)
	if r != nil {
		for g, idx := range cluster.ParseApplied(v) {
			r.NoteIndex(g, idx)
		}
	}
	resp.Header.Del(cluster.AppliedHeader)
}

// NoteIndex is NoteApplied for a command forwarded to group g's leader
// (package cluster), which answered with its applied index there.
func (r *Reads) NoteIndex(g uint32, index uint64) {
	if n := r.Replica(g); n != nil && index > 0 {
		n.NoteWritten(index)
	}
}

// Settle waits until every replica this node serves has applied the
// writes it relayed and answered (Node.Written): for a stale read, and
// for an answer this node writes from its own state right after a write
// (a maintenance switch). Past ReadIndexTimeout it returns anyway, and
// the wait is counted (queen_applied_wait_timeouts_total).
//
// A replica that is behind asks its leader's read index meanwhile (its
// answer is not waited for, nor its index): the leader, answering,
// publishes its applied index (raft.Node.Publish), so this follower
// learns that its write committed within a round trip, where
// hashicorp/raft would tell it with the group's next entry, CommitTimeout
// (50-100 ms) later in a quiet group. What the read waits for is the same.
func (r *Reads) Settle() {
	if r == nil {
		return
	}
	r.settle(r.replicas(), time.Now().Add(ReadIndexTimeout))
}

// settle is Settle for reps: false (and counted) when deadline came first.
func (r *Reads) settle(reps []*raft.Node, deadline time.Time) bool {
	for _, n := range reps {
		if !r.awaitIndexUntil(n, n.Written(), deadline) {
			return false
		}
	}
	return true
}

// awaitIndexUntil waits until n has applied index, or deadline; false
// (and counted) when the deadline came first. A replica this node does not
// host is never waited for.
func (r *Reads) awaitIndexUntil(n *raft.Node, index uint64, deadline time.Time) bool {
	if !r.hosted(n) {
		return true
	}
	var nudge func(context.Context)
	if !r.o.Closed {
		// Only the leader's Publish is wanted: the answer is dropped, and
		// the goroutine leaves with the wait.
		nudge = func(c context.Context) { _, _ = r.ask(c, n) }
	}
	if err := cluster.AwaitApplied(r.o.Ctx, n, index, deadline, nudge); err != nil {
		r.slow.Inc()
		r.o.Logger.Debug("relayed write: not applied here in time", "group", n.GroupID(), "index", index, "err", err)
		return false
	}
	return true
}
