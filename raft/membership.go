package raft

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	hraft "github.com/hashicorp/raft"
)

// Membership safety.
//
// A voter counts towards the quorum whether or not it can be reached. Adding
// one that never answers, or removing one of the voters that do, can leave
// a cluster in which no majority of voters can talk: nothing is committed
// from then on, including the membership change that would undo it. So the
// leader refuses (ErrQuorumRisk) a change after which the voters it knows
// to be live would not be a majority of the voters:
//
//   - Join dials the new server's Raft address through the node's own stream
//     layer (so TLS and the cluster-secret handshake are tried too) and
//     refuses when that fails. Then the live voters (the leader, and the
//     followers whose heartbeats are not failing) plus the new one must be
//     a majority of the new voter count.
//   - Leave requires the live voters that remain to be a majority of the
//     voters that remain.
//
// force skips these checks, for an operator who knows better (a server about
// to start, a dead voter to drop). Removing the last voter is refused even
// then: a cluster without voters can never elect a leader again.
//
// A follower is live until raft reports a failed heartbeat to it, and again
// once it reports the heartbeats resumed. Liveness is forgotten when this
// node's role changes: a new term as leader starts counting afresh, so just
// after an election a dead follower counts as live until its first
// heartbeat fails (within a heartbeat timeout or the transport's dial
// timeout).

// liveness records the followers the leader's heartbeats fail to reach.
type liveness struct {
	mu      sync.Mutex
	failing map[hraft.ServerID]bool
}

func newLiveness() *liveness { return &liveness{failing: map[hraft.ServerID]bool{}} }

// observe is the raft observer's filter: it records the observation and
// lets nothing through to a channel.
func (l *liveness) observe(o *hraft.Observation) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch d := o.Data.(type) {
	case hraft.FailedHeartbeatObservation:
		l.failing[d.PeerID] = true
	case hraft.ResumedHeartbeatObservation:
		delete(l.failing, d.PeerID)
	case hraft.PeerObservation:
		if d.Removed {
			delete(l.failing, d.Peer.ID)
		}
	case hraft.RaftState:
		clear(l.failing)
	}
	return false
}

func (l *liveness) isFailing(id hraft.ServerID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failing[id]
}

// Join adds a voter (leader only). Joining an id already a voter at the
// same address does nothing and succeeds. Unless force is set, it returns
// ErrQuorumRisk when addr does not accept a Raft connection (a node without
// a network transport, see Options.Transport, can never check, so refuses)
// or when the voters known live plus the new one would not be a majority of
// the voters; see "Membership safety" above.
func (n *Node) Join(id, addr string, force bool) error {
	return n.changeMembership(func(conf hraft.Configuration) error { return n.join(conf, id, addr, force) })
}

func (n *Node) join(conf hraft.Configuration, id, addr string, force bool) error {
	for _, s := range conf.Servers {
		if s.ID == hraft.ServerID(id) && s.Address == hraft.ServerAddress(addr) && s.Suffrage == hraft.Voter {
			return nil
		}
	}
	if !force {
		if err := n.checkJoin(conf, id, addr); err != nil {
			return err
		}
	}
	return n.mapError(n.raft.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.opts.ApplyTimeout).Error())
}

// JoinCapped is Join in a group that takes at most most voters: with that
// many voters besides id already, id is added as a non-voter, or left one
// (a cluster's directory, whose other nodes follow it; package cluster).
// most < 1 takes any number.
func (n *Node) JoinCapped(id, addr string, force bool, most int) error {
	return n.changeMembership(func(conf hraft.Configuration) error {
		voters := 0
		for _, s := range conf.Servers {
			if s.Suffrage != hraft.Voter {
				continue
			}
			if s.ID == hraft.ServerID(id) {
				return n.join(conf, id, addr, force)
			}
			voters++
		}
		if most < 1 || voters < most {
			return n.join(conf, id, addr, force)
		}
		return n.joinNonvoter(conf, id, addr, force)
	})
}

// JoinNonvoter adds a non-voter (leader only): a server the leader sends
// the log to, that votes in nothing and counts in no quorum. A node joins
// so, then is promoted by Join once it has caught up: killed before then,
// its store may be empty, and a non-voter's empty store lost nothing it
// acknowledged, so it may start again (ARCHITECTURE.md, "A lost disk
// never votes"). An id already in the configuration at addr, voter or
// not, is left as it is. Unless force is set, its Raft address must accept
// a connection, as for Join; there is no quorum to check.
func (n *Node) JoinNonvoter(id, addr string, force bool) error {
	return n.changeMembership(func(conf hraft.Configuration) error { return n.joinNonvoter(conf, id, addr, force) })
}

func (n *Node) joinNonvoter(conf hraft.Configuration, id, addr string, force bool) error {
	for _, s := range conf.Servers {
		if s.ID == hraft.ServerID(id) && s.Address == hraft.ServerAddress(addr) {
			return nil
		}
	}
	if !force {
		if err := n.probeJoiner(id, addr); err != nil {
			return err
		}
	}
	return n.mapError(n.raft.AddNonvoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, n.opts.ApplyTimeout).Error())
}

// probeJoiner checks that a joiner's Raft address accepts a connection
// through this node's stream layer (TLS, the secret, the cluster id).
func (n *Node) probeJoiner(id, addr string) error {
	if n.stream == nil {
		return fmt.Errorf("%w: this node has no network transport (it runs without a Raft address), so %s at %s "+
			"could never reach it and would count towards the quorum without ever voting; "+
			"force adds it anyway", ErrQuorumRisk, id, addr)
	}
	if err := n.stream.probe(addr); err != nil {
		return fmt.Errorf("%w: %s at %s does not accept a Raft connection (%v), so it would count towards "+
			"the quorum without ever voting; start it first, or force adds it anyway", ErrQuorumRisk, id, addr, err)
	}
	return nil
}

func (n *Node) checkJoin(conf hraft.Configuration, id, addr string) error {
	if err := n.probeJoiner(id, addr); err != nil {
		return err
	}
	voters, live := n.count(conf, hraft.ServerID(id))
	voters, live = voters+1, live+1
	if live <= voters/2 {
		return fmt.Errorf("%w: with %s there would be %d voters of which %d are known live, short of the %d a quorum needs: "+
			"the cluster would stop accepting writes; force adds it anyway", ErrQuorumRisk, id, voters, live, voters/2+1)
	}
	return nil
}

// Leave removes a server (leader only). Removing the last voter returns
// ErrQuorumRisk, forced or not. Unless force is set, removing a voter also
// returns ErrQuorumRisk when the live voters that remain would not be a
// majority of the voters that remain; see "Membership safety" above.
// Removing a server the configuration does not hold returns
// ErrUnknownMember, and changes nothing.
func (n *Node) Leave(id string, force bool) error {
	return n.changeMembership(func(conf hraft.Configuration) error { return n.leave(conf, id, force) })
}

func (n *Node) leave(conf hraft.Configuration, id string, force bool) error {
	if !slices.ContainsFunc(conf.Servers, func(s hraft.Server) bool { return s.ID == hraft.ServerID(id) }) {
		return fmt.Errorf("%w: %s is not in the configuration of group %d (%s)", ErrUnknownMember, id, n.group,
			strings.Join(configMembers(conf), ", "))
	}
	for _, s := range conf.Servers {
		if s.ID != hraft.ServerID(id) || s.Suffrage != hraft.Voter {
			continue
		}
		voters, live := n.count(conf, s.ID)
		if voters == 0 {
			return fmt.Errorf("%w: %s is the last voter: without it the cluster could never elect a leader "+
				"or accept a write again (force does not override this)", ErrQuorumRisk, id)
		}
		if !force && live <= voters/2 {
			return fmt.Errorf("%w: without %s there would be %d voters of which %d are known live, short of the %d a quorum needs: "+
				"the cluster would stop accepting writes; bring the others back first, or force removes it anyway",
				ErrQuorumRisk, id, voters, live, voters/2+1)
		}
	}
	return n.mapError(n.raft.RemoveServer(hraft.ServerID(id), 0, n.opts.ApplyTimeout).Error())
}

// Demote makes the voter id a non-voter (leader only): it keeps
// receiving the log and counts in no quorum. A non-voter or an id the
// configuration does not hold is left as it is. Unless force is set, it
// returns ErrQuorumRisk as Leave does when the live voters that remain
// would not be a majority of the voters that remain; the leader never
// demotes itself (hand the leadership over first).
func (n *Node) Demote(id string, force bool) error {
	return n.changeMembership(func(conf hraft.Configuration) error {
		if !slices.ContainsFunc(conf.Servers, func(s hraft.Server) bool {
			return s.ID == hraft.ServerID(id) && s.Suffrage == hraft.Voter
		}) {
			return nil
		}
		if id == n.opts.ID {
			return fmt.Errorf("%w: %s leads group %d: a leader does not demote itself", ErrQuorumRisk, id, n.group)
		}
		voters, live := n.count(conf, hraft.ServerID(id))
		if !force && live <= voters/2 {
			return fmt.Errorf("%w: without %s's vote there would be %d voters of which %d are known live, short of the %d a quorum needs",
				ErrQuorumRisk, id, voters, live, voters/2+1)
		}
		return n.mapError(n.raft.DemoteVoter(hraft.ServerID(id), 0, n.opts.ApplyTimeout).Error())
	})
}

// changeMembership runs change with the latest configuration, on the
// leader only, holding the membership lock from its checks to the end of
// the change so that two changes cannot both pass a check made for one.
func (n *Node) changeMembership(change func(hraft.Configuration) error) error {
	n.membership.Lock()
	defer n.membership.Unlock()
	if n.raft.State() != hraft.Leader {
		return n.notLeader()
	}
	conf, err := n.configuration()
	if err != nil {
		return err
	}
	return change(conf)
}

// configuration is the latest Raft configuration this node knows.
func (n *Node) configuration() (hraft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return hraft.Configuration{}, n.mapError(err)
	}
	return f.Configuration(), nil
}

// Members lists the ids of the group's voters as this node last knew
// them, sorted; nil when its configuration cannot be read.
func (n *Node) Members() []string {
	conf, err := n.configuration()
	if err != nil {
		return nil
	}
	return voterIDs(conf)
}

// voterIDs lists the ids of conf's voters, sorted.
func voterIDs(conf hraft.Configuration) []string {
	var ids []string
	for _, s := range conf.Servers {
		if s.Suffrage == hraft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return ids
}

// count returns the voters of conf other than skip, and how many of them
// are known live: this node and the followers whose heartbeats are not
// failing. Only a leader's count means anything (only it heartbeats).
func (n *Node) count(conf hraft.Configuration, skip hraft.ServerID) (voters, live int) {
	self := hraft.ServerID(n.opts.ID)
	for _, s := range conf.Servers {
		if s.Suffrage != hraft.Voter || s.ID == skip {
			continue
		}
		voters++
		if s.ID == self || !n.live.isFailing(s.ID) {
			live++
		}
	}
	return voters, live
}
