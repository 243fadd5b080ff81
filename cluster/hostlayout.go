package cluster

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/placement"
)

// Groups on R of N nodes (issue 30, ARCHITECTURE.md "Step 2, R voters of
// N nodes").
//
// Every node runs a Node for every group; with HostOptions.Replicas below
// the founders' count, only R of them are the group's voters, and the
// others are idle: in no configuration, so they never campaign and apply
// nothing until a leader adds them. The directory stays on every node, and
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
func (h *Host) hosts(g uint32) bool {
	if g == raft.Directory {
		return true
	}
	if h.cutOff.Load() {
		return false
	}
	rec := h.layoutRecord(g)
	if rec.Term == 0 {
		return h.nodes[g].IsMember()
	}
	return slices.Contains(rec.Voters, h.opts.Node.ID)
}

// layoutRecord is group g's record in this node's directory replica.
func (h *Host) layoutRecord(g uint32) command.GroupLayout {
	return command.LayoutOf(h.nodes[raft.Directory].Engine().ClusterValue, g)
}

// leaderOf is group g's leader and its HTTP address ("" while unknown):
// as this node's replica follows it when it hosts g, else as the
// directory records it.
func (h *Host) leaderOf(g uint32) raft.Status {
	if h.hosts(g) {
		st := h.nodes[g].Status()
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
	if r := command.ReplicaCount(h.nodes[raft.Directory].Engine().ClusterValue); r != 0 {
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
	n := h.nodes[g]
	if !n.IsLeader() || h.GroupCount() == 0 {
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
	conf, err := h.nodes[g].Configuration()
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
	l := raft.Layout{Nodes: h.nodes[raft.Directory].Layout().Nodes}
	for i := range l.Nodes {
		l.Nodes[i].HTTP = h.httpAddr(l.Nodes[i].ID)
	}
	for g, n := range h.nodes {
		if h.hosts(uint32(g)) {
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
	for _, n := range h.nodes {
		if a := n.Engine().ClusterValue(command.HTTPKey(id)); a != "" {
			return a
		}
		if id == h.opts.Node.ID && h.opts.Node.HTTPAddr != "" {
			return h.opts.Node.HTTPAddr
		}
	}
	return ""
}
