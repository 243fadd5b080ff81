package raft_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// founders are three founders on TCP with the founders' round on
// (raft/identity.go), whose nodes open concurrently as serve's do.
type founders struct {
	t     *testing.T
	peers []raft.Peer
	dirs  []string
	mu    sync.Mutex
	nodes []*raft.Node
}

func newFounders(t *testing.T) *founders {
	f := &founders{t: t, nodes: make([]*raft.Node, 3)}
	base := t.TempDir()
	for i, a := range rafttest.FreeAddrs(t, 3) {
		id := fmt.Sprintf("n%d", i+1)
		f.peers = append(f.peers, raft.Peer{ID: id, Addr: a})
		f.dirs = append(f.dirs, filepath.Join(base, id))
	}
	t.Cleanup(func() {
		for i := range f.nodes {
			f.close(i)
		}
	})
	return f
}

// open opens founder i with the others as its peers and returns what
// raft.Open returned; the node is kept for cleanup.
func (f *founders) open(i int) (*raft.Node, error) {
	o := rafttest.Options(f.peers[i].ID, f.dirs[i])
	o.RaftAddr, o.HTTPAddr, o.Peers = f.peers[i].Addr, "http-"+f.peers[i].ID, f.peers
	o.ClusterSecret = "founders secret"
	o.RetentionInterval = 0
	o.AwaitFounders = true
	n, err := raft.Open(o)
	if err == nil {
		f.mu.Lock()
		f.nodes[i] = n
		f.mu.Unlock()
	}
	return n, err
}

// openAsync opens founder i on a goroutine; the channel gets Open's error.
func (f *founders) openAsync(i int) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := f.open(i)
		done <- err
	}()
	return done
}

func (f *founders) close(i int) {
	f.mu.Lock()
	n := f.nodes[i]
	f.nodes[i] = nil
	f.mu.Unlock()
	if n != nil {
		if err := n.Close(); err != nil {
			f.t.Errorf("close %s: %v", f.peers[i].ID, err)
		}
	}
}

func (f *founders) running(idx ...int) []*raft.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*raft.Node
	for _, i := range idx {
		if f.nodes[i] != nil {
			out = append(out, f.nodes[i])
		}
	}
	return out
}

func (f *founders) index(n *raft.Node) int {
	for i, p := range f.peers {
		if p.ID == n.Status().ID {
			return i
		}
	}
	f.t.Fatalf("no founder %s", n.Status().ID)
	return -1
}

func (f *founders) wipe(i int) {
	if err := os.RemoveAll(f.dirs[i]); err != nil {
		f.t.Fatal(err)
	}
}

func awaitOpen(t *testing.T, what string, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("%s: Open has not returned after %v", what, within)
		return nil
	}
}

// stillOpening fails when Open has returned: the founder must still be
// waiting for the others.
func stillOpening(t *testing.T, what string, done <-chan error, wait time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: Open returned (%v) while a founder that holds state had not answered", what, err)
	case <-time.After(wait):
	}
}

// pushed checks that every transaction of txns is stored: pushed again
// through the leader, each answers duplicate.
func pushedAll(t *testing.T, nodes []*raft.Node, queue string, txns []string) {
	t.Helper()
	for _, txn := range txns {
		leader := rafttest.WaitLeader(t, nodes...)
		if res := push(t, leader, queue, txn); res.Status != engine.Duplicate {
			t.Errorf("%s pushed again answers %v: the acknowledged push was lost", txn, res.Status)
		}
	}
}

// TestFounders_FirstStartWaitsForEveryFounder: founders that start apart
// wait for each other (the first two do not bootstrap without the third,
// which could be a founder whose disk was lost), then form one cluster;
// each founder's store has an id of its own.
func TestFounders_FirstStartWaitsForEveryFounder(t *testing.T) {
	t.Parallel()
	f := newFounders(t)
	first, second := f.openAsync(0), f.openAsync(1)
	stillOpening(t, "n1 and n2 without n3", first, time.Second)
	third := f.openAsync(2)
	for i, done := range []<-chan error{first, second, third} {
		if err := awaitOpen(t, f.peers[i].ID, done, 30*time.Second); err != nil {
			t.Fatalf("open %s: %v", f.peers[i].ID, err)
		}
	}
	nodes := f.running(0, 1, 2)
	leader := rafttest.WaitLeader(t, nodes...)
	push(t, leader, "orders", "t1")
	stores := map[string]bool{}
	cluster := nodes[0].Status().Cluster
	for _, n := range nodes {
		st := n.Status()
		if len(st.Store) != 32 || stores[st.Store] {
			t.Errorf("%s: store id %q, want 32 hex digits of its own (have %v)", st.ID, st.Store, stores)
		}
		stores[st.Store] = true
		// Each founder derives the cluster id from the founders' stores:
		// the same everywhere, and not any one store's.
		if len(st.Cluster) != 32 || st.Cluster != cluster || stores[st.Cluster] {
			t.Errorf("%s: cluster id %q, want the same 32 hex digits on every founder (%q)", st.ID, st.Cluster, cluster)
		}
	}
}

// TestFounders_LostStoreNeverVotes is the scenario of a StatefulSet pod
// given a new volume while a quorum is down: a follower (n2) falls behind,
// twenty pushes commit on the leader and the other follower, both stop,
// the other follower's directory is deleted and it starts again under its
// old id with the same peers. It must not bootstrap, nor vote: its Open
// waits while no founder answers, and once n2 answers it refuses with
// ErrStoreLost. When the leader is back, every acknowledged push is there.
// Removing the old store (Leave, forced) then lets it know it is no
// member (ErrNotMember): it may join as a new one.
func TestFounders_LostStoreNeverVotes(t *testing.T) {
	t.Parallel()
	f := newFounders(t)
	var opening []<-chan error
	for i := range 3 {
		opening = append(opening, f.openAsync(i))
	}
	for i, done := range opening {
		if err := awaitOpen(t, f.peers[i].ID, done, 30*time.Second); err != nil {
			t.Fatalf("open %s: %v", f.peers[i].ID, err)
		}
	}
	leader := rafttest.WaitLeader(t, f.running(0, 1, 2)...)
	push(t, leader, "orders", "before")
	li := f.index(leader)
	behind, wiped := (li+1)%3, (li+2)%3

	// The follower that falls behind is stopped (a pause would do: it
	// answers nothing either way).
	f.close(behind)
	var txns []string
	for i := range 20 {
		txn := fmt.Sprintf("acked-%d", i)
		if res := push(t, leader, "orders", txn); res.Status != engine.Queued {
			t.Fatalf("push %s: %v", txn, res.Status)
		}
		txns = append(txns, txn)
	}
	f.close(li)
	f.close(wiped)
	f.wipe(wiped)

	// The wiped node hears no founder: it waits, and runs no Raft.
	back := f.openAsync(wiped)
	stillOpening(t, f.peers[wiped].ID+" with every founder down", back, 2*time.Second)
	// The follower that fell behind comes back: it answers with state
	// that was not born with the new store.
	if _, err := f.open(behind); err != nil {
		t.Fatalf("reopen %s: %v", f.peers[behind].ID, err)
	}
	err := awaitOpen(t, f.peers[wiped].ID, back, 60*time.Second)
	if !errors.Is(err, raft.ErrStoreLost) {
		t.Fatalf("%s with a new store: Open returned %v, want ErrStoreLost", f.peers[wiped].ID, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "queen leave") || !strings.Contains(msg, "--force") {
		t.Errorf("the refusal does not name the fix: %s", msg)
	}
	// Nothing is elected while only the node that fell behind runs.
	time.Sleep(500 * time.Millisecond)
	if st := f.running(behind)[0].Status(); st.Role == "leader" {
		t.Fatalf("%s, behind, became leader alone: %+v", st.ID, st)
	}
	if _, err := f.open(li); err != nil {
		t.Fatalf("reopen %s: %v", f.peers[li].ID, err)
	}
	live := f.running(li, behind)
	pushedAll(t, live, "orders", txns)

	// The old store removed, the node is no member: ErrNotMember.
	leader = rafttest.WaitLeader(t, live...)
	if err := leader.Leave(f.peers[wiped].ID, true); err != nil {
		t.Fatalf("leave %s: %v", f.peers[wiped].ID, err)
	}
	if _, err := f.open(wiped); !errors.Is(err, raft.ErrNotMember) {
		t.Fatalf("%s after its old store left: Open returned %v, want ErrNotMember", f.peers[wiped].ID, err)
	}
}
