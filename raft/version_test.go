package raft_test

import (
	"context"
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
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/rafttest"
)

// inProcess stands for the network between in-memory nodes at their
// HTTP addresses (rafttest names them http-<id>): it reads a node's
// version from its Status, as package cluster reads /health, and
// proposes a relayed entry on it, as package cluster's route does. The
// HTTP exchange itself is tested in package cluster.
type inProcess struct {
	mu    sync.Mutex
	nodes map[string]*raft.Node // by HTTP address
}

func (p *inProcess) set(n *raft.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nodes["http-"+n.Status().ID] = n
}

func (p *inProcess) drop(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, addr)
}

func (p *inProcess) node(addr string) (*raft.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.nodes[addr]; n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("%w: nobody at %s", raft.ErrForward, addr)
}

func (p *inProcess) NodeVersion(_ context.Context, addr string) (raft.NodeVersion, error) {
	n, err := p.node(addr)
	if err != nil {
		return raft.NodeVersion{}, err
	}
	st := n.Status()
	return raft.NodeVersion{ID: st.ID, Binary: "test", Command: st.CommandVersion, Others: n.Versions()}, nil
}

func (p *inProcess) Forward(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, uint64, error) {
	n, err := p.node(addr)
	if err != nil {
		return engine.Result{}, 0, err
	}
	r, err := n.ProposeEntry(ctx, g, entry)
	return r, n.Status().Applied, err
}

// TestClusterVersion_GatesProposals runs three nodes of which two
// advertise command version 2 and one version 1, with maintenance
// commands made to need version 2: the cluster runs at 1 and the leader
// refuses them (ErrClusterVersion, nothing proposed) while it goes on
// proposing version-1 commands. Once the third node is restarted
// advertising 2, every node reads version 2 and the command is applied
// everywhere. The followers' addresses, which the version reads need,
// reach the replicated state through the relay (announceSelf).
func TestClusterVersion_GatesProposals(t *testing.T) {
	// Restored in a cleanup registered before the cluster's, so after the
	// nodes have stopped: their loops propose, and read it, until then.
	t.Cleanup(raft.SetCommandVersion(func(s command.Stamped) uint8 {
		switch s.Cmd.(type) {
		case command.Maintenance, engine.DeleteGroupCmd:
			return 2
		}
		return command.Version(s)
	}))
	net := &inProcess{nodes: map[string]*raft.Node{}}
	adjust := func(advertise uint8) func(*raft.Options) {
		return func(o *raft.Options) {
			o.Versions, o.Forward, o.VersionInterval = net, net, 50*time.Millisecond
			o.Version = "v-" + o.ID
			o.CommandVersion = advertise
			if o.ID == "n3" {
				o.CommandVersion = 1 // a binary from before the outbox
			}
		}
	}
	c := rafttest.MakeClusterWith(t, 3, adjust(2))
	for _, n := range c.Nodes {
		net.set(n)
	}
	want := func(version uint8) func() bool {
		return func() bool {
			for _, n := range c.Nodes {
				vs := n.Versions()
				if n.Status().ClusterVersion != version || len(vs) != 3 {
					return false
				}
				for _, v := range vs {
					if !v.Known {
						return false
					}
				}
			}
			return true
		}
	}
	waitFor(t, "every node to read all three versions, cluster version 1", want(1))
	leader := c.Leader()
	for _, v := range leader.Versions() {
		wantCmd, binary := uint8(2), "test"
		if v.ID == "n3" {
			wantCmd = 1
		}
		if v.ID == leader.Status().ID {
			binary = "v-" + v.ID // its own
		}
		if v.Command != wantCmd || v.Binary != binary {
			t.Fatalf("the leader reads %+v, want command version %d, binary %q", v, wantCmd, binary)
		}
	}
	if err := setMaintenance(t, c.Leader(), true, true); !errors.Is(err, raft.ErrClusterVersion) {
		t.Fatalf("a version-2 command at cluster version 1: %v, want ErrClusterVersion", err)
	} else if !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "n3 applies version 1 (upgrade it first)") {
		t.Fatalf("the refusal does not name the version and the server holding it back: %v", err)
	}
	// A command another node relayed passes the same gate.
	entry, err := raft.RelayEntry(engine.DeleteGroupCmd{Group: "g", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.ProposeEntry(ctxT(t), 1, entry); !errors.Is(err, raft.ErrClusterVersion) {
		t.Fatalf("a relayed version-2 command at cluster version 1: %v, want ErrClusterVersion", err)
	}
	push(t, c.Leader(), "q", "t1") // version 1 goes on
	c.EnsureSame()
	for _, n := range c.Nodes {
		if _, pop := n.Maintenance(); pop {
			t.Fatalf("%s: a refused command was applied", n.Status().ID)
		}
	}

	net.drop("http-n3")
	c.Stop(2)
	net.set(c.RestartWith(2, func(o *raft.Options) { adjust(2)(o); o.CommandVersion = 2 }))
	if !eventually(want(2)) {
		for _, n := range c.Nodes {
			t.Logf("%s: %+v %+v", n.Status().ID, n.Status(), n.Versions())
		}
		t.Fatal("timed out waiting for every node to read cluster version 2")
	}
	if err := setMaintenance(t, c.Leader(), true, true); err != nil {
		t.Fatalf("a version-2 command at cluster version 2: %v", err)
	}
	c.EnsureSame()
	for _, n := range c.Nodes {
		if _, pop := n.Maintenance(); !pop {
			t.Fatalf("%s: the command was not applied", n.Status().ID)
		}
	}

	// A node that stops answering keeps the version it last answered: the
	// others stay at version 2 and go on proposing version-2 commands
	// (the commands that replace a dead node's replicas are of a newer
	// version than the oldest binary).
	net.drop("http-n3")
	c.Stop(2)
	time.Sleep(300 * time.Millisecond) // several rounds of version reads
	for _, n := range c.Nodes[:2] {
		if v := n.Status().ClusterVersion; v != 2 {
			t.Fatalf("%s runs at version %d with n3 down, want 2", n.Status().ID, v)
		}
		for _, v := range n.Versions() {
			if v.ID == "n3" && (v.Known || v.Command != 2) {
				t.Fatalf("%s reads n3 down as %+v, want unknown at its last version 2", n.Status().ID, v)
			}
		}
	}
	if err := setMaintenance(t, c.Leader(), true, false); err != nil {
		t.Fatalf("a version-2 command with a node down: %v", err)
	}

	// And across a restart: a node restarted while n3 is still down
	// takes n3 at the version it last answered, kept on disk, not as
	// version 1 (which refused the commands that repair n3's loss).
	for i := range 2 {
		id := fmt.Sprintf("n%d", i+1)
		net.drop("http-" + id)
		c.Stop(i)
		net.set(c.RestartWith(i, adjust(2)))
		c.Heal() // a closed in-memory transport forgets its peers
		restarted := c.Nodes[i]
		if !eventually(func() bool {
			vs := restarted.Versions()
			return len(vs) == 3 && restarted.Status().ClusterVersion == 2
		}) {
			t.Fatalf("%s restarted with n3 down: cluster version %d, versions %+v, want 2",
				id, restarted.Status().ClusterVersion, restarted.Versions())
		}
		for _, v := range restarted.Versions() {
			if v.ID == "n3" && (v.Known || v.Command != 2) {
				t.Fatalf("%s restarted reads n3 down as %+v, want unknown at its last version 2", id, v)
			}
		}
	}
	if err := setMaintenance(t, c.Leader(), false, false); err != nil {
		t.Fatalf("a version-2 command after both live nodes restarted with n3 down: %v", err)
	}

	// A node that never heard n3 answer (a node that joined after n3
	// died; here n1 restarted without its versions file) takes the
	// version the live servers last heard from n3, not version 1.
	net.drop("http-n1")
	c.Stop(0)
	if err := os.Remove(filepath.Join(c.Dir(0), "versions")); err != nil {
		t.Fatalf("remove n1's versions file: %v", err)
	}
	net.set(c.RestartWith(0, adjust(2)))
	c.Heal()
	fresh := c.Nodes[0]
	if !eventually(func() bool {
		vs := fresh.Versions()
		return len(vs) == 3 && fresh.Status().ClusterVersion == 2
	}) {
		t.Fatalf("n1, which never heard n3, with n3 down: cluster version %d, versions %+v, want 2",
			fresh.Status().ClusterVersion, fresh.Versions())
	}
	for _, v := range fresh.Versions() {
		if v.ID == "n3" && (v.Known || v.Command != 2) {
			t.Fatalf("n1 reads n3, which it never heard, as %+v, want unknown at the version n2 heard, 2", v)
		}
	}
}

// A server no node has heard answer (here its address never reaches the
// others; in a cluster, a node that has just joined) counts as version 1,
// and a refusal names it as not heard yet rather than asking for an
// upgrade.
func TestClusterVersion_RefusalNamesAServerNotHeard(t *testing.T) {
	t.Cleanup(raft.SetCommandVersion(func(s command.Stamped) uint8 { // restored once the nodes have stopped
		if _, ok := s.Cmd.(command.Maintenance); ok {
			return 2
		}
		return command.Version(s)
	}))
	net := &inProcess{nodes: map[string]*raft.Node{}}
	c := rafttest.MakeClusterWith(t, 3, func(o *raft.Options) {
		o.Versions, o.Forward, o.VersionInterval = net, net, 50*time.Millisecond
		o.CommandVersion = 2
	})
	// Every node but one follower answers.
	leader := c.Leader()
	silent := ""
	for _, n := range c.Nodes {
		if id := n.Status().ID; n != leader && silent == "" {
			silent = id
			continue
		}
		net.set(n)
	}
	waitFor(t, "the leader to read two servers at 2 and "+silent+" not at all", func() bool {
		known := 0
		for _, v := range leader.Versions() {
			if v.Known {
				known++
			}
		}
		return known == 2
	})
	err := setMaintenance(t, leader, true, true)
	if !errors.Is(err, raft.ErrClusterVersion) || !strings.Contains(err.Error(), silent+" has not answered yet") {
		t.Fatalf("a version-2 command with %s never heard: %v, want ErrClusterVersion naming it as not heard yet", silent, err)
	}
}

func eventually(cond func() bool) bool {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
