package raft

import (
	"cmp"
	"slices"

	"github.com/queenmq/queen/raft/command"
)

// Layout is where the cluster's Raft groups live, as this node knows them:
// the servers of its configuration and each group's voters and leader.
// GET /api/v1/system/placement answers it, with each queue's group.
type Layout struct {
	Nodes  []LayoutNode  // every server of the configuration, by id
	Groups []LayoutGroup // by id: a Host's directory (0) first
}

// LayoutNode is one server of the configuration.
type LayoutNode struct {
	ID string
	// HTTP is its HTTP address as the replicated state records it
	// (command.Announce), this node's own from its options until then;
	// "" while unknown.
	HTTP string
	// Live says this node hears from it: it is this node, or it answered
	// this node's last round of version reads (version.go: every
	// VersionInterval, each node reads every server's /health). Unlike
	// raft's heartbeats, which only a leader sends, every node makes these
	// reads, so followers and leaders answer alike. A node that reads no
	// versions (no cluster secret: Options.Versions is nil) knows only
	// itself live.
	Live bool
}

// LayoutGroup is one Raft group.
type LayoutGroup struct {
	ID      uint32
	Members []string // its voters, by id
	Leader  string   // "" while this node knows none
}

// Layout is this node's group and the servers of its configuration.
func (n *Node) Layout() Layout {
	return Layout{Nodes: n.layoutNodes(n.httpAddr), Groups: []LayoutGroup{n.layoutGroup()}}
}

// layoutGroup is n's group: its voters and the leader n follows.
func (n *Node) layoutGroup() LayoutGroup {
	_, leader := n.raft.LeaderWithID()
	return LayoutGroup{ID: n.group, Members: n.Members(), Leader: string(leader)}
}

// layoutNodes is the servers of n's configuration, by id, at the HTTP
// addresses addr gives; nil when the configuration cannot be read.
func (n *Node) layoutNodes(addr func(id string) string) []LayoutNode {
	conf, err := n.configuration()
	if err != nil {
		return nil
	}
	known := map[string]bool{}
	for _, v := range n.Versions() {
		known[v.ID] = v.Known
	}
	out := make([]LayoutNode, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		id := string(s.ID)
		out = append(out, LayoutNode{ID: id, HTTP: addr(id), Live: id == n.opts.ID || known[id]})
	}
	slices.SortFunc(out, func(a, b LayoutNode) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// httpAddr is node id's HTTP address as n's replicated state records it,
// or n's own from its options while the record is missing.
func (n *Node) httpAddr(id string) string {
	if a := n.engine.ClusterValue(command.HTTPKey(id)); a != "" {
		return a
	}
	if id == n.opts.ID {
		return n.opts.HTTPAddr
	}
	return ""
}
