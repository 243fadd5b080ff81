package cluster

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// The directory's voters (ARCHITECTURE.md, "Scale-out").
//
// With the data groups on R of N nodes, every node holds the directory
// (routing reads it locally), but at most DirectoryVoters of them vote in
// it; the others follow as non-voters. The directory's leader commits every
// placement, replica step, layout and load report with a quorum of its
// voters and heartbeats each of them: five tolerate two failures, and each
// voter past that adds an acknowledgement to wait for on every directory
// write and a vote to every election, for no availability a data group of
// three voters would not lose first.
//
//   - A join asks for a voter once it has caught up (cmd/queen, joinCluster);
//     JoinGroup answers it with a non-voter when the directory has its
//     voters already (raft.Node.JoinCapped, which counts under the
//     membership lock, so two joins cannot both take the last seat).
//   - The directory's leader keeps the voters at min(DirectoryVoters, N)
//     (directoryVoters): below it, it promotes the live non-voter with the
//     lowest id that has been live for voterHold; above it (a cluster grown
//     before the cap, or a lower cap), it demotes one voter, a failing one
//     first, never itself. A voter whose heartbeats have failed for
//     VoterSwapAfter while a non-voter could take its place is demoted, and
//     the next tick promotes the non-voter: two dead voters of five would
//     otherwise leave the directory one failure from stopping, with live
//     nodes standing by, until ReplaceAfter removes them. One change a tick.
//   - A directory non-voter is a node like any other to placement
//     (rebalance.go, plan), so it holds data-group replicas and may be a
//     data group's voter: what a node with an empty store checks before it
//     joins (the voters /health lists, Status) is every group's voters,
//     not the directory's alone.

// DirectoryVoters is the most voters the directory has when the data
// groups are on R of N nodes (HostOptions.DirectoryVoters).
const DirectoryVoters = 5

// voterHold is how long a directory non-voter must have been seen live
// before the directory's leader promotes it: a node that has just joined
// promotes itself once it has caught up (cmd/queen), and one that comes
// and goes is not given a vote.
var voterHold = 5 * time.Second

// directoryCap is the most voters the directory takes; 0 when it takes
// any number (every group on every node: each node votes in every group).
func (h *Host) directoryCap() int {
	if h.ReplicaCount() == 0 {
		return 0
	}
	return cmp.Or(h.opts.DirectoryVoters, DirectoryVoters)
}

// Voter reports whether id is a voter of group g as this node knows its
// configuration (on g's leader, after a change it made: the change's
// outcome).
func (h *Host) Voter(g uint32, id string) bool {
	n := h.replica(g)
	if n == nil {
		return false
	}
	conf, err := n.Configuration()
	return err == nil && slices.ContainsFunc(conf, func(p raft.Peer) bool { return p.ID == id && !p.NonVoter })
}

// voterWatch is what the directory's leader has seen of the directory's
// servers (rebalanceLoop's goroutine only): since when each non-voter has
// been live, and each voter's heartbeats have failed.
type voterWatch struct{ live, down map[string]time.Time }

func newVoterWatch() voterWatch {
	return voterWatch{live: map[string]time.Time{}, down: map[string]time.Time{}}
}

// directoryVoters is the directory leader's part (see above): one
// promotion or demotion at most.
func (h *Host) directoryVoters(now time.Time, w voterWatch) {
	d := h.directory()
	most := h.directoryCap()
	if most == 0 || !d.IsLeader() {
		clear(w.live)
		clear(w.down)
		return
	}
	live, down := w.live, w.down
	conf, err := d.Configuration()
	if err != nil {
		return
	}
	self := h.opts.Node.ID
	var voters, failing, gone, candidates []string
	for _, p := range conf {
		up := p.ID == self || !d.Failing(p.ID)
		leaving := command.Leaving(d.Engine().ClusterValue, p.ID)
		switch {
		case !p.NonVoter && up:
			voters = append(voters, p.ID)
			delete(down, p.ID)
		case !p.NonVoter:
			voters, failing = append(voters, p.ID), append(failing, p.ID)
			if down[p.ID].IsZero() {
				down[p.ID] = now
			} else if now.Sub(down[p.ID]) >= h.opts.VoterSwapAfter {
				gone = append(gone, p.ID)
			}
		case !up || leaving:
			delete(live, p.ID)
		case live[p.ID].IsZero():
			live[p.ID] = now
		case now.Sub(live[p.ID]) >= voterHold:
			candidates = append(candidates, p.ID)
		}
	}
	for id := range live {
		if !slices.ContainsFunc(conf, func(p raft.Peer) bool { return p.ID == id && p.NonVoter }) {
			delete(live, id)
		}
	}
	for id := range down {
		if !slices.Contains(failing, id) {
			delete(down, id)
		}
	}
	switch {
	case len(voters) < min(most, len(conf)) && len(candidates) > 0:
		id := slices.Min(candidates)
		d.Logger().Info("raft: promoting a directory non-voter", "node", id, "voters", len(voters), "most", most)
		if err := d.Join(id, h.raftAddr(id), false); err != nil {
			h.votersError("promote", id, err)
		}
	case len(voters) > most:
		id := slices.Max(slices.DeleteFunc(slices.Clone(voters), func(v string) bool { return v == self }))
		if len(failing) > 0 {
			id = slices.Min(failing)
		}
		d.Logger().Info("raft: demoting a directory voter", "node", id, "voters", len(voters), "most", most)
		if err := d.Demote(id, false); err != nil {
			h.votersError("demote", id, err)
		}
	case len(gone) > 0 && len(candidates) > 0:
		id := slices.Min(gone)
		d.Logger().Warn("raft: demoting a directory voter that stopped answering, so that a live node takes its vote",
			"node", id, "down", now.Sub(down[id]).Round(time.Second), "next", slices.Min(candidates))
		if err := d.Demote(id, false); err != nil {
			h.votersError("demote", id, err)
		}
	}
}

func (h *Host) votersError(what, id string, err error) {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrShutdown) {
		return
	}
	h.directory().Logger().Warn("raft: directory voters", "change", what, "node", id, "err", err)
}

// Members lists every group's voters, sorted: the directory's, and each
// data group's as the directory records it and as the replicas here know
// it (a promotion may be on record a moment after it took effect). A node
// whose store is lost must not join again under its old id while any group
// counts its vote, and a directory non-voter may be a data group's voter:
// /health lists these, and a joiner with an empty store checks the list
// (raft.Options.JoinMembers).
func (h *Host) Members() []string {
	members := h.directory().Members()
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		members = append(members, h.layoutRecord(g).Voters...)
		if n := h.served(g); n != nil {
			members = append(members, n.Members()...)
		}
	}
	slices.Sort(members)
	return slices.Compact(members)
}

// WantedVoters is how many voters group g should have among nodes (the
// servers of the directory's configuration, raft.Layout.Nodes) when the
// data groups are on replicas of them: replicas for a data group,
// min(DirectoryVoters, nodes) for the directory. With replicas 0 (every
// node hosts every group) a data group has every node's vote, so it wants
// no count: 0.
func WantedVoters(g, replicas uint32, nodes int) int {
	if g == raft.Directory {
		return min(DirectoryVoters, nodes)
	}
	return int(replicas)
}

// UnderReplicated is the groups of l with fewer voters than WantedVoters,
// in l's order: the groups whose quorum one more lost voter takes (a data
// group on two voters of three), or closer to it than they should be. A
// group whose voters l does not know (no record yet of a group this node
// does not host) is not counted: it has voters, only not on record here.
func UnderReplicated(l raft.Layout, replicas uint32) []raft.LayoutGroup {
	var out []raft.LayoutGroup
	for _, g := range l.Groups {
		if n := len(g.Members); n > 0 && n < WantedVoters(g.ID, replicas, len(l.Nodes)) {
			out = append(out, g)
		}
	}
	return out
}
