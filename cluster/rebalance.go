package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/placement"
)

// Moving replicas (issue 30 items 2 and 3): a node that joins receives
// replicas, a node dead for HostOptions.ReplaceAfter has its replicas
// re-created elsewhere, by one protocol kept in the directory so that it
// survives any node's failure part way.
//
//  1. The directory's leader plans from the directory's records (each
//     group's voters, GroupLayout) and the nodes (the directory's servers,
//     a node dead once its heartbeats have failed for ReplaceAfter) with
//     raft/placement, and records the plan's first step (ReplicaStep,
//     StepBegin): group g gains a voter on Add, then loses Remove. One step
//     at a time in the whole cluster: a step costs a snapshot's transfer,
//     and steps one after the other keep that to one node's link at once.
//  2. Group g's leader adds Add as a non-voter: it takes the snapshot and
//     the log, and counts towards no quorum while it does.
//  3. Add, once its replica has applied everything its leader committed,
//     records it (StepReady).
//  4. g's leader promotes Add to voter, then removes Remove (handing its
//     leadership over first when Remove is itself), reports the new voters
//     (GroupLayout) and ends the step (StepDone).
//
// A group therefore never has fewer voters than it started the step with.
// A step whose Add never catches up (it died) is abandoned by the
// directory's leader after StepTimeout, and a non-voter no step names is
// removed by its group's leader, so the next plan starts from a clean
// configuration.

// rebalanceLoop runs every node's part of the protocol every
// RebalanceInterval.
func (h *Host) rebalanceLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.opts.RebalanceInterval)
	defer t.Stop()
	// dead is when the directory's leader first saw each node's
	// heartbeats fail (this goroutine's only), stepSeen when it first saw
	// each group's step under way.
	dead := map[string]time.Time{}
	stepSeen := map[command.ReplicaStep]time.Time{}
	voters := newVoterWatch()
	heard := time.Now()
	for {
		select {
		case <-t.C:
		case <-h.done:
			return
		}
		if h.ReplicaCount() == 0 || h.directory().ClusterVersion() < 3 {
			continue
		}
		h.watchDirectory(time.Now(), &heard)
		for g := uint32(1); int(g) < len(h.nodes); g++ {
			h.stepGroup(g)
		}
		h.plan(time.Now(), dead, stepSeen)
		h.directoryVoters(time.Now(), voters)
	}
}

// stepGroup does this node's part of group g's step under way, if any:
// as its Add, say when caught up; as g's leader, carry it out.
func (h *Host) stepGroup(g uint32) {
	n := h.replica(g)
	if n == nil {
		return // not held here; placedLoop opens it when a step adds this node
	}
	step, ok := command.StepOf(h.directory().Engine().ClusterValue, g)
	leads := n.IsLeader()
	switch {
	case !ok && leads:
		h.dropStrayNonvoters(g, "")
	case !ok:
	case step.Add == h.opts.Node.ID && step.Phase == command.StepBegin && n.CaughtUp(&h.catchUp[g]):
		h.proposeStep(command.ReplicaStep{Group: g, Add: step.Add, Remove: step.Remove, Phase: command.StepReady})
	case leads:
		h.carryOut(g, step)
	}
}

// carryOut takes the next action of group g's step on g's leader: each
// call does one membership change at most, and the next tick sees its
// result in the configuration.
func (h *Host) carryOut(g uint32, step command.ReplicaStep) {
	n := h.replica(g) // g's leader's
	if n == nil {
		return
	}
	conf, err := n.Configuration()
	if err != nil {
		return
	}
	server := func(id string) (raft.Peer, bool) {
		i := slices.IndexFunc(conf, func(s raft.Peer) bool { return s.ID == id })
		if i < 0 {
			return raft.Peer{}, false
		}
		return conf[i], true
	}
	h.dropStrayNonvoters(g, step.Add)
	add, added := server(step.Add)
	_, removing := server(step.Remove)
	switch {
	case step.Add != "" && !added:
		addr := h.raftAddr(step.Add)
		if addr == "" {
			return // not in the directory (left since): the step times out
		}
		err = n.AddNonvoter(step.Add, addr)
	case step.Add != "" && add.NonVoter:
		if step.Phase != command.StepReady {
			return // still catching up
		}
		err = n.AddVoter(step.Add, h.raftAddr(step.Add))
	case step.Remove != "" && removing && step.Remove == h.opts.Node.ID:
		// A leader removing itself would leave the group leaderless
		// until an election: hand over first, and the new leader goes on.
		err = n.TransferLeadership()
	case step.Remove != "" && removing:
		err = n.RemoveServer(step.Remove)
	default:
		h.reportLayout(g)
		if slices.Equal(h.layoutRecord(g).Voters, n.Members()) {
			h.proposeStep(command.ReplicaStep{Group: g, Add: step.Add, Remove: step.Remove, Phase: command.StepDone})
			n.Logger().Info("raft: replica step done", "add", step.Add, "remove", step.Remove)
		}
		return
	}
	if err != nil && !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrNoLeader) && !errors.Is(err, raft.ErrLeadershipLost) {
		n.Logger().Warn("raft: replica step", "add", step.Add, "remove", step.Remove, "err", err)
	}
}

// dropStrayNonvoters removes, on group g's leader, the non-voters no step
// names (keep): an abandoned step's.
func (h *Host) dropStrayNonvoters(g uint32, keep string) {
	n := h.replica(g) // g's leader's
	if n == nil {
		return
	}
	conf, err := n.Configuration()
	if err != nil {
		return
	}
	for _, s := range conf {
		if s.NonVoter && s.ID != keep {
			if err := n.RemoveServer(s.ID); err != nil {
				n.Logger().Debug("raft: remove a non-voter no step names", "node", s.ID, "err", err)
			}
		}
	}
}

// raftAddr is node id's Raft address as the directory's configuration has
// it ("" when it is not a server there).
func (h *Host) raftAddr(id string) string {
	conf, err := h.directory().Configuration()
	if err != nil {
		return ""
	}
	for _, s := range conf {
		if s.ID == id {
			return s.Addr
		}
	}
	return ""
}

// proposeStep records a phase of a step in the directory (here or relayed).
func (h *Host) proposeStep(c command.ReplicaStep) { h.proposeDirectory(c) }

// proposeDirectory proposes c in the directory (here or relayed); a
// failure is logged, and the next tick tries again.
func (h *Host) proposeDirectory(c engine.Command) {
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Node.ApplyTimeout)
	defer cancel()
	if _, err := h.run(ctx, raft.Directory, c); err != nil && !errors.Is(err, raft.ErrShutdown) {
		h.opts.Node.Logger.Debug("raft: propose in the directory", "command", fmt.Sprintf("%T", c), "err", err)
	}
}

// plan is the directory leader's part: abandon a step that has run past
// StepTimeout, else, with none under way, record the plan's first step;
// with nothing to do, remove from the directory the nodes that are dead
// and hold no replica.
func (h *Host) plan(now time.Time, dead map[string]time.Time, stepSeen map[command.ReplicaStep]time.Time) {
	d := h.directory()
	if !d.IsLeader() {
		clear(dead)
		clear(stepSeen)
		return
	}
	conf, err := d.Configuration()
	if err != nil {
		return
	}
	self := h.opts.Node.ID
	var nodes []placement.Node
	for _, s := range conf {
		// A directory non-voter is a node as any other (voters.go): one
		// that joins has replicas placed on it before it has caught up
		// with the directory, and a data group's voter whose store is
		// lost is refused at start by the voters /health lists, which are
		// every group's (Status).
		id := s.ID
		switch {
		case id == self || !d.Failing(id):
			delete(dead, id)
		case dead[id].IsZero():
			dead[id] = now
		}
		gone := h.opts.ReplaceAfter > 0 && !dead[id].IsZero() && now.Sub(dead[id]) >= h.opts.ReplaceAfter
		nodes = append(nodes, placement.Node{ID: id, Live: !gone, Leaving: command.Leaving(d.Engine().ClusterValue, id)})
	}
	var groups []placement.Group
	under := false
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		rec := h.layoutRecord(g)
		if rec.Term == 0 {
			return // a group not on record yet: plan once every group is
		}
		groups = append(groups, placement.Group{ID: g, Voters: rec.Voters})
		step, ok := command.StepOf(d.Engine().ClusterValue, g)
		if !ok {
			continue
		}
		under = true
		key := command.ReplicaStep{Group: g, Add: step.Add, Remove: step.Remove}
		if stepSeen[key].IsZero() {
			stepSeen[key] = now
		} else if now.Sub(stepSeen[key]) >= h.opts.StepTimeout {
			d.Logger().Warn("raft: abandoning a replica step that did not finish", "group", g, "add", step.Add, "remove", step.Remove)
			key.Phase = command.StepDone
			h.proposeStep(key)
			delete(stepSeen, command.ReplicaStep{Group: g, Add: step.Add, Remove: step.Remove})
		}
	}
	if under {
		return
	}
	clear(stepSeen)
	steps := placement.Plan(groups, nodes, int(h.ReplicaCount()))
	if len(steps) > 0 {
		s := steps[0]
		d.Logger().Info("raft: replica step", "group", s.Group, "add", s.Add, "remove", s.Remove)
		h.proposeStep(command.ReplicaStep{Group: s.Group, Add: s.Add, Remove: s.Remove})
		return
	}
	for _, nd := range nodes {
		if (nd.Live && !nd.Leaving) || nd.ID == self ||
			slices.ContainsFunc(groups, func(g placement.Group) bool { return slices.Contains(g.Voters, nd.ID) }) {
			continue
		}
		why := "its replicas were re-created elsewhere after it stopped answering"
		if nd.Leaving {
			why = "it is leaving and its replicas have moved"
		}
		d.Logger().Warn("raft: removing a node from the directory", "node", nd.ID, "why", why)
		if err := d.Leave(nd.ID, false); err != nil && !errors.Is(err, raft.ErrUnknownMember) {
			d.Logger().Warn("raft: remove a node from the directory", "node", nd.ID, "err", err)
			continue
		}
		// Cleared, so that a node of the same id may join again.
		h.proposeDirectory(command.NodeLeaving{ID: nd.ID})
	}
}

// Drainable reports whether node id can leave by having its replicas
// moved (Drain): groups are on R of N nodes and, without it, the directory
// still has R nodes. Otherwise there is nowhere to move them, and a node
// leaves by being removed from each group (JoinGroup's reverse, LeaveGroup).
func (h *Host) Drainable(id string) bool {
	r := int(h.ReplicaCount())
	if r == 0 {
		return false
	}
	conf, err := h.directory().Configuration()
	if err != nil {
		return false
	}
	others := 0
	for _, s := range conf {
		if s.ID != id {
			others++
		}
	}
	return others >= r
}

// Drain marks node id leaving (queen leave on a cluster whose groups are
// on R of N nodes, Drainable) and waits, until ctx ends, for the
// directory's leader to move its replicas to other nodes and remove it
// from the directory. The moves go on if ctx ends first: calling Drain
// again waits for them.
func (h *Host) Drain(ctx context.Context, id string) error {
	if !h.Drainable(id) {
		return fmt.Errorf("%w: %s's replicas have nowhere to move (the directory needs %d other nodes)", engine.ErrInvalid, id, h.ReplicaCount())
	}
	if h.raftAddr(id) == "" {
		return nil // not in the directory: left already
	}
	r, err := h.run(ctx, raft.Directory, command.NodeLeaving{ID: id, Leaving: true})
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return err
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for h.raftAddr(id) != "" {
		select {
		case <-ctx.Done():
			held := 0
			for g := uint32(1); int(g) < len(h.nodes); g++ {
				if slices.Contains(h.layoutRecord(g).Voters, id) {
					held++
				}
			}
			return fmt.Errorf("%w: %s is still a voter of %d groups; they go on moving, and leave can be asked again",
				raft.ErrDraining, id, held)
		case <-t.C:
		}
	}
	return nil
}

// CutOff reports whether this node has not heard from the directory's
// leader for longer than ReplaceAfter: the cluster may have re-created its
// replicas elsewhere and removed it (it was down, or cut off by the
// network, for that long), so it serves no data group from its own
// replicas, only through the groups' leaders as its stale records name
// them, which refuse it if it was removed. It clears once the directory's
// leader is heard again, as it is if the node is still a member.
func (h *Host) CutOff() bool { return h.cutOff.Load() }

// watchDirectory sets or clears CutOff; heard is when the directory's
// leader was last heard.
func (h *Host) watchDirectory(now time.Time, heard *time.Time) {
	d := h.directory()
	if d.Leader() != "" {
		*heard = now
		if h.cutOff.Swap(false) {
			d.Logger().Warn("raft: the directory's leader is heard again: serving this node's groups again")
		}
		return
	}
	if h.opts.ReplaceAfter > 0 && now.Sub(*heard) > h.opts.ReplaceAfter && !h.cutOff.Swap(true) {
		d.Logger().Error("raft: no directory leader heard for longer than the replace-after: the cluster may have moved "+
			"this node's replicas elsewhere and removed it, so it serves no group from them until it hears the directory again; "+
			"if it was removed, start it with an empty data directory and --join", "for", now.Sub(*heard).Round(time.Second))
	}
}
