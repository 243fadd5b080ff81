package cluster

import (
	"errors"
	"fmt"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// JoinGroup adds a voter to group g (its leader only: ErrNotLeader, a
// NotLeaderError, elsewhere). A node joins a Host's cluster by joining
// every group; the edge asks each group's leader (server/membership.go).
// The directory takes at most DirectoryVoters voters on R of N: past
// that, the node joins it as a non-voter (voters.go).
func (h *Host) JoinGroup(g uint32, id, addr string, force bool) error {
	n := h.Group(g)
	switch {
	case int(g) >= len(h.nodes):
		return fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	case n == nil:
		return h.memberError(g, raft.ErrNoLeader) // held elsewhere: its leader decides
	}
	if g == raft.Directory {
		// Voter says which it took.
		return h.memberError(g, n.JoinCapped(id, addr, force, h.directoryCap()))
	}
	return h.memberError(g, n.Join(id, addr, force))
}

// JoinGroupNonvoter adds a non-voter to group g, as JoinGroup adds a
// voter (raft.Node.JoinNonvoter).
func (h *Host) JoinGroupNonvoter(g uint32, id, addr string, force bool) error {
	n := h.Group(g)
	switch {
	case int(g) >= len(h.nodes):
		return fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	case n == nil:
		return h.memberError(g, raft.ErrNoLeader) // held elsewhere: its leader decides
	}
	return h.memberError(g, n.JoinNonvoter(id, addr, force))
}

// LeaveGroup removes a server from group g, as JoinGroup adds one.
func (h *Host) LeaveGroup(g uint32, id string, force bool) error {
	n := h.Group(g)
	switch {
	case int(g) >= len(h.nodes):
		return fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	case n == nil:
		return h.memberError(g, raft.ErrNoLeader) // held elsewhere: its leader decides
	}
	err := n.Leave(id, force)
	if g != raft.Directory && errors.Is(err, raft.ErrUnknownMember) {
		// With groups on R of N, a node is no voter of most data groups:
		// leaving them is nothing. The directory counts every node, so its
		// answer says whether the node was a member at all.
		err = nil
	}
	return h.memberError(g, err)
}

// memberError is groupError for a membership change: a replica that does
// not know a leader (one a replica step removed this node from), or a
// group this node holds no replica of, names the leader the directory records for the group, so
// the edge relays the change there instead of answering no_leader (a
// forced leave of a dead node through a survivor that is no voter of one
// of its groups failed so on every survivor).
func (h *Host) memberError(g uint32, err error) error {
	if errors.Is(err, raft.ErrNoLeader) {
		if st := h.leaderOf(g); st.Leader != "" && st.Leader != h.opts.Node.ID {
			return &raft.NotLeaderError{Group: g, Status: st}
		}
	}
	return h.groupError(g, err)
}
