package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
	"github.com/queenmq/queen/raft/placement"
)

// A Host runs several Raft groups of one node (ARCHITECTURE.md, "Scale-out"):
// the directory, group 0, and the data groups 1..G, each a raft.Node with
// its own engine and snapshots, all over one raft.Store (one log store and
// one listener). Every node runs the directory; with HostOptions.Replicas
// below the node count a data group's voters are R of the nodes, and only
// they (and a node a replica step adds) open the group (placed.go). The Host hands each group's leadership
// to the member it should have (WantedLeader) once that member has been
// live for SpreadHold, so that with G ≥ N every node leads some groups.
//
// Group 1 of a Host is laid out as a plain Node's store, byte for byte: the
// other groups live under groups/<id>/ and their logs under their own key
// family of the log store. Opening one kind's directory as the other is
// refused all the same (raft.ErrLayout): until queues can move, a plain store's
// queues would be in no directory.
type Host struct {
	opts  HostOptions
	node  raft.Options // each replica's options (HostOptions.Node, with Forward)
	store *raft.Store  // the data directory, log store and listener the groups share
	fresh bool         // the directory had no state when the Host opened: the cluster's first start here
	// replicasSent is when defineGroups last sent R to the directory's
	// leader (spreadLoop's goroutine only).
	replicasSent time.Time
	// nodes are this node's replicas by group id, 0..G: nil where it
	// holds none (placed.go). The directory's is never nil.
	nodes []atomic.Pointer[raft.Node]
	turn  atomic.Uint64 // the rotating start of discovery pops
	// holdOutbox, set by a test, stops outbox deliveries: a transaction
	// then commits and leaves its rows, as a crash would.
	holdOutbox atomic.Bool
	// moveHook, set by a test, runs before each chunk of a move is
	// proposed; its error fails the move there.
	moveHook func(queue string, seq uint32) error
	// dropHook, set by a test, runs once a move has thawed its target and
	// before it drops the source copy.
	dropHook func(queue string)
	// strays are the freeze marks moveLoop saw past their placement's
	// epoch with no move recorded, and since when (only moveLoop's
	// goroutine touches it).
	strays map[strayMark]time.Time
	// cutOff is set while this node has not heard from the directory's
	// leader for ReplaceAfter (rebalance.go, watchDirectory): its
	// replicas may have been re-created elsewhere, so it serves no data
	// group from them.
	cutOff atomic.Bool
	// serving is, by group, whether this node serves it from its replica
	// yet (hostlayout.go, "A replica that starts serving"); readCatchUp
	// how a replica is caught up first (SetReadCatchUp).
	serving []atomic.Int32
	// retiring is, by group, set while a removed replica is being retired
	// (placed.go).
	retiring    []atomic.Bool
	readCatchUp atomic.Pointer[func(context.Context, uint32) error]
	// catchUp is, by group, the commit index this node's replica must
	// apply before it says a replica step adding it is ready
	// (rebalance.go; rebalanceLoop's goroutine only).
	catchUp []uint64

	// done is closed when Close begins; wg counts the Host's goroutines
	// and the moves this node runs (track), which Close waits for before
	// it closes the groups. doneMu orders a move's wg.Add before Close's
	// wg.Wait.
	done   chan struct{}
	doneMu sync.Mutex
	// waitsStopped is closed by StopWaiting (hostmove.go).
	waitsStopped chan struct{}
	stopWait     sync.Once
	wg           sync.WaitGroup
	closeOnce    sync.Once
}

// HostOptions configures a Host.
type HostOptions struct {
	// Node is the node's configuration, as for Open; it applies to every
	// group. Peers' addresses are their listeners, which serve every
	// group. Transport must be nil: the groups share a TCP listener.
	Node raft.Options
	// Groups is G, the number of data groups (at least 1).
	Groups int
	// Replicas is R, the voters each data group has (hostlayout.go): 0,
	// or as many as the nodes, puts every group on every node. Read at
	// the cluster's first start (the founders are Node.Peers), and
	// recorded in the directory.
	Replicas int
	// SpreadInterval is how often the Host checks whether it leads a group
	// another member should lead; SpreadHold how long that member must
	// have been seen live first (defaults 2 s and 10 s).
	SpreadInterval time.Duration
	SpreadHold     time.Duration
	// Forward reaches the other nodes (package cluster): a command for a
	// group another node leads is proposed there through it. Nil (the
	// nodes share no cluster secret): such a command is answered
	// NotLeaderError, and the part of a split one fails.
	Forward Forwarder
	// PartWait bounds how long the part of a split push or ack is retried
	// for (runPart) before the request is answered ErrOutcomeUnknown or
	// the part's items failed (default 5 s).
	PartWait time.Duration
	// OutboxInterval is how often the leader of a group looks for outbox
	// rows left undelivered (hostoutbox.go), and OutboxAge how old a row
	// must be to be redelivered: the node that committed it delivers it
	// first (defaults 1 s and 3 × PartWait).
	OutboxInterval time.Duration
	OutboxAge      time.Duration
	// MoveWait bounds how long a command refused by a queue frozen for a
	// move is routed and proposed again, waiting for the move to place the
	// queue, before its refusal (engine.ErrQueueMoving, a 503) is the
	// answer (default 30 s: a move copies at ~100 MB/s, so a queue of a
	// few GB moves within it).
	MoveWait time.Duration
	// MoveInterval is how often the directory's leader looks for moves a
	// stopped node left part way (moveLoop), and MoveTimeout how old a
	// move must be to be undone (defaults 5 s and 5 min).
	MoveInterval time.Duration
	MoveTimeout  time.Duration
	// RebalanceInterval is how often each node does its part in moving
	// replicas (rebalance.go; default 1 s). ReplaceAfter is how long a
	// node's heartbeats must have failed, as the directory's leader sees
	// them, before its replicas are re-created on other nodes (0: never).
	// StepTimeout is how long one replica step may run before it is
	// abandoned (default 10 min: a snapshot of tens of GB at a few
	// hundred MB/s).
	RebalanceInterval time.Duration
	ReplaceAfter      time.Duration
	StepTimeout       time.Duration
	// DirectoryVoters is the most voters the directory has when the data
	// groups are on R of N nodes; the other nodes follow it as non-voters
	// (voters.go; default DirectoryVoters, 5). VoterSwapAfter is how long a
	// directory voter's heartbeats must have failed before a live
	// non-voter takes its vote (default 30 s).
	DirectoryVoters int
	VoterSwapAfter  time.Duration
	// RetireHold is how long a replica a step removed this node from must
	// have been unplaced here before it is retired, and how long it is
	// kept after it is no longer handed out, for what still holds it, before
	// its files are deleted (placed.go; default 30 s).
	RetireHold time.Duration
	// LoadInterval is how often each data group's leader reports its
	// load to the directory (balance.go; default 10 s).
	LoadInterval time.Duration
	// Balance, on the directory's leader, moves queues from the hottest
	// data group to the coolest (balance.go, where the defaults are
	// argued): when the hottest carries more than BalanceRatio times the
	// coolest's msgs/s and BalanceFloor msgs/s more, for BalanceHold, one
	// queue at most every BalanceCooldown (defaults 1.5, 500, 60 s and
	// 5 min).
	Balance         bool
	BalanceRatio    float64
	BalanceFloor    float64
	BalanceHold     time.Duration
	BalanceCooldown time.Duration
	// OnMove, when set, is called with how each move this node ran ended:
	// a MoveQueue that recorded its move, or a stalled move moveLoop
	// undid on the directory's leader (the node's move metrics, package
	// server/meter).
	OnMove func(MoveOutcome)
}

// OpenHost starts a node's groups: it locks the data directory, opens the
// log store and the listener (raft.OpenStore), then opens the directory
// and each data group, bootstrapping those without state when told to
// (Node.Peers or Node.Bootstrap), as raft.Open does for one.
func OpenHost(o HostOptions) (_ *Host, err error) {
	o.SpreadInterval = cmp.Or(o.SpreadInterval, 2*time.Second)
	o.SpreadHold = cmp.Or(o.SpreadHold, 10*time.Second)
	o.PartWait = cmp.Or(o.PartWait, 5*time.Second)
	o.OutboxInterval = cmp.Or(o.OutboxInterval, time.Second)
	o.OutboxAge = cmp.Or(o.OutboxAge, 3*o.PartWait)
	o.MoveWait = cmp.Or(o.MoveWait, 30*time.Second)
	o.MoveInterval = cmp.Or(o.MoveInterval, 5*time.Second)
	o.MoveTimeout = cmp.Or(o.MoveTimeout, 5*time.Minute)
	o.RebalanceInterval = cmp.Or(o.RebalanceInterval, time.Second)
	o.StepTimeout = cmp.Or(o.StepTimeout, 10*time.Minute)
	o.RetireHold = cmp.Or(o.RetireHold, 30*time.Second)
	o.VoterSwapAfter = cmp.Or(o.VoterSwapAfter, 30*time.Second)
	o.LoadInterval = cmp.Or(o.LoadInterval, 10*time.Second)
	o.BalanceRatio = cmp.Or(o.BalanceRatio, 1.5)
	o.BalanceFloor = cmp.Or(o.BalanceFloor, 500)
	o.BalanceHold = cmp.Or(o.BalanceHold, time.Minute)
	o.BalanceCooldown = cmp.Or(o.BalanceCooldown, 5*time.Minute)
	opts := o.Node
	if opts.Forward == nil {
		opts.Forward = o.Forward
	}
	switch err := opts.Validate(); {
	case err != nil:
		return nil, err
	case o.Groups < 1:
		return nil, fmt.Errorf("raft: host: Groups must be at least 1, not %d", o.Groups)
	}
	h := &Host{opts: o, done: make(chan struct{}), waitsStopped: make(chan struct{}), catchUp: make([]uint64, o.Groups+1),
		serving: make([]atomic.Int32, o.Groups+1), retiring: make([]atomic.Bool, o.Groups+1), nodes: make([]atomic.Pointer[raft.Node], o.Groups+1)}
	defer func() {
		if err != nil && h.store != nil {
			h.store.Close()
		}
	}()
	if h.store, err = raft.OpenStore(opts, h.Groups()); err != nil {
		return nil, err
	}
	h.node = opts
	if held, err := h.store.HasState(raft.Directory); err != nil {
		return nil, err
	} else {
		h.fresh = !held
	}
	// A founder keeps the R it started the cluster with until the directory
	// records it: restarted before then, it would take R for 0 (a node
	// from before R existed) and the cluster could run every group on
	// every node for good.
	switch {
	case h.fresh && o.Replicas > 0:
		err = h.store.KeepReplicas(uint32(o.Replicas))
	case !h.fresh && o.Replicas == 0:
		var r uint32
		r, err = h.store.KeptReplicas()
		h.opts.Replicas = int(r)
	}
	if err != nil {
		return nil, err
	}
	if err := h.openGroup(raft.Directory, true); err != nil {
		return nil, err
	}
	// A restart with another count would leave groups unserved or serve
	// groups the cluster does not have.
	if k := h.GroupCount(); k != 0 && k != uint32(o.Groups) {
		return nil, fmt.Errorf("raft: host: the directory says the cluster has %d data groups, not %d", k, o.Groups)
	}
	h.store.Serve(h.directory())
	for g := uint32(1); int(g) <= o.Groups; g++ {
		if placed, err := h.placedAtStart(g); err != nil {
			return nil, err
		} else if !placed {
			continue
		}
		if err := h.openGroup(g, true); err != nil {
			return nil, err
		}
		// A group listed at the start is served at once: no read is
		// under way yet whose barrier could have skipped it.
		if h.listed(g) {
			h.serving[g].Store(servingOn)
		}
	}
	h.wg.Add(8)
	go h.placedLoop()
	go h.servingLoop()
	go h.loadLoop()
	go h.layoutLoop()
	go h.rebalanceLoop()
	go h.spreadLoop()
	go h.outboxLoop()
	go h.moveLoop()
	return h, nil
}

// Removed is closed once this node knows it was removed from the cluster
// (raft/removed.go): the directory, which counts every node, knows no leader,
// and the other nodes run it without this one.
func (h *Host) Removed() <-chan struct{} { return h.store.Removed() }

// Groups returns the ids of the groups the Host runs: the directory, then
// 1..G.
func (h *Host) Groups() []uint32 {
	ids := make([]uint32, h.opts.Groups+1)
	for i := range ids {
		ids[i] = uint32(i)
	}
	return ids
}

// Group returns this node's replica of group g, nil when it holds none
// (placed.go).
func (h *Host) Group(g uint32) *raft.Node { return h.replica(g) }

// replica is this node's replica of group g, nil when it holds none.
func (h *Host) replica(g uint32) *raft.Node {
	if int(g) >= len(h.nodes) {
		return nil
	}
	return h.nodes[g].Load()
}

// served is this node's replica of group g when it serves g from it
// (hosts), else nil: read once, so that a replica retired meanwhile
// (placed.go) is never used after the check.
func (h *Host) served(g uint32) *raft.Node {
	n := h.replica(g)
	if n == nil || !h.hosts(g) {
		return nil
	}
	return n
}

// logger is group g's logger: its replica's here, or the directory's
// naming g when this node holds none.
func (h *Host) logger(g uint32) *slog.Logger {
	if n := h.replica(g); n != nil {
		return n.Logger()
	}
	return h.directory().Logger().With("group", g)
}

// directory is this node's replica of the directory, which every node
// holds.
func (h *Host) directory() *raft.Node { return h.nodes[raft.Directory].Load() }

// Replicas are the replicas this node holds: the directory's, then those
// of groups 1..G it holds, by group id.
func (h *Host) Replicas() []*raft.Node {
	var rs []*raft.Node
	for g := range h.nodes {
		if n := h.nodes[g].Load(); n != nil {
			rs = append(rs, n)
		}
	}
	return rs
}

// Close stops every group, then closes the listener and the log store and
// releases the data directory.
func (h *Host) Close() error {
	var err error
	h.closeOnce.Do(func() {
		h.doneMu.Lock()
		close(h.done)
		h.doneMu.Unlock()
		h.wg.Wait()
		err = h.store.Close()
	})
	return err
}

// preferred is the member that should lead group g: the voters sorted by
// id, taken at g mod their count. Every node computes the same, so
// leadership settles instead of flapping; "" when there are no voters.
func preferred(conf []raft.Peer, g uint32) string {
	var ids []string
	for _, s := range conf {
		if !s.NonVoter {
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		return ""
	}
	slices.Sort(ids)
	return ids[int(g)%len(ids)]
}

// spreadLoop hands the leadership of every group this node leads but is
// not preferred for to the preferred member, once that member has been
// live, as this leader sees its heartbeats, for SpreadHold. Raft's
// transfer waits for the member to catch up with the log first.
func (h *Host) spreadLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.opts.SpreadInterval)
	defer t.Stop()
	liveSince := make([]time.Time, len(h.nodes)) // zero: not seen live
	// Until the directory knows the count, look every 50 ms: no queue can
	// be placed before.
	fast := time.NewTicker(50 * time.Millisecond)
	defer fast.Stop()
	for {
		select {
		case <-t.C:
		case <-fast.C:
			if h.defineGroups() {
				fast.Stop()
			}
			continue
		case <-h.done:
			return
		}
		now := time.Now()
		want := h.wantedLeaders()
		for g := range h.nodes {
			n := h.nodes[g].Load()
			if n == nil {
				continue
			}
			var w string // "": the group's preferred member
			if want != nil {
				w = want[g]
			}
			if target := h.handOff(n, uint32(g), w, now, &liveSince[g], h.opts.SpreadHold); target != "" {
				n.Logger().Info("raft: handing leadership to the group's preferred member", "to", target)
			}
		}
	}
}

// wantedLeaders is, by group id, the member that should lead each group
// when groups are on R of N nodes and every group is on record: leaders
// spread over the nodes from the directory's records (placement.Leaders),
// which every node reads alike. Otherwise nil: each group's preferred.
func (h *Host) wantedLeaders() []string {
	if h.ReplicaCount() == 0 {
		return nil
	}
	groups := make([]placement.Group, 0, len(h.nodes)-1)
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		rec := h.layoutRecord(g)
		if rec.Term == 0 {
			return nil
		}
		groups = append(groups, placement.Group{ID: g, Voters: rec.Voters})
	}
	want := make([]string, len(h.nodes))
	for i, id := range placement.Leaders(groups) {
		want[i+1] = id
	}
	return want
}

// handOff transfers the leadership of n, this node's replica of group g,
// to want, or when want is "" to its preferred member, if n leads g, this
// node is not that member, and has seen it live since *since for at least
// hold; it returns the member it handed to, or "".
func (h *Host) handOff(n *raft.Node, g uint32, want string, now time.Time, since *time.Time, hold time.Duration) string {
	if !n.IsLeader() {
		*since = time.Time{}
		return ""
	}
	conf, err := n.Configuration()
	if err != nil {
		return ""
	}
	target := want
	if target == "" || !slices.ContainsFunc(conf, func(s raft.Peer) bool { return s.ID == want && !s.NonVoter }) {
		target = preferred(conf, g)
	}
	if target == "" || target == h.opts.Node.ID || n.Failing(target) {
		*since = time.Time{}
		return ""
	}
	if since.IsZero() {
		*since = now
	}
	if now.Sub(*since) < hold {
		return ""
	}
	*since = time.Time{}
	var addr string
	for _, s := range conf {
		if s.ID == target {
			addr = s.Addr
		}
	}
	if err := n.TransferLeadershipTo(target, addr); err != nil {
		// This node still leads (a transfer that times out, under load,
		// leaves it so), and the next look tries again: nothing for an
		// operator to do.
		n.Logger().Info("raft: leadership transfer to the preferred member did not complete; trying again later", "to", target, "err", err)
		return ""
	}
	return target
}

// GroupCount is the number of data groups as this node's directory replica
// has it, 0 before the first directory leader recorded it.
func (h *Host) GroupCount() uint32 {
	return command.GroupCount(h.directory().Engine().ClusterValue)
}

// Placement is queue's group as this node's directory replica has it, 0
// while it is not placed (or its placement has not reached this replica).
func (h *Host) Placement(queue string) uint32 {
	return command.Placement(h.directory().Engine().ClusterValue, queue)
}

// Place returns queue's group, placing it first when it has none: in group
// when not 0, else where the directory chooses (command.PlaceQueue). On a
// node that does not lead the directory the placement is relayed to its
// leader (HostOptions.Forward), else answered ErrNotLeader. A queue placed already
// keeps its group, whatever group asks for.
func (h *Host) Place(ctx context.Context, queue string, group uint32) (uint32, error) {
	if g := h.Placement(queue); g != 0 {
		return g, nil
	}
	r, err := h.run(ctx, raft.Directory, command.PlaceQueue{Queue: queue, Group: group})
	if err == nil {
		err = r.Err
	}
	g, _ := r.Value.(uint32)
	return g, err
}

// defineGroups records the count in the directory when this node leads it
// and it has none yet; it reports whether the directory has a count. A
// count other than this Host's (founders started with different counts:
// the first applied wins) is logged, once.
func (h *Host) defineGroups() bool {
	d := h.directory()
	if k := h.GroupCount(); k != 0 && (h.opts.Replicas == 0 || command.ReplicaCount(d.Engine().ClusterValue) != 0) {
		if k != uint32(h.opts.Groups) {
			d.Logger().Error("raft: host: the directory says the cluster has a different number of data groups; "+
				"restart this node with the cluster's", "cluster", k, "this_node", h.opts.Groups)
		}
		return true
	}
	if !d.IsLeader() {
		// R is recorded by whichever founder leads the directory once the
		// cluster version allows it; a founder that does not lead sends it
		// to the leader, which may be a node that joined since and does not
		// know R (a cluster whose founders' first leader stopped before
		// then never recorded R, and ran every group on every node).
		if h.opts.Replicas > 0 && h.GroupCount() != 0 && command.ReplicaCount(d.Engine().ClusterValue) == 0 &&
			d.ClusterVersion() >= 3 && time.Since(h.replicasSent) >= time.Second {
			h.replicasSent = time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), h.opts.Node.ApplyTimeout)
			defer cancel()
			if _, err := h.run(ctx, raft.Directory, command.Replicas{Count: uint32(h.opts.Replicas)}); err != nil {
				d.Logger().Debug("raft: host: send the voters each group has to the directory's leader", "err", err)
			}
		}
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Node.ApplyTimeout)
	defer cancel()
	if _, err := raft.Propose[uint32](ctx, d, command.Groups{Count: uint32(h.opts.Groups)}); err != nil && !errors.Is(err, raft.ErrShutdown) {
		d.Logger().Warn("raft: host: record the number of data groups", "err", err)
	}
	if h.opts.Replicas > 0 && command.ReplicaCount(d.Engine().ClusterValue) == 0 {
		switch _, err := raft.Propose[uint32](ctx, d, command.Replicas{Count: uint32(h.opts.Replicas)}); {
		case errors.Is(err, raft.ErrClusterVersion):
			// A grouped start: the record is command version 3, and the
			// cluster runs at 1 until the nodes have read each other's
			// /health. The next look proposes it again.
			d.Logger().Debug("raft: host: record the voters each group has once the cluster version allows it", "err", err)
		case err != nil && !errors.Is(err, raft.ErrShutdown):
			d.Logger().Warn("raft: host: record the voters each group has", "err", err)
		}
	}
	return false // the next look confirms it from the applied state
}

// Status is the directory's: its leader is the cluster's for what is not a
// queue's (membership, storage reports, analytics). GroupStatus has each
// group's.
func (h *Host) Status() raft.Status {
	st := h.directory().Status()
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		n := h.served(g)
		if n == nil {
			continue // a group led elsewhere: its version and faults are its nodes'
		}
		gs := n.Status()
		st.StorageErrors = max(st.StorageErrors, gs.StorageErrors)
		st.ClusterVersion = min(st.ClusterVersion, gs.ClusterVersion)
		if st.Fault == "" {
			st.Fault = gs.Fault
		}
	}
	return st
}

// Versions is every server's version as the directory last read them
// (every node is in the directory).
func (h *Host) Versions() []raft.NodeVersion { return h.directory().Versions() }

// GroupStatus is group g's status on this node. For a group it does not
// host (hostlayout.go) that is role "none", with the leader and the count
// of voters the directory records: this node follows no leader of it, and
// /health, which needs every group led, would call the node unhealthy.
func (h *Host) GroupStatus(g uint32) raft.Status {
	n := h.served(g)
	if n == nil {
		st := h.leaderOf(g)
		st.Voters = len(h.layoutRecord(g).Voters)
		return st
	}
	return n.Status()
}

// Maintenance reports the cluster-wide maintenance switches, which the
// directory holds.
func (h *Host) Maintenance() (push, pop bool) { return h.directory().Maintenance() }
