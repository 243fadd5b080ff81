package servertest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/meter"
)

// Groups is a cluster of nodes in one process with queues spread over
// Raft groups, as `queen serve --groups G` runs them: each node is a
// cluster.Host (real Raft over loopback TCP, real Pebble in t.TempDir())
// served by a server.Server on 127.0.0.1, and the nodes share a cluster
// secret, so commands cross between them on the one path between nodes
// (package cluster) and requests are relayed between their HTTP servers.
// It lets a test drive the cluster over HTTP and look at each node's
// state, which cmd/queen's process tests cannot.
type Groups struct {
	t     testing.TB
	Nodes []*GroupNode
	// replicas is each data group's voters (cluster.HostOptions.Replicas; 0:
	// every node).
	replicas int
	// tune, when set, changes every node's host options before it opens
	// (StartGroupsTuned).
	tune func(*cluster.HostOptions)
	// stops stops each node, once (Stop, and at cleanup).
	stops []func()
}

// GroupNode is one node of Groups.
type GroupNode struct {
	ID      string
	URL     string // "http://127.0.0.1:port"
	Host    *cluster.Host
	Metrics *metrics.Set // the node's own: /metrics/prometheus writes it
}

// GroupSecret is the cluster secret the nodes of Groups share.
const GroupSecret = "servertest-cluster-secret-servertest"

// StartGroups starts n nodes that each hold groups data groups (and the
// directory), adjust (when set) changing node i's server options, and
// waits (WaitLeaders) until every group has a leader all nodes know. The
// nodes stop at test cleanup.
func StartGroups(t testing.TB, n, groups int, adjust func(i int, o *server.Options)) *Groups {
	t.Helper()
	return StartGroupsOf(t, n, groups, 0, adjust)
}

// StartGroupsOf is StartGroups with each data group on replicas of the n
// nodes (cluster.HostOptions.Replicas; 0: on every node): a node outside a
// group holds no replica of it, and reads it from its leader. With
// replicas it waits (WaitLayout) until every node's directory records each
// group's voters and leader, rather than for the leaders WaitLeaders
// expects.
func StartGroupsOf(t testing.TB, n, groups, replicas int, adjust func(i int, o *server.Options)) *Groups {
	t.Helper()
	return startGroups(t, &Groups{t: t, replicas: replicas}, n, groups, adjust)
}

// StartGroupsTuned is StartGroups with tune changing every node's host
// options (its Raft options are their Node) before it opens, after the
// cluster's own: a test's slower timers, say.
func StartGroupsTuned(t testing.TB, n, groups int, tune func(*cluster.HostOptions), adjust func(i int, o *server.Options)) *Groups {
	t.Helper()
	return startGroups(t, &Groups{t: t, tune: tune}, n, groups, adjust)
}

func startGroups(t testing.TB, c *Groups, n, groups int, adjust func(i int, o *server.Options)) *Groups {
	t.Helper()
	replicas := c.replicas
	// The Raft ports are picked free and released before the hosts bind
	// them, so another process's outgoing connection may take one in
	// between (the kernel hands out the same range): the whole cluster then
	// starts over on new ports, at most three times.
	for attempt := 1; ; attempt++ {
		base := t.TempDir()
		var peers []raft.Peer
		for i, a := range rafttest.FreeAddrs(t, n) {
			peers = append(peers, raft.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: a})
		}
		var (
			stops []func()
			err   error
		)
		c.Nodes = nil
		for i := range n {
			node, stop, serr := c.start(i, peers, filepath.Join(base, peers[i].ID), groups, adjust)
			if serr != nil {
				err = serr
				break
			}
			c.Nodes = append(c.Nodes, node)
			stops = append(stops, sync.OnceFunc(stop))
		}
		stopAll := func() {
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
		}
		if err == nil {
			c.stops = stops
			t.Cleanup(stopAll)
			break
		}
		stopAll()
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
	}
	if replicas > 0 {
		c.WaitLayout()
		return c
	}
	c.WaitLeaders()
	return c
}

// WaitLayout polls, up to 30 s, until every node's layout (cluster.Host.Layout:
// its own view of the groups it hosts, the directory's record of the
// others) names each data group's replicas voters and the same leader, the
// one the Hosts spread leadership towards (cluster.Host.WantedLeader), whose HTTP address every node knows, and that leader has applied all it
// committed. It returns each group's leader's index in Nodes, by group.
func (c *Groups) WaitLayout() map[uint32]int {
	c.t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		leaders, why := c.laidOut()
		if why == "" {
			return leaders
		}
		last = why
	}
	c.t.Fatalf("the groups' layout did not settle in 30 s: %s", last)
	return nil
}

// laidOut is each data group's leader's index once the layout is settled
// (WaitLayout), else why not.
func (c *Groups) laidOut() (map[uint32]int, string) {
	leaders := map[uint32]int{}
	for _, g := range c.Nodes[0].Host.Groups()[1:] {
		leader := ""
		for _, n := range c.Nodes {
			lg := n.Host.Layout().Groups[g]
			switch {
			case len(lg.Members) != c.replicas || lg.Leader == "":
				return nil, fmt.Sprintf("group %d: %s sees voters %v, leader %q", g, n.ID, lg.Members, lg.Leader)
			case leader != "" && lg.Leader != leader:
				return nil, fmt.Sprintf("group %d: the nodes name %s and %s", g, leader, lg.Leader)
			}
			leader = lg.Leader
		}
		i := c.index(leader)
		if i < 0 {
			return nil, fmt.Sprintf("group %d: leader %s is no node", g, leader)
		}
		if want := c.Nodes[i].Host.WantedLeader(g); leader != want {
			return nil, fmt.Sprintf("group %d: led by %s, spreading to %s", g, leader, want)
		}
		for _, n := range c.Nodes {
			if n.Host.Layout().Nodes[i].HTTP == "" {
				return nil, fmt.Sprintf("group %d: %s does not know %s's address", g, n.ID, leader)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Nodes[i].Host.Group(g).Barrier(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Sprintf("group %d: barrier on %s: %v", g, leader, err)
		}
		leaders[g] = i
	}
	return leaders, ""
}

// start starts node i; stop stops it.
func (c *Groups) start(i int, peers []raft.Peer, dir string, groups int, adjust func(int, *server.Options)) (_ *GroupNode, stop func(), _ error) {
	t := c.t
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	node := &GroupNode{ID: peers[i].ID, URL: "http://" + ln.Addr().String(), Metrics: metrics.NewSet()}
	o := rafttest.Options(node.ID, dir)
	o.RaftAddr = peers[i].Addr
	o.HTTPAddr = ln.Addr().String()
	o.Peers = peers
	o.ClusterSecret = GroupSecret
	// Three nodes of several groups each share two busy cores under the
	// race detector: rafttest's 100 ms would call elections mid-test.
	o.HeartbeatTimeout, o.ElectionTimeout, o.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
	if !testing.Verbose() {
		// Elections and dials refused while the nodes start and stop.
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// Answers bounded as queen serve bounds them: the default MaxBodyBytes,
	// 32 times (its transport carries the server's relays too).
	fwd := cluster.New(cluster.Options{NodeID: node.ID, Secret: GroupSecret, MaxResponseBodySize: 32 * (64 << 20),
		Refusal: server.Refusal, Metrics: node.Metrics})
	// The nodes read each other's versions as queen serve's do, often, so
	// that the cluster reaches this binary's command version (the outbox's
	// commands need 2) a moment after start.
	o.Versions, o.VersionInterval = fwd, 200*time.Millisecond
	ho := cluster.HostOptions{Node: o, Groups: groups, Replicas: c.replicas, SpreadInterval: 50 * time.Millisecond, LoadInterval: 500 * time.Millisecond,
		SpreadHold: 300 * time.Millisecond, Forward: fwd, OnMove: meter.NewMoves(node.Metrics).Record}
	if c.tune != nil {
		c.tune(&ho)
	}
	h, err := cluster.OpenHost(ho)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("open host %s: %w", node.ID, err)
	}
	node.Host = h
	opts := server.Options{
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		SpoolDir:      filepath.Join(dir, "spool"),
		Metrics:       node.Metrics,
		ClusterSecret: GroupSecret,
		Cluster:       fwd,
	}
	if adjust != nil {
		adjust(i, &opts)
	}
	s, err := server.New(h, opts)
	if err != nil {
		ln.Close()
		h.Close()
		t.Fatalf("server.New %s: %v", node.ID, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	return node, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("server %s shutdown: %v", node.ID, err)
		}
		if err := <-done; err != nil {
			t.Errorf("server %s serve: %v", node.ID, err)
		}
		if err := h.Close(); err != nil {
			t.Errorf("close host %s: %v", node.ID, err)
		}
	}, nil
}

// WaitLeaders polls, up to 30 s, until every group has a leader that
// every node names and knows the HTTP address of, the one the Hosts
// spread leadership towards (group g on the node at g mod n, the ids in
// order), which has applied all it committed; it returns each group's
// leader's index in Nodes, by group.
func (c *Groups) WaitLeaders() map[uint32]int {
	c.t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c.publish()
		leaders, why := c.agreed()
		if why == "" {
			return leaders
		}
		last = why
	}
	c.t.Fatalf("groups did not settle in 30 s: %s", last)
	return nil
}

// publish has every group's leader publish what it applied
// (raft.Node.Publish): a leader's address reaches a follower with the
// entry that announces it, applied there once the follower learns that it
// committed, which a cluster whose leaders send the commit index late
// (StartGroupsTuned, raft.Options.CommitTimeout) would not tell it.
func (c *Groups) publish() {
	for _, n := range c.Nodes {
		for _, g := range n.Host.Groups() {
			if r := n.Host.Group(g); r != nil && r.IsLeader() {
				r.Publish(r.Applied())
			}
		}
	}
}

// agreed is each group's leader's index when the groups are settled
// (WaitLeaders), else why not.
func (c *Groups) agreed() (map[uint32]int, string) {
	leaders := map[uint32]int{}
	for _, g := range c.Nodes[0].Host.Groups() {
		var named []string
		for _, n := range c.Nodes {
			st := n.Host.GroupStatus(g)
			if st.Leader == "" || (st.Leader != st.ID && st.LeaderHTTP == "") {
				return nil, fmt.Sprintf("group %d: %s sees leader %q at %q", g, n.ID, st.Leader, st.LeaderHTTP)
			}
			named = append(named, st.Leader)
		}
		for _, l := range named[1:] {
			if l != named[0] {
				return nil, fmt.Sprintf("group %d: the nodes name %s", g, strings.Join(named, ", "))
			}
		}
		i := c.index(named[0])
		if i < 0 {
			return nil, fmt.Sprintf("group %d: leader %s is no node", g, named[0])
		}
		if want := int(g) % len(c.Nodes); i != want {
			return nil, fmt.Sprintf("group %d: led by %s, spreading to %s", g, named[0], c.Nodes[want].ID)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := c.Nodes[i].Host.Group(g).Barrier(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Sprintf("group %d: barrier on %s: %v", g, named[0], err)
		}
		leaders[g] = i
	}
	return leaders, ""
}

// Stop stops node i for good, as a crash would to its peers: its server
// and its Host close, and the other nodes see its Raft and HTTP ports
// refuse. Its directory and group replicas stay members of their groups:
// stopping a majority of a group's voters leaves that group without a
// leader.
func (c *Groups) Stop(i int) { c.stops[i]() }

func (c *Groups) index(id string) int {
	for i, n := range c.Nodes {
		if n.ID == id {
			return i
		}
	}
	return -1
}

// Follower is the index of a node that does not lead group g, as the
// nodes see it now.
func (c *Groups) Follower(g uint32) int {
	c.t.Helper()
	leader := c.index(c.Nodes[0].Host.GroupStatus(g).Leader)
	for i := range c.Nodes {
		if i != leader {
			return i
		}
	}
	c.t.Fatalf("group %d: no node follows its leader", g)
	return -1
}
