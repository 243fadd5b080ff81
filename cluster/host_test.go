package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/rafttest"
)

// hosts is a cluster of Hosts on loopback TCP, each running the directory
// and groups 1..G.
type hosts struct {
	t     *testing.T
	g     int
	peers []raft.Peer
	dirs  []string
	h     []*cluster.Host // nil while stopped
	// mu guards h's elements against the Forwarders, which read them from
	// the hosts' own goroutines (relayInProcess); the test's goroutine,
	// the only writer, reads them without it.
	mu  sync.Mutex
	fwd []*swapForwarder
	// adjust, when set, changes each host's node options before it opens;
	// tune its host options.
	adjust func(*raft.Options)
	tune   func(*cluster.HostOptions)
	// replicas is HostOptions.Replicas (0: every group on every host),
	// replaceAfter HostOptions.ReplaceAfter.
	replicas     int
	replaceAfter time.Duration
	// founders is how many of peers bootstrapped the cluster: the others
	// joined it (join).
	founders int
	// moved are the move outcomes each node reported (HostOptions.OnMove),
	// by node id.
	movedMu sync.Mutex
	moved   map[string][]cluster.MoveOutcome
}

// outcomes are the move outcomes host i reported so far.
func (c *hosts) outcomes(i int) []cluster.MoveOutcome {
	c.movedMu.Lock()
	defer c.movedMu.Unlock()
	return slices.Clone(c.moved[c.peers[i].ID])
}

func openHosts(t *testing.T, n, groups int) *hosts {
	return openHostsWith(t, n, groups, nil)
}

func openHostsWith(t *testing.T, n, groups int, adjust func(*raft.Options)) *hosts {
	t.Helper()
	return openHostsOf(t, n, groups, 0, adjust)
}

// openHostsOf opens n hosts whose groups have replicas voters each (0:
// every group on every host).
func openHostsOf(t *testing.T, n, groups, replicas int, adjust func(*raft.Options), set ...func(*hosts)) *hosts {
	t.Helper()
	c := &hosts{t: t, g: groups, h: make([]*cluster.Host, n), adjust: adjust, replicas: replicas, founders: n}
	for _, f := range set {
		f(c)
	}
	base := t.TempDir()
	for i, a := range rafttest.FreeAddrs(t, n) {
		id := fmt.Sprintf("n%d", i+1)
		c.peers = append(c.peers, raft.Peer{ID: id, Addr: a})
		c.dirs = append(c.dirs, filepath.Join(base, id))
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.h {
			c.stop(i)
		}
	})
	return c
}

func (c *hosts) start(i int) *cluster.Host {
	c.t.Helper()
	id := c.peers[i].ID
	o := rafttest.Options(id, c.dirs[i])
	o.RaftAddr = c.peers[i].Addr
	o.HTTPAddr = "http-" + c.peers[i].ID
	if i < c.founders {
		o.Peers = c.peers[:c.founders]
	}
	o.ClusterSecret = "correct horse battery staple"
	o.RetentionInterval = 0
	if c.adjust != nil {
		c.adjust(&o)
	}
	for len(c.fwd) <= i {
		c.fwd = append(c.fwd, &swapForwarder{})
	}
	ho := cluster.HostOptions{Node: o, Groups: c.g, Replicas: c.replicas, SpreadInterval: 50 * time.Millisecond, SpreadHold: 300 * time.Millisecond,
		PartWait: time.Second, Forward: c.fwd[i], OutboxInterval: 50 * time.Millisecond, OutboxAge: 200 * time.Millisecond,
		MoveInterval: 100 * time.Millisecond, MoveTimeout: 3 * time.Second,
		RebalanceInterval: 100 * time.Millisecond, ReplaceAfter: c.replaceAfter, StepTimeout: 20 * time.Second, RetireHold: 500 * time.Millisecond, OnMove: func(o cluster.MoveOutcome) {
			c.movedMu.Lock()
			defer c.movedMu.Unlock()
			if c.moved == nil {
				c.moved = map[string][]cluster.MoveOutcome{}
			}
			c.moved[id] = append(c.moved[id], o)
		}}
	if c.tune != nil {
		c.tune(&ho)
	}
	h, err := cluster.OpenHost(ho)
	if err != nil {
		c.t.Fatalf("open host %s: %v", c.peers[i].ID, err)
	}
	c.mu.Lock()
	c.h[i] = h
	c.mu.Unlock()
	return h
}

func (c *hosts) stop(i int) {
	if c.h[i] != nil {
		if err := c.h[i].Close(); err != nil {
			c.t.Errorf("close host %s: %v", c.peers[i].ID, err)
		}
		c.mu.Lock()
		c.h[i] = nil
		c.mu.Unlock()
	}
}

// leaders polls, up to 30 s, until every group has a leader all running
// hosts name, and want (when set) holds of them; it returns each group's
// leader's host index.
func (c *hosts) leaders(want func(leaders []int) bool) []int {
	c.t.Helper()
	var last string
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		leaders, ok := c.agreedLeaders()
		if ok && (want == nil || want(leaders)) {
			return leaders
		}
		last = c.describe()
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("groups did not settle: %s", last)
	return nil
}

// settled waits until every group has an agreed leader that has applied
// everything it committed (a barrier succeeds on it), retrying while a
// leadership transfer or election is under way, and returns the leaders.
func (c *hosts) settled() []int {
	c.t.Helper()
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		leaders := c.leaders(nil)
		last = nil
		for g, i := range leaders {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.h[i].Group(uint32(g)).Barrier(ctx)
			cancel()
			if err != nil {
				last = err
				break
			}
		}
		if last == nil {
			return leaders
		}
		if !raft.Transient(last) {
			c.t.Fatal(last)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("groups did not settle: %v", last)
	return nil
}

func (c *hosts) agreedLeaders() ([]int, bool) {
	leaders := make([]int, c.g+1)
	for g := range leaders {
		leaders[g] = -1
		for i, h := range c.h {
			if n := replica(h, uint32(g)); n != nil && n.Status().Role == "leader" {
				leaders[g] = i
			}
		}
		if leaders[g] < 0 {
			return nil, false
		}
		for i, h := range c.h {
			// A host that is not a member of g (groups on R of N
			// nodes) follows no leader of it.
			if n := replica(h, uint32(g)); n != nil && slices.Contains(n.Members(), c.peers[i].ID) &&
				n.Status().Leader != c.peers[leaders[g]].ID {
				return nil, false
			}
		}
	}
	return leaders, true
}

// replica is h's replica of group g, nil when h is nil or holds none.
func replica(h *cluster.Host, g uint32) *raft.Node {
	if h == nil {
		return nil
	}
	return h.Group(g)
}

func (c *hosts) describe() string {
	var b strings.Builder
	for _, h := range c.h {
		if h == nil {
			continue
		}
		for _, g := range h.Groups() {
			if h.Group(g) == nil {
				fmt.Fprintf(&b, "g%d:held-elsewhere ", g)
				continue
			}
			st := h.Group(g).Status()
			fmt.Fprintf(&b, "%s/g%d:%s(leader %q) ", st.ID, g, st.Role, st.Leader)
		}
	}
	return b.String()
}

// queue polls, up to 20 s, until group g of host i holds queue with want
// messages.
func (c *hosts) waitMessages(i int, g uint32, queue string, want int64) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var got int64
	for time.Now().Before(deadline) {
		if q, err := c.h[i].Group(g).Queue(queue); err == nil {
			got = 0
			for _, p := range q.Partitions {
				got += p.Next
			}
			if got == want {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("%s group %d: queue %s has %d messages, want %d", c.peers[i].ID, g, queue, got, want)
}

// push pushes one item to group g's current leader, retrying while
// leadership moves (the Hosts spread it, and a restart brings elections).
// A retry after an unknown outcome may find the first try stored and
// answer Duplicate, as a client's retry would: checks of what is stored
// read it (stored) instead.
func (c *hosts) push(g uint32, queue, txn string) engine.PushResult {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leaders := c.settled()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := raft.Propose[[]engine.PushResult](ctx, c.h[leaders[g]].Group(g),
			engine.PushCmd{Items: []engine.PushItem{{Queue: queue, TransactionID: txn, Payload: []byte(`{}`)}}})
		cancel()
		if err == nil {
			return res[0]
		}
		if !raft.Transient(err) || time.Now().After(deadline) {
			c.t.Fatalf("push %s to group %d: %v", txn, g, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stored fails the test unless every running host comes to hold the
// messages of txns in queue's partitions of group g within 20 s (read, not
// pushed again, so the check writes nothing).
func (c *hosts) stored(g uint32, queue string, txns []string) {
	c.t.Helper()
	for i, h := range c.h {
		if h == nil {
			continue
		}
		n := h.Group(g)
		missing := ""
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			missing = ""
			q, err := n.Queue(queue)
			for _, txn := range txns {
				found := false
				for _, p := range q.Partitions {
					if _, err := n.MessageAt(p.ID, txn); err == nil {
						found = true
					}
				}
				if err != nil || !found {
					missing = txn
					break
				}
			}
			if missing == "" {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s group %d: acknowledged push %s is not stored", c.peers[i].ID, g, missing)
			}
		}
	}
}

// preferredLeaders is what the Host spreads towards: group g led by the
// voters sorted by id at g mod 3.
func preferredLeaders(leaders []int) bool {
	for g, l := range leaders {
		if l != g%3 {
			return false
		}
	}
	return true
}

func TestHost_GroupsReplicateApartAndSpreadTheirLeaders(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	leaders := c.leaders(preferredLeaders)
	// Each group replicates its own commands and none of the others'.
	for g := uint32(1); g <= 3; g++ {
		leader := c.h[leaders[g]].Group(g)
		for k := range 5 {
			if r := push(t, leader, fmt.Sprintf("q%d", g), fmt.Sprintf("t%d", k)); r.Status != engine.Queued {
				t.Fatalf("group %d push status %d", g, r.Status)
			}
		}
	}
	for i := range c.h {
		for g := uint32(1); g <= 3; g++ {
			c.waitMessages(i, g, fmt.Sprintf("q%d", g), 5)
			qs, err := c.h[i].Group(g).Queues()
			if err != nil || len(qs) != 1 {
				t.Fatalf("%s group %d holds queues %+v (%v), want only q%d", c.peers[i].ID, g, qs, err, g)
			}
		}
		if qs, err := c.h[i].Group(raft.Directory).Queues(); err != nil || len(qs) != 0 {
			t.Fatalf("%s directory holds queues %+v (%v)", c.peers[i].ID, qs, err)
		}
	}
}

func TestHost_GroupLeaderLossAndReturn(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	leaders := c.leaders(preferredLeaders)
	lost := leaders[1]
	c.stop(lost)
	// The survivors elect a leader for every group the lost host led, and
	// group 1 goes on committing.
	leaders = c.leaders(nil)
	leader := c.h[leaders[1]].Group(1)
	for k := range 10 {
		push(t, leader, "q", fmt.Sprintf("t%d", k))
	}
	// Back, the host catches up and takes its group back.
	c.start(lost)
	c.leaders(preferredLeaders)
	for i := range c.h {
		c.waitMessages(i, 1, "q", 10)
	}
}

// A host keeps group 1 where a node of one group keeps its store (engine/,
// snapshots/ and the log's families in raft/) and the directory and the
// other groups under groups/<id>/.
func TestHost_KeepsGroup1WhereOneGroupLives(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 1, 2)
	leaders := c.leaders(nil)
	push(t, c.h[leaders[1]].Group(1), "one", "t")
	push(t, c.h[leaders[2]].Group(2), "two", "t")
	c.stop(0)
	for _, sub := range []string{"engine", "snapshots", "raft", "groups/0/engine", "groups/0/snapshots", "groups/2/engine", "groups/2/snapshots"} {
		if _, err := os.Stat(filepath.Join(c.dirs[0], sub)); err != nil {
			t.Errorf("%s: %v", sub, err)
		}
	}
	if _, err := os.Stat(filepath.Join(c.dirs[0], "groups", "1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("groups/1 exists (%v): group 1 lives at the top", err)
	}
}

func TestHost_RefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	o := rafttest.Options("n1", t.TempDir())
	o.RaftAddr = rafttest.FreeAddrs(t, 1)[0]
	if _, err := cluster.OpenHost(cluster.HostOptions{Node: o, Groups: 0}); err == nil {
		t.Fatal("a host of no data groups opened")
	}
	h, err := cluster.OpenHost(cluster.HostOptions{Node: o, Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := cluster.OpenHost(cluster.HostOptions{Node: o, Groups: 1}); err == nil {
		t.Fatal("a second host opened on a directory in use")
	}
	if h.Group(2) != nil {
		t.Fatal("Group(2) of a host of one data group is not nil")
	}
}

func TestHost_DirectoryPlacesQueuesOnceForEveryNode(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	leaders := c.leaders(preferredLeaders)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < len(c.h); {
		if c.h[i].GroupCount() == 3 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the directory has %d groups, want 3", c.peers[i].ID, c.h[i].GroupCount())
		}
		time.Sleep(10 * time.Millisecond)
	}
	dir := c.h[leaders[raft.Directory]]
	follower := c.h[(leaders[raft.Directory]+1)%3]
	if _, err := follower.Place(ctxT(t), "a", 0); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("placing on a follower of the directory: err %v, want ErrNotLeader", err)
	}
	for i, q := range []string{"a", "b", "c", "d"} {
		g, err := dir.Place(ctxT(t), q, 0)
		if want := uint32(i%3 + 1); err != nil || g != want {
			t.Fatalf("place %s: group %d (%v), want %d", q, g, err, want)
		}
	}
	if g, err := dir.Place(ctxT(t), "pinned", 3); err != nil || g != 3 {
		t.Fatalf("place pinned in 3: %d (%v)", g, err)
	}
	// Every replica learns each placement; a placed queue is answered from
	// the replica, on any node.
	for i := range c.h {
		deadline := time.Now().Add(20 * time.Second)
		for c.h[i].Placement("pinned") != 3 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		for q, want := range map[string]uint32{"a": 1, "b": 2, "c": 3, "d": 1, "pinned": 3, "never": 0} {
			if g := c.h[i].Placement(q); g != want {
				t.Errorf("%s: placement of %s is %d, want %d", c.peers[i].ID, q, g, want)
			}
		}
		if g, err := c.h[i].Place(ctxT(t), "b", 1); err != nil || g != 2 {
			t.Errorf("%s: placing b again: %d (%v), want its group 2", c.peers[i].ID, g, err)
		}
	}
	// A node restarted with another count is refused, naming both.
	c.stop(2)
	o := rafttest.Options(c.peers[2].ID, c.dirs[2])
	o.RaftAddr, o.Peers, o.ClusterSecret = c.peers[2].Addr, c.peers, "correct horse battery staple"
	_, err := cluster.OpenHost(cluster.HostOptions{Node: o, Groups: 2})
	if err == nil || !strings.Contains(err.Error(), "3 data groups, not 2") {
		t.Fatalf("a host restarted with 2 groups in a cluster of 3: err %v", err)
	}
}

// TestHost_NothingAcknowledgedIsLostWhenAGroupLeaderStops pushes to every
// group at once while the host leading group 1 stops and comes back: every
// push answered queued is stored (a repeat of its transaction id is a
// duplicate), and each group's replicas end identical.
func TestHost_NothingAcknowledgedIsLostWhenAGroupLeaderStops(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	leaders := c.leaders(preferredLeaders)
	var (
		mu    sync.Mutex
		acked = map[uint32][]string{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for g := uint32(1); g <= 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 400; { // 400 pushes proposed; none while no leader is known
				select {
				case <-stop:
					return
				default:
				}
				txn := fmt.Sprintf("g%d-%d", g, k)
				// Whichever running host leads the group now; a push that
				// fails is not acknowledged and is not retried.
				mu.Lock()
				var leader *raft.Node
				for _, h := range c.h {
					if h != nil && h.Group(g).Status().Role == "leader" {
						leader = h.Group(g)
					}
				}
				mu.Unlock()
				if leader == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				k++
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				res, err := raft.Propose[[]engine.PushResult](ctx, leader, engine.PushCmd{Items: []engine.PushItem{{Queue: fmt.Sprintf("q%d", g), TransactionID: txn, Payload: []byte(`{}`)}}})
				cancel()
				if err == nil && res[0].Status == engine.Queued {
					mu.Lock()
					acked[g] = append(acked[g], txn)
					mu.Unlock()
				}
			}
		}()
	}
	lost := leaders[1]
	// Group 1's pushes are answered before its leader stops, and again
	// (by a new leader) before it comes back.
	progress := func(what string) {
		t.Helper()
		mu.Lock()
		from := len(acked[1])
		mu.Unlock()
		waitForLong(t, what, 20*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked[1]) >= from+10
		})
	}
	progress("group 1's pushes to be answered")
	mu.Lock()
	h := c.h[lost]
	c.h[lost] = nil // the pushers stop looking at it
	mu.Unlock()
	if err := h.Close(); err != nil {
		t.Fatalf("stop %s: %v", c.peers[lost].ID, err)
	}
	progress("group 1's pushes to be answered by a new leader")
	mu.Lock()
	c.start(lost)
	mu.Unlock()
	timer := time.AfterFunc(20*time.Second, func() { close(stop) }) // the bound in time; 400 pushes the bound in count
	wg.Wait()
	timer.Stop()

	c.leaders(nil)
	for g := uint32(1); g <= 3; g++ {
		if len(acked[g]) == 0 {
			t.Fatalf("group %d: no push was acknowledged", g)
		}
		var nodes []*raft.Node
		for _, h := range c.h {
			nodes = append(nodes, h.Group(g))
		}
		rafttest.EnsureSame(t, nodes...)
		c.stored(g, fmt.Sprintf("q%d", g), acked[g])
	}
	rafttest.EnsureSame(t, c.h[0].Group(raft.Directory), c.h[1].Group(raft.Directory), c.h[2].Group(raft.Directory))
}

// refused reports whether err is a transient refusal: the command was
// certainly not applied (raft.NotApplied) and asking again may be answered
// (raft.Transient): no leader, not the leader, a leadership transfer, a
// queue frozen for a move, which an election or a move on a busy machine
// answers. An invalid command, or one whose outcome is unknown, is not.
func refused(err error) bool { return raft.NotApplied(err) && raft.Transient(err) }

// notApplied calls propose again, for up to 30 s, while it answers a
// transient refusal (refused): asking again cannot apply it twice, and
// any other answer, the last included, is returned for the test to check.
func notApplied(propose func() (engine.Result, error)) (engine.Result, error) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := propose()
		if !refused(err) || time.Now().After(deadline) {
			return r, err
		}
	}
}

// notAppliedAs is raft.Propose of cmd through p, asked again while it
// answers a transient refusal (notApplied).
func notAppliedAs[T any](t *testing.T, p raft.Proposer, cmd engine.Command) (T, error) {
	var v T
	_, err := notApplied(func() (engine.Result, error) {
		var err error
		v, err = raft.Propose[T](ctxT(t), p, cmd)
		return engine.Result{}, err
	})
	return v, err
}

// pushedAgain pushes items through h and asks again, up to 30 s, for the
// items an election left unstored or unknown: a part refused (its items
// rejected with a transient refusal, or the push answered one: nothing
// stored), or a push whose outcome is unknown (raft.Transient), after
// which an item answered a duplicate is one the earlier try stored, and
// is answered queued here, as the client sent it once (its transaction
// id makes the repeat a duplicate; the caller checks what is stored). Any
// other answer is returned as it came.
func pushedAgain(t *testing.T, h *cluster.Host, items []engine.PushItem) []engine.PushResult {
	t.Helper()
	out := make([]engine.PushResult, len(items))
	todo := make([]int, len(items)) // indexes into items still to push
	for k := range todo {
		todo[k] = k
	}
	uncertain := map[int]bool{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var send []engine.PushItem
		for _, k := range todo {
			send = append(send, items[k])
		}
		res, err := raft.Propose[[]engine.PushResult](ctxT(t), h, engine.PushCmd{Items: send})
		last := time.Now().After(deadline)
		switch {
		case err != nil && (!raft.Transient(err) || last):
			t.Fatalf("push %d items: %v", len(send), err)
		case err != nil:
			if !refused(err) {
				for _, k := range todo {
					uncertain[k] = true
				}
			}
			continue
		case len(res) != len(send):
			t.Fatalf("push %d items: %d answers", len(send), len(res))
		}
		var again []int
		for j, r := range res {
			k := todo[j]
			switch {
			case r.Status == engine.Rejected && refused(r.Err) && !last:
				again = append(again, k)
			case r.Status == engine.Duplicate && uncertain[k]:
				r.Status = engine.Queued
				out[k] = r
			default:
				out[k] = r
			}
		}
		if todo = again; len(todo) == 0 {
			return out
		}
	}
}

// forwardFunc is a test's Forwarder.
type forwardFunc func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error)

// swapForwarder is each test host's Forwarder (HostOptions.Forward), which
// a test sets and changes as it goes; unset, it answers as a node that
// does not lead the group would.
type swapForwarder struct {
	f    atomic.Pointer[forwardFunc]
	read atomic.Pointer[readFunc]
	move atomic.Pointer[moveFunc]
}

// moveFunc is a test's Forwarder.StartMove.
type moveFunc func(ctx context.Context, addr, queue string, to uint32) error

func (s *swapForwarder) StartMove(ctx context.Context, addr, queue string, to uint32) error {
	f := s.move.Load()
	if f == nil {
		return raft.ErrNotLeader
	}
	return (*f)(ctx, addr, queue, to)
}

// readFunc is a test's Forwarder.Read.
type readFunc func(ctx context.Context, addr string, g uint32, req []byte) ([]byte, error)

func (s *swapForwarder) Read(ctx context.Context, addr string, g uint32, req []byte) ([]byte, error) {
	f := s.read.Load()
	if f == nil {
		return nil, raft.ErrNotLeader
	}
	return (*f)(ctx, addr, g, req)
}

func (s *swapForwarder) Forward(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, uint64, error) {
	f := s.f.Load()
	if f == nil {
		return engine.Result{}, 0, raft.ErrNotLeader
	}
	r, err := (*f)(ctx, addr, g, entry)
	return r, 0, err
}

// setForward sets host i's Forwarder to f.
func (c *hosts) setForward(i int, f forwardFunc) { c.fwd[i].f.Store(&f) }

// relayInProcess gives every host a Forwarder that calls the host whose
// HTTP address is addr directly (package cluster's tests cover the HTTP
// path): its ProposeEntry for a command, its AnswerRead for a read, its
// StartMove for a move.
func (c *hosts) relayInProcess() {
	for i := range c.h {
		c.setForward(i, func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error) {
			if h := c.host("http-", addr); h != nil {
				return h.ProposeEntry(ctx, g, entry)
			}
			return engine.Result{}, raft.ErrForward
		})
		read := readFunc(func(ctx context.Context, addr string, g uint32, req []byte) ([]byte, error) {
			if h := c.host("http-", addr); h != nil {
				return h.AnswerRead(ctx, g, req)
			}
			return nil, raft.ErrForward
		})
		c.fwd[i].read.Store(&read)
		move := moveFunc(func(ctx context.Context, addr, queue string, to uint32) error {
			if h := c.host("http-", addr); h != nil {
				return h.StartMove(ctx, queue, to)
			}
			return raft.ErrForward
		})
		c.fwd[i].move.Store(&move)
	}
}

// host is the running host whose address is prefix + its id, nil when
// none is; safe from any goroutine.
func (c *hosts) host(prefix, addr string) *cluster.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.peers {
		if prefix+p.ID == addr {
			return c.h[i]
		}
	}
	return nil
}

// addressesKnown waits until every host knows where every group's leader
// is (the leader's Announce applied on its replica).
func (c *hosts) addressesKnown() {
	c.t.Helper()
	c.leaders(func(leaders []int) bool {
		for g := range leaders {
			for _, h := range c.h {
				if h.Group(uint32(g)).Status().LeaderHTTP == "" {
					return false
				}
			}
		}
		return true
	})
}

// forwarded runs c on h and, when h answers NotLeaderError, on the host
// that leads the group named (as the edge forwards the request).
func (c *hosts) forwarded(h *cluster.Host, cmd engine.Command) (engine.Result, error) {
	r, err := h.Propose(ctxT(c.t), cmd)
	var nl *raft.NotLeaderError
	if !errors.As(err, &nl) {
		return r, err
	}
	for i, p := range c.peers {
		if p.ID == nl.Status.Leader {
			return c.h[i].Propose(ctxT(c.t), cmd)
		}
	}
	return r, err
}

func TestHost_RoutesEachCommandToItsQueuesGroup(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	// Six queues land two per group; each host pushes to all six, one push
	// spanning every group: the parts led elsewhere are relayed.
	queues := []string{"a", "b", "c", "d", "e", "f"}
	for i, h := range c.h {
		var items []engine.PushItem
		for _, q := range queues {
			items = append(items, engine.PushItem{Queue: q, TransactionID: fmt.Sprintf("%s-%d", q, i), Payload: []byte(`{}`)})
		}
		// An election under load refuses a part (its items rejected,
		// nothing stored) or leaves its outcome unknown: pushedAgain asks
		// again for those items; waitMessages below checks that each
		// queue holds its three messages, none twice.
		res := pushedAgain(t, h, items)
		for k, r := range res {
			if r.Status != engine.Queued || r.Queue != queues[k] || r.TransactionID != items[k].TransactionID {
				t.Fatalf("push through %s: item %d answered %+v", c.peers[i].ID, k, r)
			}
		}
	}
	// A command an election under load refuses (no leader, a transfer:
	// nothing applied) is asked again, here and below.
	count := map[uint32]int{}
	for _, q := range queues {
		g := c.h[0].Placement(q)
		count[g]++
		for i := range c.h {
			c.waitMessages(i, g, q, 3)
		}
	}
	if count[1] != 2 || count[2] != 2 || count[3] != 2 {
		t.Fatalf("queues per group %v, want 2 each", count)
	}
	// Every host lists every queue from its replicas.
	for i, h := range c.h {
		qs, err := h.Queues()
		if err != nil || len(qs) != len(queues) {
			t.Fatalf("%s lists %d queues (%v), want %d", c.peers[i].ID, len(qs), err, len(queues))
		}
	}
	// Pops go to the queue's group leader (forwarded); one ack through
	// another host carries the leases of queues in every group.
	var acks []engine.AckItem
	for _, q := range queues {
		r, err := c.patient(c.h[0], engine.PopCmd{Queue: q, Batch: 10, Partitions: 1})
		if err != nil {
			t.Fatalf("pop %s: %v", q, err)
		}
		pop := r.Value.(engine.PopResult)
		if len(pop.Messages) != 3 {
			t.Fatalf("pop %s: %d messages, want 3", q, len(pop.Messages))
		}
		for _, m := range pop.Messages {
			acks = append(acks, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Lease: pop.LeaseID, Status: cursor.Completed})
		}
	}
	res, err := notAppliedAs[[]engine.AckResult](t, c.h[1], engine.AckCmd{Items: acks})
	if err != nil {
		t.Fatalf("ack: %v", err)
	}
	for k, r := range res {
		if !r.Success || r.TransactionID != acks[k].TransactionID {
			t.Fatalf("ack item %d answered %+v", k, r)
		}
	}
	// Nothing is left to deliver: a discovery-free pop per queue is empty.
	for _, q := range queues {
		r, err := c.patient(c.h[2], engine.PopCmd{Queue: q, Batch: 10, Partitions: 1})
		if err != nil || len(r.Value.(engine.PopResult).Messages) != 0 {
			t.Fatalf("pop %s after the acks: %+v, %v", q, r.Value, err)
		}
	}
	// A transaction inside one group commits. One pushing to two groups
	// goes through the outbox, whose commands need command version 2: these
	// hosts read no versions, so the cluster runs at 1 and it is refused
	// before anything is proposed (hostoutbox_test.go runs it at 2).
	inA := []engine.TxOp{{Push: &engine.PushItem{Queue: "a", TransactionID: "tx-a", Payload: []byte(`{}`)}}}
	if r, err := c.patient(c.h[0], engine.TransactionCmd{Ops: inA}); err != nil || !r.Value.(engine.TxResult).Success {
		t.Fatalf("transaction in one group: %+v, %v", r.Value, err)
	}
	other := queues[slices.IndexFunc(queues, func(q string) bool { return c.h[0].Placement(q) != c.h[0].Placement("a") })]
	spans := append(inA, engine.TxOp{Push: &engine.PushItem{Queue: other, TransactionID: "tx-other", Payload: []byte(`{}`)}})
	_, err = c.patient(c.h[0], engine.TransactionCmd{Ops: spans})
	if !errors.Is(err, raft.ErrClusterVersion) {
		t.Fatalf("transaction over two groups at cluster version 1: err %v, want ErrClusterVersion", err)
	}
	// A queue a transaction is the first to push to lands in the group of
	// the rest of the transaction, which then commits there.
	withA := []engine.TxOp{
		{Push: &engine.PushItem{Queue: "a", TransactionID: "tx-a2", Payload: []byte(`{}`)}},
		{Push: &engine.PushItem{Queue: "fresh", TransactionID: "tx-fresh", Payload: []byte(`{}`)}},
	}
	if r, err := c.patient(c.h[1], engine.TransactionCmd{Ops: withA}); err != nil || !r.Value.(engine.TxResult).Success {
		t.Fatalf("transaction placing a new queue: %+v, %v", r.Value, err)
	}
	// n1 leads the directory: its replica has every placement.
	if g, a := c.h[0].Placement("fresh"), c.h[0].Placement("a"); g != a {
		t.Fatalf("the transaction's new queue landed in group %d, its other queue is in %d", g, a)
	}
	// Maintenance is the cluster's, kept by the directory: every host reads
	// the switch its replica applied.
	if _, err := c.patient(c.h[2], command.Maintenance{Enabled: true}); err != nil {
		t.Fatalf("push maintenance on: %v", err)
	}
	for i, h := range c.h {
		deadline := time.Now().Add(20 * time.Second)
		for on, _ := h.Maintenance(); !on; on, _ = h.Maintenance() {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not see push maintenance", c.peers[i].ID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Consumer-group commands over every group add up their answers.
	deleted, err := notAppliedAs[engine.GroupDeleted](t, c.h[2], engine.DeleteGroupCmd{Group: engine.QueueMode})
	if err != nil || deleted.Cursors != 6 {
		t.Fatalf("delete the queue-mode cursors everywhere: %+v, %v; want 6 rows", deleted, err)
	}
	for g := uint32(1); g <= 3; g++ {
		var nodes []*raft.Node
		for _, h := range c.h {
			nodes = append(nodes, h.Group(g))
		}
		rafttest.EnsureSame(t, nodes...)
	}
}

// A discovery pop (a namespace, no queue) finds messages in whichever
// group holds them, and a pop of a queue nobody pushed to places nothing.
func TestHost_DiscoveryPopsLookInEveryGroup(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	for _, q := range []string{"x1", "x2", "x3"} {
		if _, err := notApplied(func() (engine.Result, error) {
			return c.forwarded(c.h[0], engine.ConfigureCmd{Queue: q, Namespace: "ns", NamespaceSet: true})
		}); err != nil {
			t.Fatalf("configure %s: %v", q, err)
		}
		if r, err := notApplied(func() (engine.Result, error) {
			return c.h[0].Propose(ctxT(t), engine.PushCmd{Items: []engine.PushItem{{Queue: q, Payload: []byte(`{}`)}}})
		}); err != nil || r.Err != nil {
			t.Fatalf("push %s: %v %v", q, err, r.Err)
		}
	}
	groups := map[uint32]bool{}
	for _, q := range []string{"x1", "x2", "x3"} {
		groups[c.h[0].Placement(q)] = true
		for i := range c.h {
			c.waitMessages(i, c.h[0].Placement(q), q, 1)
		}
	}
	if len(groups) != 3 {
		t.Fatalf("the three queues landed in groups %v, want one each", groups)
	}
	got := map[string]bool{}
	for k := range 3 {
		r, err := notApplied(func() (engine.Result, error) {
			return c.forwarded(c.h[k], engine.PopCmd{Namespace: "ns", Batch: 1, Partitions: 1})
		})
		if err != nil {
			t.Fatalf("discovery pop %d: %v", k, err)
		}
		msgs := r.Value.(engine.PopResult).Messages
		if len(msgs) != 1 || got[msgs[0].Queue] {
			t.Fatalf("discovery pop %d: %+v, after %v", k, msgs, got)
		}
		got[msgs[0].Queue] = true
	}
	r, err := c.forwarded(c.h[1], engine.PopCmd{Namespace: "ns", Batch: 1, Partitions: 1})
	if err != nil || len(r.Value.(engine.PopResult).Messages) != 0 {
		t.Fatalf("discovery pop with every message leased: %+v, %v", r.Value, err)
	}
	if r, err := c.forwarded(c.h[2], engine.PopCmd{Queue: "nobody-pushed", Batch: 1, Partitions: 1}); err != nil || len(r.Value.(engine.PopResult).Messages) != 0 {
		t.Fatalf("pop of an unknown queue: %+v, %v", r.Value, err)
	}
	if g := c.h[2].Placement("nobody-pushed"); g != 0 {
		t.Fatalf("a pop placed the unknown queue in group %d", g)
	}
}

// A cluster of hosts that lost a node for good is recovered on the two
// survivors: Recover rewrites every group's membership, each group elects
// among the two and keeps everything it held.
func TestHost_RecoverEveryGroupToTheSurvivors(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	for g := uint32(1); g <= 3; g++ {
		for k := range 5 {
			c.push(g, fmt.Sprintf("q%d", g), fmt.Sprintf("t%d", k))
		}
		for i := range c.h {
			c.waitMessages(i, g, fmt.Sprintf("q%d", g), 5)
		}
	}
	for i := range c.h {
		c.stop(i)
	}
	survivors := c.peers[:2]
	for i := range survivors {
		if _, err := raft.Recover(rafttest.Options(c.peers[i].ID, c.dirs[i]), survivors); err != nil {
			t.Fatalf("recover %s: %v", c.peers[i].ID, err)
		}
	}
	c.peers = survivors
	c.h = c.h[:2]
	c.start(0)
	c.start(1)
	leaders := c.settled()
	for g := uint32(1); g <= 3; g++ {
		if st := c.h[leaders[g]].Group(g).Status(); st.Voters != 2 {
			t.Fatalf("group %d after recovery: %+v, want two voters", g, st)
		}
		q := fmt.Sprintf("q%d", g)
		c.stored(g, q, []string{"t0", "t1", "t2", "t3", "t4"})
		c.push(g, q, "after")
		for i := range c.h {
			c.waitMessages(i, g, q, 6)
		}
	}
}

// Each group's leader sweeps its own group: messages past their queue's
// retention are deleted in every group, on every replica.
func TestHost_RetentionSweepsEveryGroup(t *testing.T) {
	t.Parallel()
	c := openHostsWith(t, 3, 3, func(o *raft.Options) { o.RetentionInterval = 100 * time.Millisecond })
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	queues := []string{"r1", "r2", "r3"}
	for _, q := range queues {
		cfg := engine.ConfigureCmd{Queue: q, Set: []engine.OptionValue{{Option: engine.OptRetentionEnabled, Value: 1}, {Option: engine.OptRetentionSeconds, Value: 1}}}
		if _, err := c.forwarded(c.h[0], cfg); err != nil {
			t.Fatalf("configure %s: %v", q, err)
		}
		if _, err := raft.Propose[[]engine.PushResult](ctxT(t), c.h[1], engine.PushCmd{Items: []engine.PushItem{{Queue: q, Payload: []byte(`{}`)}}}); err != nil {
			t.Fatalf("push %s: %v", q, err)
		}
	}
	groups := map[uint32]bool{}
	for _, q := range queues {
		groups[c.h[0].Placement(q)] = true
	}
	if len(groups) != 3 {
		t.Fatalf("queues placed in groups %v, want one each", groups)
	}
	// Every replica took the push before anything is swept.
	for i := range c.h {
		for _, q := range queues {
			c.waitMessages(i, c.h[0].Placement(q), q, 1)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, h := range c.h {
		for _, q := range queues {
			for {
				msgs, err := h.ListMessages(engine.MessageFilter{Queue: q})
				if err == nil && len(msgs) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("queue %s (group %d) still holds %d messages past its retention (%v)", q, h.Placement(q), len(msgs), err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// A DLQ redrive walks rows of every group: a replay for a group led
// elsewhere is relayed to its leader.
func TestHost_ReplaysDeadLettersOfEveryGroup(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	type address struct {
		part engine.ID
		txn  string
	}
	var dead []address
	for _, q := range []string{"d1", "d2", "d3"} {
		if _, err := raft.Propose[[]engine.PushResult](ctxT(t), c.h[0], engine.PushCmd{Items: []engine.PushItem{{Queue: q, TransactionID: "m-" + q, Payload: []byte(`{}`)}}}); err != nil {
			t.Fatalf("push %s: %v", q, err)
		}
		r, err := c.forwarded(c.h[0], engine.PopCmd{Queue: q, Batch: 1, Partitions: 1})
		if err != nil || len(r.Value.(engine.PopResult).Messages) != 1 {
			t.Fatalf("pop %s: %+v, %v", q, r.Value, err)
		}
		m := r.Value.(engine.PopResult).Messages[0]
		if _, err := c.forwarded(c.h[0], engine.MoveToDLQCmd{PartitionID: m.PartitionID, TransactionID: m.TransactionID, Group: engine.QueueMode, Error: "poison"}); err != nil {
			t.Fatalf("dead-letter %s: %v", q, err)
		}
		dead = append(dead, address{m.PartitionID, m.TransactionID})
	}
	for _, h := range c.h {
		for _, d := range dead {
			deadline := time.Now().Add(10 * time.Second)
			for rows, _ := h.DeadLettersAt(d.part, d.txn); len(rows) == 0; rows, _ = h.DeadLettersAt(d.part, d.txn) {
				if time.Now().After(deadline) {
					t.Fatalf("dead letter %s not on every replica", d.txn)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	// Host n1 leads the directory and group 3 only: the replays of the
	// other groups' rows are relayed.
	for _, d := range dead {
		res, err := raft.Propose[engine.ReplayResult](ctxT(t), c.h[0], engine.ReplayCmd{PartitionID: d.part, TransactionID: d.txn})
		if err != nil || res.RowsRemoved != 1 || res.Push.Status != engine.Queued {
			t.Fatalf("replay %s through n1: %+v, %v", d.txn, res, err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, total, err := c.h[0].ListDLQ(engine.DLQFilter{})
		if err == nil && total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters left after the redrive: %d (%v) %+v", total, err, rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A data directory opens only as the kind of node that made it: a node of
// one group as a Host would leave its queues outside the directory, and a
// Host's as one group would leave its other groups unserved.
func TestHost_RefusesTheOtherLayout(t *testing.T) {
	t.Parallel()
	one := t.TempDir()
	o := rafttest.Options("n1", one)
	o.Transport = raft.NewLocalTransport("n1")
	o.Bootstrap = true
	n, err := raft.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitForLeader(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	push(t, n, "q", "t1")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	ho := rafttest.Options("n1", one)
	ho.RaftAddr = rafttest.FreeAddrs(t, 1)[0]
	ho.Bootstrap = true
	if _, err := cluster.OpenHost(cluster.HostOptions{Node: ho, Groups: 2}); !errors.Is(err, raft.ErrLayout) {
		t.Fatalf("a one-group store opened with 2 groups: err %v, want ErrLayout", err)
	}
	// Still a good node of one group.
	if n, err = raft.Open(o); err != nil {
		t.Fatalf("reopen as one group: %v", err)
	}
	n.Close()

	c := openHosts(t, 1, 2)
	c.leaders(nil)
	c.stop(0)
	po := rafttest.Options("n1", c.dirs[0])
	po.Transport = raft.NewLocalTransport("n1")
	if _, err := raft.Open(po); !errors.Is(err, raft.ErrLayout) || !strings.Contains(err.Error(), "2 Raft groups") {
		t.Fatalf("a host's store opened as one group: err %v, want ErrLayout naming 2 groups", err)
	}
}

// A push split over groups answers each item for itself, and failed only
// when the item was certainly not stored. Host n1 relays the part for
// group 2 (led by n3) through a relay that, by turns: loses the answer of
// the first attempt after the leader stored it (the retry, the same
// prepared entry, stores nothing twice, not even an item whose
// transaction id was minted, and its items are answered queued with the
// ids the first attempt stored: the client sent them once; the same push
// again answers its client-named items duplicate); loses every answer (the
// push is ErrOutcomeUnknown, not failed: its items were stored); refuses
// without proposing (the items are failed, with an error, and nothing of
// them is stored).
func TestHost_SplitPushAnswersFailedOnlyWhenNotStored(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	var (
		mu    sync.Mutex
		mode  string
		calls int
	)
	c.setForward(0, func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error) {
		mu.Lock()
		m := mode
		if g == 2 {
			calls++
		}
		first := calls == 1
		mu.Unlock()
		if g == 2 && m == "refuse" {
			return engine.Result{}, raft.ErrNoLeader
		}
		h := c.host("http-", addr)
		if h == nil {
			return engine.Result{}, raft.ErrForward
		}
		r, err := h.ProposeEntry(ctx, g, entry)
		if g == 2 && (m == "lose" || m == "lose once" && first) {
			return engine.Result{}, errors.Join(raft.ErrForward, errors.New("the answer from group 2 was lost"))
		}
		return r, err
	})
	// Two items a queue, one with a transaction id and one without (its
	// id minted); queue <case>g in group g.
	pushCase := func(name string) ([]engine.PushItem, []engine.PushResult, error) {
		t.Helper()
		mu.Lock()
		mode, calls = name, 0
		mu.Unlock()
		var items []engine.PushItem
		for g := uint32(1); g <= 3; g++ {
			q := fmt.Sprintf("%s-%d", strings.ReplaceAll(name, " ", "-"), g)
			c.place(q, g)
			items = append(items, engine.PushItem{Queue: q, TransactionID: "t-" + q, Payload: []byte(`{}`)},
				engine.PushItem{Queue: q, Payload: []byte(`{}`)})
		}
		res, err := raft.Propose[[]engine.PushResult](ctxT(t), c.h[0], engine.PushCmd{Items: items})
		return items, res, err
	}
	// Read on group 2's leader (n3, preferredLeaders, unless an election
	// on a busy machine moved it) once it has applied all it committed.
	stored := func(q string) int64 {
		var leader *raft.Node
		waitFor(t, "a barrier on group 2's leader", func() bool {
			for _, h := range c.h {
				if g := h.Group(2); g.Status().Role == "leader" && g.Barrier(ctxT(t)) == nil {
					leader = g
					return true
				}
			}
			return false
		})
		info, err := leader.Queue(q)
		if errors.Is(err, engine.ErrQueueNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, p := range info.Partitions {
			n += p.Next
		}
		return n
	}

	items, res, err := pushCase("lose once")
	if err != nil || len(res) != len(items) {
		t.Fatalf("push whose first relay to group 2 lost its answer: %d results, %v; want every item answered", len(res), err)
	}
	for k, r := range res {
		// Group 2's items too: the first attempt stored them, this push.
		if r.Status != engine.Queued || r.MessageID == (engine.ID{}) {
			t.Errorf("item %d (%s, txn %q) answered %+v, want queued with its message id", k, items[k].Queue, items[k].TransactionID, r)
		}
	}
	if got := stored("lose-once-2"); got != 2 {
		t.Errorf("group 2 holds %d messages of its two items after a retried relay, want 2 (stored once each)", got)
	}
	// The same push again: the items with the client's transaction ids
	// are duplicates of the first push's messages, also after a lost
	// answer and a retry; the ones without are new messages.
	first := res
	items, res, err = pushCase("lose once")
	if err != nil || len(res) != len(items) {
		t.Fatalf("the push again: %d results, %v; want every item answered", len(res), err)
	}
	for k, r := range res {
		want, id := engine.Queued, r.MessageID
		if items[k].TransactionID != "" {
			want, id = engine.Duplicate, first[k].MessageID
		}
		if r.Status != want || r.MessageID != id || id == (engine.ID{}) {
			t.Errorf("item %d (%s, txn %q) pushed again answered %+v, want status %d with message id %v", k, items[k].Queue,
				items[k].TransactionID, r, want, id)
		}
	}
	if got := stored("lose-once-2"); got != 3 {
		t.Errorf("group 2 holds %d messages after the push again, want 3 (the new item once)", got)
	}

	_, res, err = pushCase("lose")
	if !errors.Is(err, raft.ErrOutcomeUnknown) {
		t.Fatalf("push whose relays to group 2 all lost their answer: %+v, %v; want ErrOutcomeUnknown", res, err)
	}
	if got := stored("lose-2"); got != 2 {
		t.Errorf("group 2 holds %d messages of a push answered unknown, want 2 (why it could not answer failed)", got)
	}

	items, res, err = pushCase("refuse")
	if err != nil || len(res) != len(items) {
		t.Fatalf("push whose relay to group 2 is refused: %d results, %v; want every item answered", len(res), err)
	}
	for k, r := range res {
		if g := c.h[0].Placement(items[k].Queue); g == 2 {
			if r.Status != engine.Rejected || !raft.NotApplied(r.Err) || r.Err.Error() == "" {
				t.Errorf("item %d (group 2, refused) answered %+v, want failed with the refusal", k, r)
			}
		} else if r.Status != engine.Queued {
			t.Errorf("item %d (group %d) answered %+v, want queued", k, g, r)
		}
	}
	if got := stored("refuse-2"); got != 0 {
		t.Errorf("group 2 holds %d messages of items answered failed, want 0", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls < 2 {
		t.Errorf("the refused part was relayed %d times, want retries until PartWait", calls)
	}
}

// A partition this node's replicas do not know is asked of the leaders of
// the groups it does not lead (command.LookupPartition, relayed), and an
// ack for it goes where a leader says it lives; one no group holds is
// answered by group 1's engine.
func TestHost_AsksTheLeadersForAPartitionItsReplicasLack(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	var mu sync.Mutex
	asked := map[uint32]int{}
	c.setForward(1, func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error) {
		if cmds, err := command.DecodeEntry(entry); err == nil && len(cmds) == 1 {
			if _, ok := cmds[0].Cmd.(command.LookupPartition); ok {
				mu.Lock()
				asked[g]++
				mu.Unlock()
			}
		}
		if h := c.host("http-", addr); h != nil {
			return h.ProposeEntry(ctx, g, entry)
		}
		return engine.Result{}, raft.ErrForward
	})
	unknown := engine.ID{0xee, 0xee}
	res, err := raft.Propose[[]engine.AckResult](ctxT(t), c.h[1], engine.AckCmd{Items: []engine.AckItem{{TransactionID: "x", PartitionID: unknown, Status: cursor.Completed}}})
	if err != nil || len(res) != 1 || res[0].Success {
		t.Fatalf("ack of a partition no group holds: %+v, %v; want one failed item", res, err)
	}
	// n2 leads group 1 only: it asked the leaders of groups 2 and 3, once each.
	mu.Lock()
	got := maps.Clone(asked)
	mu.Unlock()
	if got[2] != 1 || got[3] != 1 || got[1] != 0 {
		t.Fatalf("lookups relayed per group %v, want one to each of groups 2 and 3", got)
	}
	// A group whose leader cannot be asked leaves the answer unknown: the
	// ack is refused whole, nothing proposed, rather than answered
	// "partition not found" by group 1 for a partition that may exist.
	c.setForward(1, func(context.Context, string, uint32, []byte) (engine.Result, error) {
		return engine.Result{}, raft.ErrForward
	})
	res, err = raft.Propose[[]engine.AckResult](ctxT(t), c.h[1], engine.AckCmd{Items: []engine.AckItem{{TransactionID: "x", PartitionID: unknown, Status: cursor.Completed}}})
	if !errors.Is(err, raft.ErrForward) {
		t.Fatalf("ack while a group's leader cannot be asked: %+v, %v; want raft.ErrForward", res, err)
	}
}

// Split pushes from every host while the groups' leaders are transferred
// over and over (and spread back): every item is answered, or the whole
// push is a transient error; an item answered failed is not stored, and
// one answered queued or duplicate is.
func TestHost_SplitPushesDuringLeadershipTransfers(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	queues := []string{"x1", "x2", "x3"}
	for k, q := range queues {
		c.place(q, uint32(k+1))
	}
	type answer struct {
		item   engine.PushItem
		status engine.PushStatus
	}
	var (
		mu       sync.Mutex
		answers  []answer
		failures []error
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	var pushed atomic.Int64 // pushes answered, success or failure
	var pushersDone atomic.Int32
	for i := range c.h {
		wg.Go(func() {
			defer pushersDone.Add(1)
			for seq := 0; seq < 300; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				var items []engine.PushItem
				for _, q := range queues {
					items = append(items, engine.PushItem{Queue: q, TransactionID: fmt.Sprintf("h%d-%d-%s", i, seq, q), Payload: []byte(`{}`)})
				}
				res, err := raft.Propose[[]engine.PushResult](ctxT(t), c.h[i], engine.PushCmd{Items: items})
				pushed.Add(1)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				}
				for k := range res {
					answers = append(answers, answer{items[k], res[k].Status})
				}
				mu.Unlock()
			}
		})
	}
	transfers := 0
	for round := range 6 {
		g := uint32(1 + round%3)
		for _, h := range c.h {
			if h.Group(g).Status().Role == "leader" && h.Group(g).TransferLeadership() == nil {
				transfers++
			}
		}
		// Each round lasts until pushes have been answered across the
		// transfer (or the pushers have sent all theirs).
		from := pushed.Load()
		waitForLong(t, fmt.Sprintf("pushes answered after transfer round %d", round), 30*time.Second, func() bool {
			return pushed.Load() >= from+15 || pushersDone.Load() == int32(len(c.h))
		})
	}
	close(stop)
	wg.Wait()
	if transfers == 0 {
		t.Fatal("no leadership transfer took place")
	}
	for _, err := range failures {
		if !raft.Transient(err) || err.Error() == "" {
			t.Errorf("a push during transfers answered %v, want a transient error (a 503)", err)
		}
	}
	// The last transfer may still be under way: a barrier on its old leader
	// answers ErrLeadershipTransfer until it completes, so settle first.
	leaders := c.settled()
	parts := map[string]engine.ID{}
	for k, q := range queues {
		h := c.h[leaders[k+1]]
		info, err := h.Group(uint32(k + 1)).Queue(q)
		if err != nil {
			t.Fatal(err)
		}
		parts[q] = info.Partitions[0].ID
	}
	failedStored, failed := 0, 0
	for _, a := range answers {
		k := slices.Index(queues, a.item.Queue)
		_, err := c.h[leaders[k+1]].Group(uint32(k+1)).MessageAt(parts[a.item.Queue], a.item.TransactionID)
		stored := err == nil
		switch {
		case a.status == engine.Rejected:
			failed++
			if stored {
				failedStored++
			}
		case !stored:
			t.Errorf("%s/%s answered %d but not stored: %v", a.item.Queue, a.item.TransactionID, a.status, err)
		}
	}
	if failedStored > 0 {
		t.Errorf("%d of %d items answered failed were stored", failedStored, failed)
	}
	t.Logf("%d transfers, %d items answered (%d failed, %d of them stored), %d pushes answered an error",
		transfers, len(answers), failed, failedStored, len(failures))
}
