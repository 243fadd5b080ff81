package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server/relay"
)

// errRefused and errUnavailable stand for the server's read errors.
var (
	errRefused     = errors.New("read index refused")
	errUnavailable = errors.New("read unavailable")
)

// group is a real three-node Raft group (rafttest: the in-memory
// transport, Pebble on t.TempDir) with its leader and one follower.
type group struct {
	c        *rafttest.Cluster
	leader   *raft.Node
	follower *raft.Node
}

func newGroup(t *testing.T) *group {
	c := rafttest.MakeCluster(t, 3)
	return &group{c: c, leader: c.Leader(), follower: c.Followers()[0]}
}

// reads is the read consistency of a node holding node alone, whose asks
// go to the group's leader as the server's read-index route answers them
// (the read index, published).
func (g *group) reads(node *raft.Node, adjust func(*relay.ReadOptions)) (*relay.Reads, *metrics.Set) {
	return g.readsOf(func() []*raft.Node { return []*raft.Node{node} }, adjust)
}

// readsOf is reads of a node holding the replicas replicas returns on
// each read.
func (g *group) readsOf(replicas func() []*raft.Node, adjust func(*relay.ReadOptions)) (*relay.Reads, *metrics.Set) {
	set := metrics.NewSet()
	o := relay.ReadOptions{
		Ctx: context.Background(),
		Ask: func(ctx context.Context, _ *raft.Node) (uint64, error) {
			idx, err := g.leader.ReadIndex(ctx)
			if err == nil {
				g.leader.Publish(idx)
			}
			return idx, err
		},
		Refused:     errRefused,
		Unavailable: func(msg string) error { return fmt.Errorf("%w: %s", errUnavailable, msg) },
		Metrics:     set,
		Logger:      slog.New(slog.DiscardHandler),
	}
	if adjust != nil {
		adjust(&o)
	}
	return relay.NewReads(replicas, o), set
}

// push proposes a push of one message on the leader, and returns once the
// leader has applied it.
func (g *group) push(t *testing.T) {
	t.Helper()
	if err := g.tryPush(); err != nil {
		t.Fatalf("push: %v", err)
	}
}

// tryPush is push for a goroutine other than the test's.
func (g *group) tryPush() error {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	items := []engine.PushItem{{Queue: "q", Payload: []byte(`{"n":1}`)}}
	_, err := raft.Propose[[]engine.PushResult](c, g.leader, engine.PushCmd{Items: items})
	return err
}

// caughtUp waits until the follower has applied as far as the leader.
func (g *group) caughtUp(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.follower.Applied() < g.leader.Applied() {
		if time.Now().After(deadline) {
			t.Fatalf("follower applied %d, leader %d, after 20 s", g.follower.Applied(), g.leader.Applied())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settled runs f in its own goroutine and returns a channel that yields
// the follower's applied index as f returns.
func (g *group) settled(f func()) <-chan uint64 {
	done := make(chan uint64, 1)
	go func() {
		f()
		done <- g.follower.Applied()
	}()
	return done
}

func counter(set *metrics.Set, name string) uint64 { return set.GetOrCreateCounter(name).Get() }

// The leader's Stamp on its answer names "group:index" of what it had
// applied; the relaying follower's NoteApplied makes it the floor its
// reads wait for (raft.Node.Written), which never goes down, and takes
// the header off the client's answer. Pairs it cannot read, and groups it
// holds no replica of, are skipped.
func TestReads_StampNoteApplied(t *testing.T) {
	g := newGroup(t)
	g.push(t)
	leaderReads, _ := g.reads(g.leader, nil)
	followerReads, _ := g.reads(g.follower, nil)

	var resp fasthttp.Response
	leaderReads.Stamp(&resp.Header)
	applied := g.leader.Applied()
	want := fmt.Sprintf("%d:%d", g.leader.GroupID(), applied)
	if got := string(resp.Header.Peek(cluster.AppliedHeader)); got != want {
		t.Fatalf("Stamp wrote %q, want %q", got, want)
	}
	followerReads.NoteApplied(&resp)
	if got := g.follower.Written(); got != applied {
		t.Errorf("follower's floor %d after NoteApplied, want %d", got, applied)
	}
	if v := resp.Header.Peek(cluster.AppliedHeader); v != nil {
		t.Errorf("NoteApplied left %s %q on the client's answer", cluster.AppliedHeader, v)
	}

	resp.Header.Set(cluster.AppliedHeader, fmt.Sprintf("%d:%d,x:9,99:%d", g.follower.GroupID(), applied-1, applied+100))
	followerReads.NoteApplied(&resp)
	if got := g.follower.Written(); got != applied {
		t.Errorf("follower's floor %d after noting a lower index and other groups, want %d still", got, applied)
	}
	resp.Header.Set(cluster.AppliedHeader, fmt.Sprintf("bad,%d:%d", g.follower.GroupID(), applied+1))
	followerReads.NoteApplied(&resp)
	if got, want := g.follower.Written(), applied+1; got != want {
		t.Errorf("follower's floor %d after noting %d beside a bad pair, want %d", got, want, want)
	}
}

// A write relayed through Requests to a leader that stamps its answer
// raises the relaying follower's floor; a maintenance switch, which the
// follower reads from its own state next, is answered only once the
// follower has applied that far.
func TestReads_RelayedWriteRaisesFloor(t *testing.T) {
	g := newGroup(t)
	g.caughtUp(t)
	leaderReads, _ := g.reads(g.leader, nil)
	followerReads, _ := g.reads(g.follower, nil)
	stamped := make(chan uint64, 4)
	leaderAddr := serve(t, func(ctx *fasthttp.RequestCtx) {
		if err := g.tryPush(); err != nil { // the write the request makes
			t.Errorf("push: %v", err)
		}
		leaderReads.Stamp(&ctx.Response.Header)
		stamped <- cluster.AppliedIn(ctx.Response.Header.Peek(cluster.AppliedHeader), g.leader.GroupID())
	})
	r, _ := newRequests("", followerReads)
	handler, outcomes := relaying(r, follower(leaderAddr), 0)
	addr := serve(t, handler)

	for _, path := range []string{"/api/v1/push", "/api/v1/system/maintenance"} {
		req := new(fasthttp.Request)
		req.Header.SetMethod(fasthttp.MethodPost)
		req.SetRequestURI("http://" + addr + path)
		send(t, addr, req)
		o := receive(t, outcomes, "outcome")
		appliedThen := g.follower.Applied() // as the follower answered
		if !o.relayed || o.err != nil {
			t.Fatalf("%s: Request = %v, %v", path, o.relayed, o.err)
		}
		idx := receive(t, stamped, "stamp")
		if got := g.follower.Written(); got != idx {
			t.Errorf("%s: follower's floor %d, want the leader's stamp %d", path, got, idx)
		}
		if path == "/api/v1/system/maintenance" && appliedThen < idx {
			t.Errorf("%s: answered with the follower at %d, before it applied the write at %d", path, appliedThen, idx)
		}
	}
}

// Settle returns once this node's replica has applied the floor noted for
// it: not before the leader proposes what reaches it.
func TestReads_Settle_WaitsForFloor(t *testing.T) {
	g := newGroup(t)
	g.caughtUp(t)
	reads, set := g.reads(g.follower, nil)
	floor := g.follower.Applied() + 1
	reads.NoteIndex(g.follower.GroupID(), floor)

	done := g.settled(reads.Settle)
	g.push(t)
	if applied := receive(t, done, "Settle"); applied < floor {
		t.Errorf("Settle returned with the follower at %d, below its floor %d", applied, floor)
	}
	if got := counter(set, `queen_applied_wait_timeouts_total`); got != 0 {
		t.Errorf("queen_applied_wait_timeouts_total = %d, want 0", got)
	}
}

// A node that noted nothing settles at once, even cut off from its
// leader; one whose floor it cannot reach gives up after ReadIndexTimeout
// and counts it.
func TestReads_Settle_CutOff(t *testing.T) {
	t.Parallel() // waits out ReadIndexTimeout
	g := newGroup(t)
	g.caughtUp(t)
	g.c.Partition(g.c.Index(g.follower))
	reads, set := g.reads(g.follower, nil)

	start := time.Now()
	reads.Settle()
	if took := time.Since(start); took >= relay.ReadIndexTimeout {
		t.Errorf("Settle with nothing noted took %v", took)
	}
	if got := counter(set, `queen_applied_wait_timeouts_total`); got != 0 {
		t.Errorf("queen_applied_wait_timeouts_total = %d with nothing noted, want 0", got)
	}

	reads.NoteIndex(g.follower.GroupID(), g.follower.Applied()+1)
	g.push(t) // committed by the two others, never sent to the follower
	start = time.Now()
	reads.Settle()
	if took := time.Since(start); took < relay.ReadIndexTimeout {
		t.Errorf("Settle returned after %v with its floor out of reach, want ReadIndexTimeout (%v)", took, relay.ReadIndexTimeout)
	}
	if got := counter(set, `queen_applied_wait_timeouts_total`); got != 1 {
		t.Errorf("queen_applied_wait_timeouts_total = %d, want 1", got)
	}
}

// A stale read is counted and waits for the node's own relayed writes
// (Settle), for nothing else.
func TestReads_Barrier_Stale(t *testing.T) {
	g := newGroup(t)
	g.caughtUp(t)
	reads, set := g.reads(g.follower, nil)
	floor := g.follower.Applied() + 1
	reads.NoteIndex(g.follower.GroupID(), floor)

	var err error
	done := g.settled(func() { err = reads.Barrier(true) })
	g.push(t)
	if applied := receive(t, done, "Barrier"); err != nil || applied < floor {
		t.Errorf("Barrier(stale) = %v with the follower at %d, want nil at its floor %d", err, applied, floor)
	}
	if got := counter(set, `queen_reads_total{consistency="stale"}`); got != 1 {
		t.Errorf(`queen_reads_total{consistency="stale"} = %d, want 1`, got)
	}
}

// A linearizable read on a follower returns once the follower has applied
// what the leader had applied when it was called.
func TestReads_Barrier_Linearizable(t *testing.T) {
	g := newGroup(t)
	reads, set := g.reads(g.follower, nil)
	for range 3 {
		g.push(t)
		before := g.leader.Applied()
		if err := reads.Barrier(false); err != nil {
			t.Fatal(err)
		}
		if got := g.follower.Applied(); got < before {
			t.Errorf("Barrier returned with the follower at %d, before the leader's %d", got, before)
		}
	}
	if got := counter(set, `queen_reads_total{consistency="stale"}`); got != 0 {
		t.Errorf(`queen_reads_total{consistency="stale"} = %d after linearizable reads, want 0`, got)
	}
}

// A follower whose read index no leader confirms in time answers
// Unavailable, after ReadIndexTimeout.
func TestReads_Barrier_Unavailable(t *testing.T) {
	t.Parallel() // waits out ReadIndexTimeout
	g := newGroup(t)
	g.caughtUp(t)
	g.c.Partition(g.c.Index(g.follower))
	g.push(t) // the leader's read index is past what the follower can reach
	reads, _ := g.reads(g.follower, nil)
	if err := reads.Barrier(false); !errors.Is(err, errUnavailable) {
		t.Errorf("Barrier = %v, want Unavailable", err)
	}
}

// With the cluster plane closed a follower cannot ask its leader: its
// linearizable read is Refused at once (the server relays it whole), while
// the leader confirms its own.
func TestReads_Barrier_Closed(t *testing.T) {
	g := newGroup(t)
	closed := func(o *relay.ReadOptions) {
		o.Closed = true
		o.Ask = func(context.Context, *raft.Node) (uint64, error) {
			t.Error("a closed plane asked the leader")
			return 0, errRefused
		}
	}
	followerReads, _ := g.reads(g.follower, closed)
	if err := followerReads.Barrier(false); err != errRefused {
		t.Errorf("follower's Barrier = %v, want Refused as it is", err)
	}
	leaderReads, _ := g.reads(g.leader, closed)
	if err := leaderReads.Barrier(false); err != nil {
		t.Errorf("leader's Barrier = %v, want nil", err)
	}
}

// A replica this node does not serve from (ReadOptions.Hosts) is never
// stamped nor waited for.
func TestReads_NotHosted(t *testing.T) {
	g := newGroup(t)
	g.caughtUp(t)
	g.c.Partition(g.c.Index(g.follower))
	reads, set := g.reads(g.follower, func(o *relay.ReadOptions) {
		o.Hosts = func(uint32) bool { return false }
		o.Ask = func(context.Context, *raft.Node) (uint64, error) {
			t.Error("a replica not hosted asked its leader")
			return 0, errRefused
		}
	})
	var resp fasthttp.Response
	reads.Stamp(&resp.Header)
	if v := resp.Header.Peek(cluster.AppliedHeader); len(v) != 0 {
		t.Errorf("Stamp wrote %q for a replica not hosted", v)
	}
	reads.NoteIndex(g.follower.GroupID(), g.follower.Applied()+1)
	reads.Settle()
	if err := reads.Barrier(false); err != nil {
		t.Errorf("Barrier = %v, want nil", err)
	}
	if got := counter(set, `queen_applied_wait_timeouts_total`); got != 0 {
		t.Errorf("queen_applied_wait_timeouts_total = %d, want 0", got)
	}
}

// A nil *Reads is a broker without replicas: every method returns at
// once, and NoteApplied still takes the header off the client's answer.
func TestReads_Nil(t *testing.T) {
	var reads *relay.Reads
	if err := reads.Barrier(false); err != nil {
		t.Errorf("Barrier(false) = %v", err)
	}
	if err := reads.Barrier(true); err != nil {
		t.Errorf("Barrier(true) = %v", err)
	}
	reads.Settle()
	if n := reads.Replica(1); n != nil {
		t.Errorf("Replica(1) = %v, want nil", n)
	}
	var resp fasthttp.Response
	reads.Stamp(&resp.Header)
	if v := resp.Header.Peek(cluster.AppliedHeader); v != nil {
		t.Errorf("Stamp wrote %q", v)
	}
	resp.Header.Set(cluster.AppliedHeader, "1:5")
	reads.NoteApplied(&resp)
	if v := resp.Header.Peek(cluster.AppliedHeader); v != nil {
		t.Errorf("NoteApplied left %q", v)
	}
}

// A replica the Host closed and opened again is another Node of the same
// group: the read index is asked through the replica a read waits for,
// not through the one the group's first ask was made for, which (closed)
// knows no leader for good. Two followers of one group stand in for the
// replica before and after.
func TestReads_AsksThroughTheReplicaItHasNow(t *testing.T) {
	g := newGroup(t)
	g.caughtUp(t)
	var mu sync.Mutex
	var asked []*raft.Node
	now := g.follower
	reads, _ := g.readsOf(func() []*raft.Node {
		mu.Lock()
		defer mu.Unlock()
		return []*raft.Node{now}
	}, func(o *relay.ReadOptions) {
		leaderAsk := o.Ask
		o.Ask = func(ctx context.Context, n *raft.Node) (uint64, error) {
			mu.Lock()
			asked = append(asked, n)
			mu.Unlock()
			return leaderAsk(ctx, n)
		}
	})
	if err := reads.Barrier(false); err != nil {
		t.Fatal(err)
	}
	again := g.c.Followers()[1]
	mu.Lock()
	now = again
	mu.Unlock()
	g.push(t)
	if err := reads.Barrier(false); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) < 2 || asked[0] != g.follower || asked[len(asked)-1] != again {
		t.Fatalf("asked through %v; want the first replica, then the one it has now (%p)", asked, again)
	}
}

// A replica this node stops hosting while a read waits for it (a replica
// step removed it from its group: it applies nothing more) stops holding
// the read, which then goes to the group's leader: the barrier returns, not
// Unavailable after ReadIndexTimeout.
func TestReads_StopsWaitingForAReplicaNoLongerHosted(t *testing.T) {
	g := newGroup(t)
	g.caughtUp(t)
	g.c.Partition(g.c.Index(g.follower))
	g.push(t) // the leader's read index is past what the follower can reach
	var hosted atomic.Bool
	hosted.Store(true)
	reads, _ := g.reads(g.follower, func(o *relay.ReadOptions) {
		o.Hosts = func(uint32) bool { return hosted.Load() }
	})
	var err error
	start := time.Now()
	done := g.settled(func() { err = reads.Barrier(false) })
	time.Sleep(500 * time.Millisecond)
	hosted.Store(false)
	receive(t, done, "Barrier")
	if took := time.Since(start); err != nil || took >= relay.ReadIndexTimeout {
		t.Errorf("Barrier = %v after %v, want nil before ReadIndexTimeout (%v)", err, took, relay.ReadIndexTimeout)
	}
}
