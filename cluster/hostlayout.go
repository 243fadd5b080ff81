package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/placement"
)

// Groups on R of N nodes (issue 30, ARCHITECTURE.md "Step 2, R voters of
// N nodes").
//
// With HostOptions.Replicas below the founders' count, only R nodes are a
// group's voters, and only they hold a replica of it (placed.go): the
// others open none until a replica step places one on them. The directory
// stays on every node, and
// holds where each group lives: its R (command.Replicas) and, per group,
// the voters and leader its leader last reported (command.GroupLayout,
// reported by layoutLoop). A node routes a command for a group it does not
// host to the leader that record names (the cluster path), and answers a
// read of it from that leader (hostremote.go).

// founders is group g's voters at a cluster's first start: every founder
// (the directory, or every group when R is 0 or covers them all), else R
// of them by the placement rule, which every founder computes alike.
func founders(peers []raft.Peer, r int, groups int, g uint32) []raft.Peer {
	if g == raft.Directory || r <= 0 || r >= len(peers) {
		return peers
	}
	nodes := make([]placement.Node, len(peers))
	for i, p := range peers {
		nodes[i] = placement.Node{ID: p.ID, Live: true}
	}
	gs := make([]placement.Group, groups)
	for i := range gs {
		gs[i].ID = uint32(i + 1)
	}
	var voters []string
	for _, s := range placement.Plan(gs, nodes, r) {
		if s.Group == g && s.Add != "" {
			voters = append(voters, s.Add)
		}
	}
	return slices.DeleteFunc(slices.Clone(peers), func(p raft.Peer) bool { return !slices.Contains(voters, p.ID) })
}

// hosts reports whether this node serves group g from its own replica: the
// directory always; a data group when the directory's record lists this
// node among its voters, or, before any record (every node hosts every
// group, or the group's leader has not reported yet), when this node is
// in the group's configuration. A node the record leaves out (a
// non-voter still catching up, a voter removed) routes to the voters
// instead: its replica may be stale; so does a node cut off from the
// directory for longer than ReplaceAfter (CutOff).
//
// A replica starts serving g only once it has caught up with a read index
// its leader confirmed after the record listed it (servingLoop), not the
// moment the record does: see "A replica that starts serving" below.
func (h *Host) hosts(g uint32) bool {
	if g == raft.Directory {
		return true
	}
	if !h.listed(g) {
		h.serving[g].Store(servingOff)
		return false
	}
	return h.serving[g].Load() == servingOn && h.replica(g) != nil
}

// listed reports whether group g is this node's to serve by the records:
// the directory's record lists this node among g's voters, or, before
// there is a record, this node is in g's configuration; and this node is
// not cut off from the directory.
func (h *Host) listed(g uint32) bool {
	if h.cutOff.Load() {
		return false
	}
	rec := h.layoutRecord(g)
	if rec.Term == 0 {
		n := h.replica(g)
		return n != nil && n.IsMember()
	}
	return slices.Contains(rec.Voters, h.opts.Node.ID)
}

// A replica that starts serving.
//
// A linearizable read waits, before it runs, for the replicas this node
// serves the groups it reads from (the edge's read barrier, package
// server/relay: every group, or the directory and one queue's group) and
// then reads each group where hosts says: here, or at the group's leader.
// Were hosts to turn true between the two (the directory's record starts
// listing this node: a replica step promoted it, or a node came back under
// a new store), the read would run on a replica the barrier never waited
// for, and could miss a write answered before the read began. So a group
// goes servingOff → servingCatching → servingOn: in servingCatching the
// barrier waits for the replica (Joining) while reads still go to the
// leader, and servingLoop turns it servingOn only once the replica has
// applied a read index its leader confirmed after the state became
// servingCatching. A barrier that skipped the group began before then, so
// every write answered before it is within that index; one that began
// after waited itself. Back to servingOff as soon as the record stops
// listing this node (hosts, servingLoop).
const (
	servingOff int32 = iota
	servingCatching
	servingOn
)

// servingInterval is how often servingLoop looks for groups to catch up.
const servingInterval = 100 * time.Millisecond

// Joining reports whether this node's replica of group g is being caught
// up to serve g (servingCatching): a read barrier must wait for it as for
// a replica it serves from (Hosts), since reads may be served from it by
// the time the read runs.
func (h *Host) Joining(g uint32) bool {
	return g != raft.Directory && int(g) < len(h.serving) && h.serving[g].Load() == servingCatching
}

// SetReadCatchUp sets how a replica is caught up before it serves its
// group (servingLoop): f returns once this node's replica of g has
// applied a read index g's leader confirmed after f was called (the edge's
// read consistency, relay.Reads.CatchUp). Unset, a listed group is served
// at once (a node without an edge: the tests of this package).
func (h *Host) SetReadCatchUp(f func(ctx context.Context, g uint32) error) { h.readCatchUp.Store(&f) }

// servingLoop moves each data group's serving state (see "A replica that
// starts serving"): listed groups not served are caught up, one
// goroutine each, every servingInterval.
func (h *Host) servingLoop() {
	defer h.wg.Done()
	t := time.NewTicker(servingInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-h.done:
			return
		}
		var wg sync.WaitGroup
		for g := uint32(1); int(g) < len(h.nodes); g++ {
			if !h.listed(g) || h.replica(g) == nil {
				h.serving[g].Store(servingOff)
				continue
			}
			f := h.readCatchUp.Load()
			if f == nil {
				h.serving[g].Store(servingOn)
				continue
			}
			if !h.serving[g].CompareAndSwap(servingOff, servingCatching) {
				continue
			}
			wg.Go(func() { h.catchUpToServe(g, *f) })
		}
		wg.Wait()
	}
}

// catchUpToServe runs f for group g in servingCatching and turns g
// servingOn when it returns nil, servingOff when it fails (the loop tries
// again), unless hosts turned it servingOff meanwhile.
func (h *Host) catchUpToServe(g uint32, f func(context.Context, uint32) error) {
	ctx, cancel := context.WithTimeout(context.Background(), catchUpToServeTimeout)
	defer cancel()
	go func() {
		select {
		case <-h.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := f(ctx, g); err != nil {
		h.serving[g].CompareAndSwap(servingCatching, servingOff)
		h.logger(g).Debug("raft: host: catch up before serving the group; trying again", "err", err)
		return
	}
	if h.serving[g].CompareAndSwap(servingCatching, servingOn) {
		h.logger(g).Info("raft: host: this node serves the group from its replica")
	}
}

// catchUpToServeTimeout bounds one catch-up of servingLoop.
const catchUpToServeTimeout = 10 * time.Second

// layoutRecord is group g's record in this node's directory replica.
func (h *Host) layoutRecord(g uint32) command.GroupLayout {
	return command.LayoutOf(h.directory().Engine().ClusterValue, g)
}

// leaderOf is group g's leader and its HTTP address ("" while unknown):
// as this node's replica follows it when it hosts g, else as the
// directory records it.
func (h *Host) leaderOf(g uint32) raft.Status {
	if n := h.served(g); n != nil {
		st := n.Status()
		st.LeaderHTTP = h.httpOf(st)
		return st
	}
	st := raft.Status{ID: h.opts.Node.ID, Role: "none", Leader: h.layoutRecord(g).Leader}
	st.LeaderHTTP = h.httpOf(st)
	return st
}

// ReplicaCount is R as the directory records it, 0 when every node hosts
// every group. Until it is recorded (the cluster runs command version 3 a
// few seconds after a fresh start), a founder answers its own
// HostOptions.Replicas: a node joining in those seconds would otherwise
// be made a voter of every group.
func (h *Host) ReplicaCount() uint32 {
	if r := command.ReplicaCount(h.directory().Engine().ClusterValue); r != 0 {
		return r
	}
	return uint32(h.opts.Replicas)
}

// layoutLoop reports, for each data group this node leads, its voters and
// itself to the directory whenever the directory's record says otherwise
// (command.GroupLayout): the record other nodes route by. It looks every
// layoutInterval, so a new leader is on record within about that and a
// commit of the directory.
func (h *Host) layoutLoop() {
	defer h.wg.Done()
	t := time.NewTicker(layoutInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-h.done:
			return
		}
		for g := uint32(1); int(g) < len(h.nodes); g++ {
			h.reportLayout(g)
		}
	}
}

// layoutInterval is how often layoutLoop looks.
const layoutInterval = 200 * time.Millisecond

// reportLayout reports group g's layout if this node leads g and the
// directory's record differs.
func (h *Host) reportLayout(g uint32) {
	n := h.replica(g)
	if n == nil || !n.IsLeader() || h.GroupCount() == 0 {
		return
	}
	term := n.Term()
	voters := n.Members()
	rec := h.layoutRecord(g)
	self := h.opts.Node.ID
	if rec.Term == term && rec.Leader == self && slices.Equal(rec.Voters, voters) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Node.ApplyTimeout)
	defer cancel()
	_, err := h.run(ctx, raft.Directory, command.GroupLayout{Group: g, Term: term, Leader: self, Voters: voters})
	if err != nil && !errors.Is(err, raft.ErrShutdown) && !errors.Is(err, raft.ErrClusterVersion) {
		n.Logger().Debug("raft: host: report the group's layout to the directory", "err", err)
	}
}

// WantedLeader is the member the Host hands group g's leadership to once
// it has been live a while (spreadLoop): the one placement.Leaders names
// from the directory's records when groups are on R of N nodes, else the
// group's preferred member; "" when neither is known.
func (h *Host) WantedLeader(g uint32) string {
	if want := h.wantedLeaders(); want != nil && int(g) < len(want) {
		return want[g]
	}
	n := h.replica(g)
	if n == nil {
		return ""
	}
	conf, err := n.Configuration()
	if err != nil {
		return ""
	}
	return preferred(conf, g)
}

// Layout is every group the Host runs, the directory first, and the
// servers of the directory's configuration (every node is in the
// directory). A group this node does not host is as the directory records
// it (hostlayout.go).
func (h *Host) Layout() raft.Layout {
	l := raft.Layout{Nodes: h.directory().Layout().Nodes}
	for i := range l.Nodes {
		l.Nodes[i].HTTP = h.httpAddr(l.Nodes[i].ID)
	}
	for g := range h.nodes {
		if n := h.served(uint32(g)); n != nil {
			l.Groups = append(l.Groups, n.Layout().Groups...)
			continue
		}
		rec := h.layoutRecord(uint32(g))
		l.Groups = append(l.Groups, raft.LayoutGroup{ID: uint32(g), Members: rec.Voters, Leader: rec.Leader})
	}
	return l
}

// httpAddr is node id's HTTP address as any group records it: a node
// records its address in each group it leads, or relays it to the leader
// (raft/version.go), so one group may know it before another. This node's own
// is its options' while no group records it.
func (h *Host) httpAddr(id string) string {
	for _, n := range h.Replicas() {
		if a := n.Engine().ClusterValue(command.HTTPKey(id)); a != "" {
			return a
		}
		if id == h.opts.Node.ID && h.opts.Node.HTTPAddr != "" {
			return h.opts.Node.HTTPAddr
		}
	}
	return ""
}
