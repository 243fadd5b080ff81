package cluster

import (
	"fmt"
	"slices"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// Groups only where they are placed (issue 39; ARCHITECTURE.md
// "Scale-out").
//
// Every node holds a replica of the directory. A data group's replica (a
// raft.Node: a Raft instance, an engine, snapshots, and the group's part
// of the log store) is opened on a node only while the cluster places one
// there, so that a node's disk, memory and descriptors follow its share
// of the groups (G·R/N of them), not G:
//
//   - every group, when every node holds every group (ReplicaCount 0);
//   - at the cluster's first start, the groups the founders' placement
//     gives this node (founders), bootstrapped there;
//   - a group whose state is in the store: a replica this node held
//     before it stopped (not one it retired: see "Retiring a replica");
//   - a group the directory's record lists this node as a voter of, or a
//     replica step adds it to (rebalance.go): placedLoop opens it, with no
//     state and no configuration, and the group's leader then adds it as a
//     non-voter and replicates to it.
//
// Until a group is open here, the node's listener refuses the group's
// connections (raft.Store), and the rest of the Host reads group g as
// "not hosted": replica(g) is nil, hosts(g) false, and a command or read of
// g goes to its leader as the directory records it.

// placedInterval is how often placedLoop looks for groups to open or
// retire.
const placedInterval = 200 * time.Millisecond

// retireAskEvery is how often placedLoop asks a group's leader again
// whether it removed this node, once it did not say so: the leader may be
// unreachable for a while, and asking it five times a second for that
// long would be traffic for nothing.
const retireAskEvery = 2 * time.Second

// placedAtStart reports whether OpenHost opens group g: every group the
// rules above give this node, looked up in the store and the directory as
// they were left.
func (h *Host) placedAtStart(g uint32) (bool, error) {
	held, err := h.store.HasState(g)
	switch {
	case err != nil:
		return false, err
	case held:
		return true, nil
	case h.fresh && len(h.node.Peers) > 0:
		return h.founded(g), nil
	case h.fresh && h.node.Bootstrap:
		return true, nil // a cluster of this one node
	}
	return h.placedHere(g), nil
}

// founded reports whether this node is one of group g's voters at the
// cluster's first start.
func (h *Host) founded(g uint32) bool {
	return slices.ContainsFunc(founders(h.node.Peers, h.opts.Replicas, h.opts.Groups, g),
		func(p raft.Peer) bool { return p.ID == h.node.ID })
}

// placedHere reports whether the directory, as this node's replica has
// it, places a replica of group g here: its record lists this node among
// g's voters, or g's step under way adds it.
func (h *Host) placedHere(g uint32) bool {
	if h.ReplicaCount() == 0 && h.GroupCount() != 0 {
		return true
	}
	if slices.Contains(h.layoutRecord(g).Voters, h.node.ID) {
		return true
	}
	step, ok := command.StepOf(h.directory().Engine().ClusterValue, g)
	return ok && step.Add == h.node.ID
}

// openGroup opens this node's replica of group g: at the Host's start
// (start) with g's founders as its peers, bootstrapping it on a fresh
// cluster; later with none, so that it waits for g's leader to add it.
func (h *Host) openGroup(g uint32, start bool) error {
	opts := h.node
	if !start {
		opts.Peers, opts.Bootstrap = nil, false
	} else if len(opts.Peers) > 0 {
		opts.Peers = founders(opts.Peers, h.opts.Replicas, h.opts.Groups, g)
		if !slices.ContainsFunc(opts.Peers, func(p raft.Peer) bool { return p.ID == opts.ID }) {
			opts.Peers = nil // a leader adds it
		}
	}
	n, err := h.store.OpenGroup(opts, g)
	if err != nil {
		return fmt.Errorf("raft: group %d: %w", g, err)
	}
	h.nodes[g].Store(n)
	return nil
}

// placedLoop opens, every placedInterval, the replicas the directory
// places here that are not open yet (placedHere), and retires those it no
// longer places here once their removal has committed (retirable).
func (h *Host) placedLoop() {
	defer h.wg.Done()
	t := time.NewTicker(placedInterval)
	defer t.Stop()
	unplaced := make([]time.Time, len(h.nodes)) // since when each open replica has been retirable
	asked := make([]time.Time, len(h.nodes))    // when each group's leader last did not confirm the removal
	for {
		select {
		case <-t.C:
		case <-h.done:
			return
		}
		now := time.Now()
		for g := uint32(1); int(g) < len(h.nodes); g++ {
			switch {
			case h.retiring[g].Load():
			case h.replica(g) == nil && h.placedHere(g):
				if err := h.openGroup(g, false); err != nil {
					h.directory().Logger().Warn("raft: host: open a replica the directory places here; trying again", "group", g, "err", err)
					continue
				}
				h.replica(g).Logger().Info("raft: host: opened a replica the directory places here")
			case h.replica(g) != nil && h.retirable(g):
				if unplaced[g].IsZero() {
					unplaced[g] = now
				}
				if now.Sub(unplaced[g]) < h.opts.RetireHold || now.Sub(asked[g]) < retireAskEvery {
					continue
				}
				if !h.removalCommitted(g) {
					asked[g] = now
					continue
				}
				unplaced[g], asked[g] = time.Time{}, time.Time{}
				h.retire(g)
			default:
				unplaced[g], asked[g] = time.Time{}, time.Time{}
			}
		}
	}
}

// Retiring a replica.
//
// A replica step that removes this node from group g (rebalance.go) leaves
// its replica open, following nothing. placedLoop retires it: it stops
// handing it out (replica(g) nil), waits RetireHold more for what still
// holds it (a read under way), then closes it and frees its disk
// (raft.Store.RetireGroup), keeping its term and vote. It does so only
// once the removal is committed, as g's leader answers after a read index
// confirmed it leads (raft.Node.CommittedConfiguration): a node still in
// g's configuration whose log is gone could vote a leader that lacks
// acknowledged writes into office. A step that adds the node again later
// opens an empty replica, which catches up as any new one does.

// retirable reports whether this node's replica of group g is one the
// cluster no longer places here: groups on R of N, the directory lists
// another set of voters and no step under way names this node, this node
// does not serve g, and no move copies from or into g.
func (h *Host) retirable(g uint32) bool {
	if h.ReplicaCount() == 0 || h.GroupCount() == 0 || h.placedHere(g) || h.hosts(g) || h.layoutRecord(g).Term == 0 {
		return false
	}
	if step, ok := command.StepOf(h.directory().Engine().ClusterValue, g); ok && (step.Add == h.node.ID || step.Remove == h.node.ID) {
		return false
	}
	return !slices.ContainsFunc(h.Moves(), func(m command.Move) bool { return m.From == g || m.To == g })
}

// removalCommitted reports whether group g's leader, confirmed by a read
// index, has a committed configuration without this node.
func (h *Host) removalCommitted(g uint32) bool {
	a, err := readRemote[[]raft.Peer](h, g, readRequest{Op: readMembership})
	if err != nil {
		h.directory().Logger().Debug("raft: host: ask a group's leader whether it removed this node", "group", g, "err", err)
		return false
	}
	return a.Found && !slices.ContainsFunc(a.Value, func(p raft.Peer) bool { return p.ID == h.node.ID })
}

// retire stops handing out this node's replica of group g and, RetireHold
// later, closes it and frees its disk (see "Retiring a replica").
func (h *Host) retire(g uint32) {
	n := h.replica(g)
	h.retiring[g].Store(true)
	h.nodes[g].Store(nil)
	h.serving[g].Store(servingOff)
	n.Logger().Info("raft: host: the group removed this node; retiring its replica", "in", h.opts.RetireHold)
	h.wg.Go(func() {
		defer h.retiring[g].Store(false)
		select {
		case <-time.After(h.opts.RetireHold):
		case <-h.done:
			return // the store closes it with the others
		}
		freed, err := h.store.RetireGroup(g)
		if err != nil {
			h.directory().Logger().Error("raft: host: retire a removed replica", "group", g, "err", err)
			return
		}
		h.directory().Logger().Info("raft: host: retired a removed replica", "group", g, "freed_bytes", freed)
	})
}
