package raft

import (
	"context"
	"log/slog"
	"slices"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
)

// What a manager of a node's groups (package cluster) reads of one of its
// replicas, and the membership steps it takes on them. Join and Leave
// check a change for safety; the steps below do not: a manager that moves
// replicas between nodes (cluster/rebalance.go) adds a non-voter, promotes
// it once it caught up, and removes the replica it replaces, one step per
// look, as the directory's records say.

// Logger is the node's logger, which names its id and group.
func (n *Node) Logger() *slog.Logger { return n.log }

// IsLeader reports whether this node leads its group.
func (n *Node) IsLeader() bool { return n.raft.State() == hraft.Leader }

// Leader is the id of the leader this node follows, "" while it knows
// none.
func (n *Node) Leader() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// Term is the group's current Raft term as this node knows it.
func (n *Node) Term() uint64 { return n.raft.CurrentTerm() }

// Configuration is the servers of the latest Raft configuration this node
// knows, voters and non-voters, in the configuration's order.
func (n *Node) Configuration() ([]Peer, error) {
	conf, err := n.configuration()
	if err != nil {
		return nil, err
	}
	return peersOf(conf), nil
}

// peersOf is conf's servers as Peers.
func peersOf(conf hraft.Configuration) []Peer {
	peers := make([]Peer, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		peers = append(peers, Peer{ID: string(s.ID), Addr: string(s.Address), NonVoter: s.Suffrage != hraft.Voter})
	}
	return peers
}

// CommittedConfiguration is the group's configuration as this node last
// knew it, and whether it is committed (its index at or below the commit
// index this node knows). On a leader whose leadership a read index has
// just confirmed, a committed configuration is the group's: no election
// can undo it (cluster, a replica's retirement).
func (n *Node) CommittedConfiguration() ([]Peer, bool, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, false, n.mapError(err)
	}
	return peersOf(f.Configuration()), f.Index() <= n.raft.CommitIndex(), nil
}

// IsMember reports whether this node is in its group's configuration, as a
// voter or a non-voter catching up.
func (n *Node) IsMember() bool {
	conf, err := n.configuration()
	if err != nil {
		return false
	}
	self := hraft.ServerID(n.opts.ID)
	return slices.ContainsFunc(conf.Servers, func(s hraft.Server) bool { return s.ID == self })
}

// CaughtUp reports whether this replica, a member of its group, has
// applied what its leader had told it was committed when it first looked
// (*target, kept between calls), the add that made it a member included,
// and has heard from that leader lately. Under a steady stream of writes
// the applied index trails the commit index it is compared with at any
// one instant, so the target is fixed once, not re-read each look.
func (n *Node) CaughtUp(target *uint64) bool {
	f := n.raft.GetConfiguration()
	_, leader := n.raft.LeaderWithID()
	if f.Error() != nil || !n.IsMember() || leader == "" || time.Since(n.raft.LastContact()) > 2*n.opts.ElectionTimeout {
		return false
	}
	if commit := n.raft.CommitIndex(); *target == 0 || *target < f.Index() {
		if commit < f.Index() {
			return false // the entries that made it a member are not in yet
		}
		*target = commit
	}
	return n.raft.AppliedIndex() >= *target
}

// Failing reports whether this node, as its group's leader, sees its
// heartbeats to the member id fail.
func (n *Node) Failing(id string) bool { return n.live.isFailing(hraft.ServerID(id)) }

// AddNonvoter adds id at the Raft address addr as a non-voter (leader
// only), unchecked: it receives the log and counts towards no quorum.
func (n *Node) AddNonvoter(id, addr string) error {
	return n.mapError(n.raft.AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.opts.ApplyTimeout).Error())
}

// AddVoter makes id at addr a voter (leader only), unchecked: a non-voter
// that caught up is promoted.
func (n *Node) AddVoter(id, addr string) error {
	return n.mapError(n.raft.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.opts.ApplyTimeout).Error())
}

// RemoveServer removes id from the configuration (leader only),
// unchecked.
func (n *Node) RemoveServer(id string) error {
	return n.mapError(n.raft.RemoveServer(hraft.ServerID(id), 0, n.opts.ApplyTimeout).Error())
}

// TransferLeadershipTo hands this node's leadership to the voter id at
// addr (leader only); Raft waits for it to catch up with the log first.
func (n *Node) TransferLeadershipTo(id, addr string) error {
	return n.mapError(n.raft.LeadershipTransferToServer(hraft.ServerID(id), hraft.ServerAddress(addr)).Error())
}

// ProposePrepared proposes c, a command already prepared with seed
// (engine.Preparer), as it is: a part of a split push proposed again with
// the ids its first attempt minted.
func (n *Node) ProposePrepared(ctx context.Context, c engine.Command, seed engine.ID) (engine.Result, error) {
	return n.propose(ctx, c, seed)
}

// PushedBytes is, by queue, the bytes of pushes this replica applied
// since it opened (the frames' raw length): a leader's load report takes
// its byte rates from two readings.
func (n *Node) PushedBytes() map[string]uint64 { return n.fsm.pushed.snapshot() }
