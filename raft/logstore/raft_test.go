package logstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/raft/logstore"
)

// sliceFSM appends every command to a slice.
type sliceFSM struct {
	mu       sync.Mutex
	commands [][]byte
}

func (f *sliceFSM) Apply(l *hraft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = append(f.commands, bytes.Clone(l.Data))
	return len(f.commands)
}

func (f *sliceFSM) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &sliceSnapshot{commands: slices.Clone(f.commands)}, nil
}

func (f *sliceFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commands = nil
	if len(b) > 0 {
		f.commands = bytes.Split(b, []byte{'\n'})
	}
	return nil
}

func (f *sliceFSM) snapshot() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.commands)
}

type sliceSnapshot struct{ commands [][]byte }

func (s *sliceSnapshot) Persist(sink hraft.SnapshotSink) error {
	if _, err := sink.Write(bytes.Join(s.commands, []byte{'\n'})); err != nil {
		return errors.Join(err, sink.Cancel())
	}
	return sink.Close()
}

func (s *sliceSnapshot) Release() {}

// node is one single-voter raft instance on the Pebble store, wired as the
// broker's node wires it: LogCache over the Store for the log, the Store
// itself for stable state.
type node struct {
	raft      *hraft.Raft
	fsm       *sliceFSM
	store     *logstore.Store
	transport *hraft.InmemTransport
}

func startNode(t *testing.T, dir string, snaps hraft.SnapshotStore, bootstrap bool) *node {
	t.Helper()
	conf := hraft.DefaultConfig()
	conf.LocalID = "node1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.LogOutput = io.Discard

	n := &node{fsm: &sliceFSM{}, store: mustOpen(t, dir)}
	logs, err := hraft.NewLogCache(64, n.store)
	if err != nil {
		t.Fatalf("new log cache: %v", err)
	}
	var addr hraft.ServerAddress
	addr, n.transport = hraft.NewInmemTransport("node1")

	existing, err := hraft.HasExistingState(logs, n.store, snaps)
	if err != nil {
		t.Fatalf("has existing state: %v", err)
	}
	if existing == bootstrap {
		t.Fatalf("has existing state = %v on a bootstrap=%v start", existing, bootstrap)
	}
	if bootstrap {
		cfg := hraft.Configuration{Servers: []hraft.Server{{ID: conf.LocalID, Address: addr}}}
		if err := hraft.BootstrapCluster(conf, logs, n.store, snaps, n.transport, cfg); err != nil {
			t.Fatalf("bootstrap: %v", err)
		}
	}
	if n.raft, err = hraft.NewRaft(conf, n.fsm, logs, n.store, snaps, n.transport); err != nil {
		t.Fatalf("new raft: %v", err)
	}
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *node) waitLeader(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.raft.State() != hraft.Leader {
		if time.Now().After(deadline) {
			t.Fatalf("no leader after 10s, state %v", n.raft.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop shuts raft down, then checks and closes the store. Safe to repeat.
func (n *node) stop(t *testing.T) {
	t.Helper()
	if n.raft == nil {
		return
	}
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	n.raft = nil
	if err := n.transport.Close(); err != nil {
		t.Errorf("close transport: %v", err)
	}
	mustClose(t, n.store)
}

// TestStore_Raft runs a real single-node raft on the store: apply 100
// commands, restart on the same directory, and check that the log survived,
// the node leads again and the FSM replays the same commands in order.
func TestStore_Raft(t *testing.T) {
	dir := t.TempDir()
	snaps := hraft.NewInmemSnapshotStore() // kept across the restart, as a disk one would be
	const commands = 100
	var want [][]byte
	for i := range commands {
		want = append(want, fmt.Appendf(nil, "command-%03d", i))
	}

	n := startNode(t, dir, snaps, true)
	n.waitLeader(t)
	for i, cmd := range want {
		f := n.raft.Apply(cmd, 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		if got := f.Response(); got != i+1 {
			t.Fatalf("apply %d: response %v, want %d", i, got, i+1)
		}
	}
	lastBefore, err := n.store.LastIndex()
	if err != nil {
		t.Fatalf("last index: %v", err)
	}
	n.stop(t)

	n = startNode(t, dir, snaps, false)
	first, err := n.store.FirstIndex()
	if err != nil {
		t.Fatalf("first index: %v", err)
	}
	last, err := n.store.LastIndex()
	if err != nil {
		t.Fatalf("last index: %v", err)
	}
	if first != 1 || last != lastBefore || last < commands {
		t.Errorf("reopened bounds = %d-%d, want 1-%d (>= %d)", first, last, lastBefore, commands)
	}
	var logged [][]byte
	for i := first; i <= last; i++ {
		var l hraft.Log
		if err := n.store.GetLog(i, &l); err != nil {
			t.Fatalf("get log %d: %v", i, err)
		}
		if l.Type == hraft.LogCommand {
			logged = append(logged, l.Data)
		}
	}
	if !slices.EqualFunc(logged, want, bytes.Equal) {
		t.Errorf("log holds %d commands, want the %d applied, in order", len(logged), len(want))
	}

	n.waitLeader(t)
	if err := n.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	if got := n.fsm.snapshot(); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Errorf("FSM replayed %d commands, want the %d applied, in order", len(got), len(want))
	}
	if last, _ := n.store.LastIndex(); last <= lastBefore {
		t.Errorf("last index after re-election = %d, want > %d (new term's no-op)", last, lastBefore)
	}
}
