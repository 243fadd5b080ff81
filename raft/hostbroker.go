package raft

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// A Host is the broker the HTTP edge sees, as a Node is (ARCHITECTURE.md,
// "Scale-out", Routing): each command goes to the group of the queue it
// names, found in this node's directory replica. What a command names
// decides:
//
//   - a queue (push, pop, configure, delete, seek): the queue's group,
//     placed by the directory when a push or configure first names it;
//   - a partition or a lease (ack, DLQ rows, traces, lease renewals): the
//     group whose replica holds it;
//   - every queue (a discovery pop, a consumer group's deletion or
//     subscription): each group;
//   - streams: group 1, with their source and sink queues.
//
// A command for a group this node leads is proposed here. A push or ack
// whose items lie in several groups is split, and the parts for groups
// another node leads are relayed to it (SetRelay) as prepared entries; so
// are the placements the directory's leader makes and the commands sent to
// every group. Anything else for a group led elsewhere is answered
// *NotLeaderError, and the edge forwards the request to that leader.

// A Relay has the leader of group g, whose HTTP address is addr, propose
// entry (RelayEntry: one command) and returns the command's result, with
// the typed Value the command answers. Its errors are those a proposal's
// could be, and ErrForward when the relay itself failed: the command's
// outcome is then unknown.
type Relay func(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, error)

// SetRelay sets how this host reaches the other groups' leaders; without
// one, a command it must relay is answered NotLeaderError or, split over
// groups, ErrSpansGroups.
func (h *Host) SetRelay(r Relay) { h.relay.Store(&r) }

// RelayEntry encodes c for a Relay: a push is prepared here (PrepareEntry),
// the other relayable commands (relayable says which) go as they are.
func RelayEntry(c engine.Command) ([]byte, error) {
	if _, ok := c.(engine.PushCmd); ok {
		return PrepareEntry(c)
	}
	if !relayable(c) {
		return nil, fmt.Errorf("%w: %T", ErrNotPreparable, c)
	}
	return command.AppendEntry(nil, []command.Stamped{{Cmd: c}}), nil
}

// relayable reports the commands a Host relays besides pushes: parts of
// split acks, placements and their lookups, the commands sent to every
// group, and DLQ replays (a redrive walks rows of every group).
func relayable(c engine.Command) bool {
	switch c.(type) {
	case engine.AckCmd, command.PlaceQueue, command.LookupQueue, engine.DeleteGroupCmd, engine.UpdateSubscriptionCmd, engine.ReplayCmd:
		return true
	}
	return false
}

// ProposeEntry proposes, on group g, a command another node relayed
// (RelayEntry): a prepared push with the seed it was prepared with, or a
// relayable command. It answers as Propose does; ErrNotLeader (a
// NotLeaderError) when this node does not lead g.
func (h *Host) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	n := h.Group(g)
	if n == nil {
		return engine.Result{}, fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	}
	cmds, err := command.DecodeEntry(bytes.Clone(entry))
	switch {
	case err != nil:
		return engine.Result{}, fmt.Errorf("%w: %w", ErrNotPreparable, err)
	case len(cmds) != 1:
		return engine.Result{}, fmt.Errorf("%w: %d commands", ErrNotPreparable, len(cmds))
	}
	if err := n.leading(); err != nil {
		return engine.Result{}, h.groupError(g, err)
	}
	var r engine.Result
	switch c := cmds[0].Cmd.(type) {
	case *engine.PreparedPush:
		r, err = n.propose(ctx, c, cmds[0].Stamp.Seed)
	default:
		if !relayable(c) {
			return engine.Result{}, fmt.Errorf("%w: %T", ErrNotPreparable, c)
		}
		r, err = n.Propose(ctx, c)
	}
	return r, h.groupError(g, err)
}

// ProposePrepared proposes a push another node prepared (PrepareEntry) on
// the group of its queues, which must be one.
func (h *Host) ProposePrepared(ctx context.Context, entry []byte) (engine.Result, error) {
	c, _, err := preparedCommand(entry)
	if err != nil {
		return engine.Result{}, err
	}
	var g uint32
	for _, pg := range c.(*engine.PreparedPush).Groups {
		q := h.Placement(pg.Queue)
		if g != 0 && q != g {
			return engine.Result{}, fmt.Errorf("%w: a prepared push for several groups", ErrNotPreparable)
		}
		g = q
	}
	if g == 0 {
		return engine.Result{}, fmt.Errorf("%w: a prepared push to queues not placed", ErrNotPreparable)
	}
	return h.ProposeEntry(ctx, g, entry)
}

// groupError makes ErrNotLeader from group g a NotLeaderError.
func (h *Host) groupError(g uint32, err error) error {
	if errors.Is(err, ErrNotLeader) {
		var nl *NotLeaderError
		if !errors.As(err, &nl) {
			st := h.nodes[g].Status()
			st.LeaderHTTP = h.httpOf(st)
			return &NotLeaderError{Group: g, Status: st}
		}
	}
	return err
}

// Propose runs c on the groups it concerns (see the top of this file).
func (h *Host) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	switch c := c.(type) {
	case engine.PushCmd:
		return h.push(ctx, c)
	case engine.AckCmd:
		return h.ack(ctx, c)
	case engine.PopCmd:
		if c.Queue == "" {
			return h.discover(ctx, c)
		}
		return h.onFound(ctx, c.Queue, c)
	case engine.ConfigureCmd:
		return h.onQueue(ctx, c.Queue, c)
	case engine.DeleteQueueCmd:
		return h.onFound(ctx, c.Queue, c)
	case engine.SeekCmd:
		return h.onFound(ctx, c.Queue, c)
	case engine.TransactionCmd:
		return h.transaction(ctx, c)
	case engine.ExtendLeaseCmd:
		return h.on(ctx, h.leaseGroup(ctx, c.Lease), c)
	case engine.ReplayCmd:
		return h.run(ctx, h.partitionGroup(ctx, c.PartitionID), c)
	case engine.DeleteDLQCmd:
		return h.on(ctx, h.partitionGroup(ctx, c.PartitionID), c)
	case engine.MoveToDLQCmd:
		return h.on(ctx, h.partitionGroup(ctx, c.PartitionID), c)
	case engine.TraceCmd:
		return h.on(ctx, h.partitionGroup(ctx, c.PartitionID), c)
	case engine.DeleteGroupCmd:
		if c.Queue != "" {
			return h.onFound(ctx, c.Queue, c)
		}
		return h.everyGroup(ctx, c)
	case engine.UpdateSubscriptionCmd:
		return h.everyGroup(ctx, c)
	case engine.StreamRegisterCmd:
		return h.registerStream(ctx, c)
	case engine.StreamDeleteCmd, engine.StreamCycleCmd:
		return h.on(ctx, streamGroup, c)
	case command.Maintenance:
		// Maintenance is cluster-wide: the directory holds it.
		return h.on(ctx, Directory, c)
	}
	return engine.Result{}, fmt.Errorf("raft: host: %T has no route", c)
}

// streamGroup holds the streaming queries and their queues: a cycle acks
// its source and pushes to its sink in one command.
const streamGroup uint32 = 1

// on proposes c on group g here, or answers NotLeaderError.
func (h *Host) on(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	r, err := h.nodes[g].Propose(ctx, c)
	return r, h.groupError(g, err)
}

// onQueue proposes c on queue's group, placing the queue first: for the
// commands that create a queue. The others go to onFound.
func (h *Host) onQueue(ctx context.Context, queue string, c engine.Command) (engine.Result, error) {
	g, err := h.groupOf(ctx, queue)
	if err != nil {
		return engine.Result{}, err
	}
	return h.on(ctx, g, c)
}

// onFound proposes c on queue's group without placing it: a queue no
// group holds goes to group 1, whose engine answers as for any unknown
// queue.
func (h *Host) onFound(ctx context.Context, queue string, c engine.Command) (engine.Result, error) {
	g, err := h.find(ctx, queue)
	if err != nil {
		return engine.Result{}, err
	}
	return h.on(ctx, cmp.Or(g, 1), c)
}

// find returns queue's group, 0 when it has none. A queue this node's
// directory replica does not know may have been placed a moment ago
// through another node: unless this node leads the directory (whose
// applied state holds every placement it answered), it asks the leader
// (command.LookupQueue, answered without a log entry).
func (h *Host) find(ctx context.Context, queue string) (uint32, error) {
	if g := h.Placement(queue); g != 0 || queue == "" || h.nodes[Directory].leading() == nil {
		return g, nil
	}
	r, err := h.run(ctx, Directory, command.LookupQueue{Queue: queue})
	if err != nil {
		return 0, err
	}
	g, _ := r.Value.(uint32)
	return g, nil
}

// run proposes c on group g here when this node leads g, else relays it
// to g's leader. A leader this node has not learnt the address of yet (it
// was elected a moment ago) is waited for, up to addressWait.
func (h *Host) run(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	n := h.nodes[g]
	relay := h.relay.Load()
	deadline := time.Now().Add(addressWait)
	for {
		r, err := n.Propose(ctx, c)
		if !errors.Is(err, ErrNotLeader) || relay == nil {
			return r, h.groupError(g, err)
		}
		st := n.Status()
		if addr := h.httpOf(st); addr != "" && st.Leader != st.ID {
			entry, err := RelayEntry(c)
			if err != nil {
				return engine.Result{}, err
			}
			return (*relay)(ctx, addr, g, entry)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r, h.groupError(g, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addressWait bounds how long a relay waits for a new leader's address,
// which its first entry (command.Announce) brings within a commit.
const addressWait = 2 * time.Second

// httpOf is the HTTP address of the leader st names: the group's own
// record, else another group's (a node announces its address in each group
// it comes to lead, and a leader new to this group may not have yet).
func (h *Host) httpOf(st Status) string {
	if st.LeaderHTTP != "" || st.Leader == "" {
		return st.LeaderHTTP
	}
	for _, n := range h.nodes {
		if a := n.engine.ClusterValue(command.HTTPKey(st.Leader)); a != "" {
			return a
		}
	}
	return ""
}

// groupOf returns queue's group, asking the directory to place it when it
// has none. A name the directory refuses (empty) goes to group 1, whose
// engine refuses it as it would any other.
func (h *Host) groupOf(ctx context.Context, queue string) (uint32, error) {
	if g := h.Placement(queue); g != 0 {
		return g, nil
	}
	if queue == "" {
		return 1, nil
	}
	g, err := h.Place(ctx, queue, 0)
	if err == nil && g == 0 {
		err = fmt.Errorf("%w: the directory placed %q nowhere", ErrResultType, queue)
	}
	return g, err
}

// lookupWait bounds how long a node waits for its replicas to learn a
// partition or lease they do not hold: one created a moment ago on another
// node (a pop answered there) reaches this node's replica a heartbeat
// later.
const lookupWait = time.Second

// partitionGroup returns the group whose replica holds the partition,
// waiting up to lookupWait for one to; when none does it returns group 1,
// whose engine answers as for any unknown partition.
func (h *Host) partitionGroup(ctx context.Context, id engine.ID) uint32 {
	return h.lookup(ctx, func(n *Node) bool {
		_, _, ok := n.engine.PartitionByID(id)
		return ok
	})
}

// leaseGroup is partitionGroup for a lease.
func (h *Host) leaseGroup(ctx context.Context, id engine.ID) uint32 {
	return h.lookup(ctx, func(n *Node) bool { return n.engine.HasLease(id) })
}

func (h *Host) lookup(ctx context.Context, holds func(*Node) bool) uint32 {
	deadline := time.Now().Add(lookupWait)
	for {
		for g := 1; g < len(h.nodes); g++ {
			if holds(h.nodes[g]) {
				return uint32(g)
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 1
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// part is the items of a split command bound for one group: their indexes
// in the command.
type part struct {
	group uint32
	items []int
}

// split groups n items by group (of(i)), in first-appearance order.
func split(n int, of func(i int) (uint32, error)) ([]part, error) {
	var parts []part
	for i := range n {
		g, err := of(i)
		if err != nil {
			return nil, err
		}
		k := slices.IndexFunc(parts, func(p part) bool { return p.group == g })
		if k < 0 {
			parts = append(parts, part{group: g})
			k = len(parts) - 1
		}
		parts[k].items = append(parts[k].items, i)
	}
	return parts, nil
}

// memo is of(key(i)) with one call of of a distinct key.
func memo[K comparable](key func(i int) K, of func(K) (uint32, error)) func(int) (uint32, error) {
	seen := map[K]uint32{}
	return func(i int) (uint32, error) {
		k := key(i)
		if g, ok := seen[k]; ok {
			return g, nil
		}
		g, err := of(k)
		if err == nil {
			seen[k] = g
		}
		return g, err
	}
}

// runParts runs one command per part at once (build makes part k's) and
// returns each part's answer.
func (h *Host) runParts(ctx context.Context, parts []part, build func(k int) engine.Command) ([]engine.Result, []error) {
	res := make([]engine.Result, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() {
			res[k], errs[k] = h.run(ctx, parts[k].group, build(k))
			if errs[k] == nil {
				errs[k] = res[k].Err
			}
		})
	}
	wg.Wait()
	return res, errs
}

// push splits a push by its queues' groups. A part that fails makes its
// items failed (Rejected, with the part's error), the others stand: each
// item's answer says what happened to it. A push to one group answers its
// error as the push's.
func (h *Host) push(ctx context.Context, c engine.PushCmd) (engine.Result, error) {
	// One lookup a queue: a queue placed a moment ago through the
	// directory's leader is not in this node's replica yet.
	parts, err := split(len(c.Items), memo(func(i int) string { return c.Items[i].Queue },
		func(q string) (uint32, error) { return h.groupOf(ctx, q) }))
	if err != nil || len(parts) <= 1 {
		if err != nil {
			return engine.Result{}, err
		}
		if len(parts) == 0 {
			return h.on(ctx, 1, c)
		}
		return h.run(ctx, parts[0].group, c)
	}
	res, errs := h.runParts(ctx, parts, func(k int) engine.Command {
		items := make([]engine.PushItem, len(parts[k].items))
		for j, i := range parts[k].items {
			items[j] = c.Items[i]
		}
		return engine.PushCmd{Items: items}
	})
	out := make([]engine.PushResult, len(c.Items))
	var wake []string
	for k, p := range parts {
		got, _ := res[k].Value.([]engine.PushResult)
		if errs[k] == nil && len(got) != len(p.items) {
			errs[k] = fmt.Errorf("%w: %d results for %d items", ErrResultType, len(got), len(p.items))
		}
		for j, i := range p.items {
			if errs[k] != nil {
				out[i] = engine.PushResult{Status: engine.Rejected, TransactionID: c.Items[i].TransactionID,
					Queue: c.Items[i].Queue, Partition: c.Items[i].Partition, Err: errs[k]}
				continue
			}
			out[i] = got[j]
		}
		wake = append(wake, res[k].Wake...)
	}
	return engine.Result{Value: out, Wake: wake}, nil
}

// ack splits an ack by its partitions' groups, as push does.
func (h *Host) ack(ctx context.Context, c engine.AckCmd) (engine.Result, error) {
	// One lookup a partition: an unknown one waits lookupWait.
	parts, _ := split(len(c.Items), memo(func(i int) engine.ID { return c.Items[i].PartitionID },
		func(id engine.ID) (uint32, error) { return h.partitionGroup(ctx, id), nil }))
	if len(parts) <= 1 {
		g := uint32(1)
		if len(parts) == 1 {
			g = parts[0].group
		}
		return h.run(ctx, g, c)
	}
	res, errs := h.runParts(ctx, parts, func(k int) engine.Command {
		items := make([]engine.AckItem, len(parts[k].items))
		for j, i := range parts[k].items {
			items[j] = c.Items[i]
		}
		return engine.AckCmd{Items: items}
	})
	out := make([]engine.AckResult, len(c.Items))
	for k, p := range parts {
		got, _ := res[k].Value.([]engine.AckResult)
		if errs[k] == nil && len(got) != len(p.items) {
			errs[k] = fmt.Errorf("%w: %d results for %d items", ErrResultType, len(got), len(p.items))
		}
		for j, i := range p.items {
			if errs[k] != nil {
				out[i] = engine.AckResult{TransactionID: c.Items[i].TransactionID, Error: errs[k].Error()}
				continue
			}
			out[i] = got[j]
		}
	}
	return engine.Result{Value: out}, nil
}

// transaction runs a transaction in the one group all its operations lie
// in; one spanning groups is refused (ErrSpansGroups), naming what lies
// where. Queues it pushes to that no group holds yet are placed in that
// group.
func (h *Host) transaction(ctx context.Context, c engine.TransactionCmd) (engine.Result, error) {
	var (
		groups []uint32
		where  []string
	)
	add := func(g uint32, what string) {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
		where = append(where, fmt.Sprintf("%s in group %d", what, g))
	}
	// Acks and leases first: they name the group the transaction runs in,
	// and a queue the transaction is the first to push to is placed there
	// (a pipeline step's output lands with its input).
	var unplaced []string
	for _, op := range c.Ops {
		switch {
		case op.Push != nil:
			if g := h.Placement(op.Push.Queue); g != 0 {
				add(g, "queue "+op.Push.Queue)
			} else if !slices.Contains(unplaced, op.Push.Queue) {
				unplaced = append(unplaced, op.Push.Queue)
			}
		case op.Ack != nil:
			g := h.partitionGroup(ctx, op.Ack.PartitionID)
			what := "partition " + uuid.UUID(op.Ack.PartitionID).String()
			if name, _, ok := h.nodes[g].engine.PartitionByID(op.Ack.PartitionID); ok {
				what = "queue " + name
			}
			add(g, what)
		}
	}
	for _, l := range c.RequiredLeases {
		add(h.leaseGroup(ctx, l), "lease "+uuid.UUID(l).String())
	}
	var home uint32
	if len(groups) == 1 {
		home = groups[0]
	}
	for _, q := range unplaced {
		g, err := h.Place(ctx, q, home)
		if err != nil {
			return engine.Result{}, err
		}
		add(g, "queue "+q)
	}
	switch len(groups) {
	case 0:
		return h.on(ctx, 1, c)
	case 1:
		return h.on(ctx, groups[0], c)
	}
	slices.Sort(where)
	return engine.Result{}, fmt.Errorf("%w: a transaction's pushes, acks and leases must lie in one Raft group; it has %s",
		ErrSpansGroups, strings.Join(slices.Compact(where), ", "))
}

// discover runs a discovery pop (no queue) on the groups in turn, from a
// rotating start so that no group is always asked first, the groups this
// node leads before the others: the first whose replica shows it would
// deliver is proposed to (here, or NotLeaderError, and the node the edge
// forwards to finds it among its own). When none would, the answer is the
// empty pop.
func (h *Host) discover(ctx context.Context, c engine.PopCmd) (engine.Result, error) {
	data := len(h.nodes) - 1
	start := int(h.turn.Add(1) % uint64(data))
	now := time.Now().UnixMicro()
	var (
		empty engine.Result
		later []uint32 // would deliver, led elsewhere
	)
	for k := range data {
		g := uint32(1 + (start+k)%data)
		if r, ok := c.Skip(h.nodes[g].engine, now); ok {
			empty = r
			continue
		}
		if h.nodes[g].leading() != nil {
			later = append(later, g)
			continue
		}
		return h.on(ctx, g, c)
	}
	if len(later) > 0 {
		return h.on(ctx, later[0], c)
	}
	return empty, nil
}

// everyGroup runs c on every data group (here or relayed) and merges the
// answers: counts add up, found is found anywhere.
func (h *Host) everyGroup(ctx context.Context, c engine.Command) (engine.Result, error) {
	parts := make([]part, len(h.nodes)-1)
	for k := range parts {
		parts[k].group = uint32(k + 1)
	}
	res, errs := h.runParts(ctx, parts, func(int) engine.Command { return c })
	var out engine.Result
	for k := range res {
		if errs[k] != nil {
			return engine.Result{}, fmt.Errorf("group %d: %w", parts[k].group, errs[k])
		}
		switch v := res[k].Value.(type) {
		case int:
			n, _ := out.Value.(int)
			out.Value = n + v
		case engine.GroupDeleted:
			sum, _ := out.Value.(engine.GroupDeleted)
			out.Value = engine.GroupDeleted{Cursors: sum.Cursors + v.Cursors, Metadata: sum.Metadata || v.Metadata}
		default:
			return engine.Result{}, fmt.Errorf("%w: %T from every group", ErrResultType, v)
		}
		out.Wake = append(out.Wake, res[k].Wake...)
	}
	return out, nil
}

// registerStream registers a stream in streamGroup, placing its source and
// sink queues there; queues already placed elsewhere are refused.
func (h *Host) registerStream(ctx context.Context, c engine.StreamRegisterCmd) (engine.Result, error) {
	queues := []string{c.SourceQueue}
	if c.HasSink {
		queues = append(queues, c.SinkQueue)
	}
	for _, q := range queues {
		r, err := h.run(ctx, Directory, command.PlaceQueue{Queue: q, Group: streamGroup})
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return engine.Result{}, err
		}
		if g, _ := r.Value.(uint32); g != streamGroup {
			return engine.Result{}, fmt.Errorf("%w: streams run in Raft group %d, and queue %s was placed in group %d", ErrSpansGroups, streamGroup, q, g)
		}
	}
	return h.on(ctx, streamGroup, c)
}

// Barrier returns once every group this node leads has applied what was
// committed before the call; NotLeaderError when it leads none.
func (h *Host) Barrier(ctx context.Context) error {
	led := false
	for g := 1; g < len(h.nodes); g++ {
		err := h.nodes[g].Barrier(ctx)
		switch {
		case err == nil:
			led = true
		case !errors.Is(err, ErrNotLeader) && !errors.Is(err, ErrNoLeader):
			return h.groupError(uint32(g), err)
		}
	}
	if !led {
		return h.groupError(1, h.nodes[1].Barrier(ctx))
	}
	return nil
}

// LeaderRead readies a read of the streams (streamGroup).
func (h *Host) LeaderRead(ctx context.Context) error {
	return h.groupError(streamGroup, h.nodes[streamGroup].LeaderRead(ctx))
}

// Status is the directory's: its leader is the cluster's for what is not a
// queue's (membership, storage reports, analytics). GroupStatus has each
// group's.
func (h *Host) Status() Status {
	st := h.nodes[Directory].Status()
	for _, n := range h.nodes[1:] {
		gs := n.Status()
		st.StorageErrors = max(st.StorageErrors, gs.StorageErrors)
		if st.Fault == "" {
			st.Fault = gs.Fault
		}
	}
	return st
}

// GroupStatus is group g's status on this node.
func (h *Host) GroupStatus(g uint32) Status { return h.nodes[g].Status() }

// Maintenance reports the cluster-wide maintenance switches, which the
// directory holds.
func (h *Host) Maintenance() (push, pop bool) { return maintenance(h.nodes[Directory].engine) }

// Watch reports applies that may have made messages of queue deliverable,
// in its group, or in every group for "".
func (h *Host) Watch(queue string) (<-chan struct{}, func()) {
	if g := h.Placement(queue); g != 0 {
		return h.nodes[g].Watch(queue)
	}
	// Every group: a queue not placed yet may be placed anywhere.
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	var cancels []func()
	var wg sync.WaitGroup
	for _, n := range h.nodes[1:] {
		ch, cancel := n.Watch(queue)
		cancels = append(cancels, cancel)
		wg.Go(func() {
			for {
				select {
				case <-ch:
					select {
					case out <- struct{}{}:
					default:
					}
				case <-stop:
					return
				}
			}
		})
	}
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(stop)
			wg.Wait()
			for _, c := range cancels {
				c()
			}
		})
	}
}

// The reads: each from the group that holds what is read, or from every
// group, merged in the order one engine gives.

// Queues describes every queue, by name.
func (h *Host) Queues() ([]engine.QueueInfo, error) {
	var all []engine.QueueInfo
	for _, n := range h.nodes[1:] {
		qs, err := n.Queues()
		if err != nil {
			return nil, err
		}
		all = append(all, qs...)
	}
	slices.SortFunc(all, func(a, b engine.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return all, nil
}

// Queue describes one queue.
func (h *Host) Queue(name string) (engine.QueueInfo, error) {
	return h.nodes[h.readGroup(name)].Queue(name)
}

// QueueConfig returns a queue's effective configuration.
func (h *Host) QueueConfig(name string) (engine.Config, bool) {
	return h.nodes[h.readGroup(name)].QueueConfig(name)
}

// readGroup is a queue's group for a read: group 1 for a queue not placed
// (whose engine answers as for any unknown queue).
func (h *Host) readGroup(queue string) uint32 { return cmp.Or(h.Placement(queue), 1) }

// Cursors lists every group's cursor rows.
func (h *Host) Cursors(now int64, group string) ([]engine.CursorInfo, error) {
	return gather(h, func(n *Node) ([]engine.CursorInfo, error) { return n.Cursors(now, group) })
}

// Subscriptions lists every group's stored subscriptions.
func (h *Host) Subscriptions() ([]engine.Subscription, error) {
	return gather(h, (*Node).Subscriptions)
}

func gather[T any](h *Host, read func(*Node) ([]T, error)) ([]T, error) {
	var all []T
	for _, n := range h.nodes[1:] {
		got, err := read(n)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	return all, nil
}

// ListDLQ pages dead-letter rows, newest failure first, over every group
// (or the filter's queue's).
func (h *Host) ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error) {
	if f.Queue != "" {
		return h.nodes[h.readGroup(f.Queue)].ListDLQ(f)
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	each := f
	each.Offset, each.Limit = 0, f.Offset+f.Limit
	var (
		all   []engine.DeadLetter
		total int
	)
	for _, n := range h.nodes[1:] {
		rows, k, err := n.ListDLQ(each)
		if err != nil {
			return nil, 0, err
		}
		all = append(all, rows...)
		total += k
	}
	slices.SortStableFunc(all, func(a, b engine.DeadLetter) int { return bytes.Compare(b.Row[:], a.Row[:]) })
	return page(all, f.Offset, f.Limit), total, nil
}

func page[T any](all []T, offset, limit int) []T {
	if offset >= len(all) {
		return nil
	}
	return all[offset:min(len(all), offset+limit)]
}

// DeadLettersAt returns the dead-letter rows of an address.
func (h *Host) DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error) {
	return h.nodes[h.heldBy(part)].DeadLettersAt(part, txn)
}

// MessageAt finds a retained message by address.
func (h *Host) MessageAt(part engine.ID, txn string) (engine.StoredMessage, error) {
	return h.nodes[h.heldBy(part)].MessageAt(part, txn)
}

// heldBy is the group whose replica holds the partition now, 1 if none.
func (h *Host) heldBy(part engine.ID) uint32 {
	for g := 1; g < len(h.nodes); g++ {
		if _, _, ok := h.nodes[g].engine.PartitionByID(part); ok {
			return uint32(g)
		}
	}
	return 1
}

// ListMessages pages retained messages, newest first, over every group
// (or the filter's queue's).
func (h *Host) ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error) {
	if f.Queue != "" {
		return h.nodes[h.readGroup(f.Queue)].ListMessages(f)
	}
	if f.Limit <= 0 {
		f.Limit = 200
	}
	each := f
	each.Offset, each.Limit = 0, f.Offset+f.Limit
	all, err := gather(h, func(n *Node) ([]engine.ListedMessage, error) { return n.ListMessages(each) })
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b engine.ListedMessage) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(b.Offset, a.Offset))
	})
	return page(all, f.Offset, f.Limit), nil
}

// StreamQueryByID returns a registered streaming query (streamGroup).
func (h *Host) StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error) {
	return h.nodes[streamGroup].StreamQueryByID(id)
}

// StreamState reads streaming state (streamGroup).
func (h *Host) StreamState(f engine.StateFilter) ([]engine.StateRow, error) {
	return h.nodes[streamGroup].StreamState(f)
}

// Traces returns a message's traces.
func (h *Host) Traces(part engine.ID, txn string) ([]engine.Trace, error) {
	return h.nodes[h.heldBy(part)].Traces(part, txn)
}

// TracesByName pages the traces carrying name over every group, oldest
// first (ties by id).
func (h *Host) TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error) {
	var (
		all   []engine.TraceAt
		total int
	)
	for _, n := range h.nodes[1:] {
		got, k, err := n.TracesByName(name, offset+limit, 0)
		if err != nil {
			return nil, 0, err
		}
		all = append(all, got...)
		total += k
	}
	slices.SortStableFunc(all, func(a, b engine.TraceAt) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), bytes.Compare(a.ID[:], b.ID[:]))
	})
	return page(all, offset, limit), total, nil
}

// TraceNames pages the distinct trace names over every group, newest
// lastSeen first (then by name); a name traced in several groups is one
// row with their counts added.
func (h *Host) TraceNames(limit, offset int) ([]engine.TraceName, int, error) {
	byName := map[string]*engine.TraceName{}
	var all []*engine.TraceName
	for _, n := range h.nodes[1:] {
		got, _, err := n.TraceNames(math.MaxInt32, 0)
		if err != nil {
			return nil, 0, err
		}
		for _, t := range got {
			sum := byName[t.Name]
			if sum == nil {
				sum = &engine.TraceName{Name: t.Name}
				byName[t.Name] = sum
				all = append(all, sum)
			}
			sum.TraceCount += t.TraceCount
			sum.MessageCount += t.MessageCount
			sum.LastSeen = max(sum.LastSeen, t.LastSeen)
		}
	}
	slices.SortStableFunc(all, func(a, b *engine.TraceName) int {
		return cmp.Or(cmp.Compare(b.LastSeen, a.LastSeen), strings.Compare(a.Name, b.Name))
	})
	out := make([]engine.TraceName, 0, min(limit, len(all)))
	for _, t := range page(all, offset, limit) {
		out = append(out, *t)
	}
	return out, len(all), nil
}

// JoinGroup adds a voter to group g (its leader only: ErrNotLeader, a
// NotLeaderError, elsewhere). A node joins a Host's cluster by joining
// every group; the edge asks each group's leader (server/relay.go).
func (h *Host) JoinGroup(g uint32, id, addr string, force bool) error {
	n := h.Group(g)
	if n == nil {
		return fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	}
	return h.groupError(g, n.Join(id, addr, force))
}

// LeaveGroup removes a server from group g, as JoinGroup adds one.
func (h *Host) LeaveGroup(g uint32, id string, force bool) error {
	n := h.Group(g)
	if n == nil {
		return fmt.Errorf("%w: group %d does not exist", engine.ErrInvalid, g)
	}
	return h.groupError(g, n.Leave(id, force))
}
