package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// A Host is the broker the HTTP edge sees, as a Node is (ARCHITECTURE.md,
// "Scale-out", Routing): each command goes to the group of the queue it
// names, found in this node's directory replica. What a command touches
// (its footprint, engine.Touches, which the freeze of a moving queue reads
// too) decides:
//
//   - a queue (push, pop, configure, delete, seek): the queue's group,
//     placed by the directory when a push or configure first names it;
//   - a partition or a lease (ack, DLQ rows, traces, lease renewals): the
//     group whose replica holds it;
//   - every queue (a discovery pop, a consumer group's deletion or
//     subscription): each group;
//   - streams: group 1, with their source and sink queues;
//   - a transaction: the group of its acks and leases, its pushes to other
//     groups through that group's outbox (hostoutbox.go).
//
// A command for a group this node leads is proposed here. A push or ack
// whose items lie in several groups is split, and the parts for groups
// another node leads are relayed to it (HostOptions.Forward) as prepared entries; so
// are the placements the directory's leader makes and the commands sent to
// every group. Anything else for a group led elsewhere is answered
// *NotLeaderError, and the edge forwards the request to that leader. The
// relays are in hostrelay.go, the reads over every group in hostread.go.

// groupError makes ErrNotLeader from group g a NotLeaderError.
func (h *Host) groupError(g uint32, err error) error {
	if errors.Is(err, raft.ErrNotLeader) {
		var nl *raft.NotLeaderError
		if !errors.As(err, &nl) {
			return &raft.NotLeaderError{Group: g, Status: h.leaderOf(g)}
		}
	}
	return err
}

// Propose runs c on the groups it concerns (see the top of this file). A
// command refused by a queue frozen for a move (engine.ErrQueueMoving) is
// routed and proposed again until the move has placed the queue, up to
// HostOptions.MoveWait (retryMoving, hostmove.go).
func (h *Host) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	return h.retryMoving(ctx, func() (engine.Result, error) { return h.route(ctx, c) })
}

// route runs c once on the groups it concerns. Most commands are routed
// by their footprint (engine.Touches, through byFootprint); the ones listed
// here first are routed by what the footprint cannot say: split by item,
// a discovery over the groups, the groups streams and cluster-wide records
// live in, and the commands a Host proposes itself, already bound to a
// group (no route: TestHost_EveryCommandHasARoute).
func (h *Host) route(ctx context.Context, c engine.Command) (engine.Result, error) {
	switch c := c.(type) {
	case engine.PushCmd:
		return h.push(ctx, c)
	case engine.AckCmd:
		return h.ack(ctx, c)
	case engine.TransactionCmd:
		return h.transaction(ctx, c)
	case engine.PopCmd:
		if c.Queue == "" {
			return h.discover(ctx, c)
		}
	case engine.StreamRegisterCmd:
		return h.registerStream(ctx, c)
	case engine.StreamDeleteCmd, engine.StreamCycleCmd:
		return h.on(ctx, streamGroup, c)
	case command.Maintenance:
		// Maintenance is cluster-wide: the directory holds it.
		return h.on(ctx, raft.Directory, c)
	case *engine.PreparedPush, engine.OutboxTxCmd:
		return engine.Result{}, fmt.Errorf("%w: %T", raft.ErrNoRoute, c)
	}
	return h.byFootprint(ctx, c)
}

// byFootprint routes c by what it touches (engine.Touches): a move's
// command to the group it names; a consumer group's command over every
// queue to each group; a command of one queue to the queue's group, placed
// first when the command may create it; a command of one partition or
// lease to the group that holds it, relayed to that group's leader when
// its row relays (command.Relayable). Any other footprint has no route.
func (h *Host) byFootprint(ctx context.Context, c engine.Command) (engine.Result, error) {
	fp, _ := engine.Touches(c)
	propose := h.on
	if command.Relayable(c) {
		propose = h.run
	}
	switch fp.Reach {
	case engine.ReachMove:
		return h.onNamed(ctx, fp.Group, c)
	case engine.ReachConsumerGroup:
		return h.everyGroup(ctx, c)
	case engine.ReachNamed:
		switch queues, parts, leases := len(fp.Queues), len(fp.Partitions), len(fp.Leases); {
		case queues == 1 && parts+leases == 0 && fp.Creates:
			return h.onQueue(ctx, fp.Queues[0], c)
		case queues == 1 && parts+leases == 0:
			return h.onFound(ctx, fp.Queues[0], c)
		case queues+leases == 0 && parts == 1:
			return h.onPartition(ctx, propose, fp.Partitions[0], c)
		case queues+parts == 0 && leases == 1:
			g, err := h.leaseGroup(ctx, fp.Leases[0])
			if err != nil {
				return engine.Result{}, err
			}
			return propose(ctx, g, c)
		}
	}
	return engine.Result{}, fmt.Errorf("%w: %T", raft.ErrNoRoute, c)
}

// onNamed runs c on the group it names, here or relayed to that group's
// leader: the commands of a queue's move (engine/move.go) are for one
// group whatever the placement says while the move runs. The directory
// holds no queue, and a group the cluster does not have is refused.
func (h *Host) onNamed(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	if g == raft.Directory || int(g) >= len(h.nodes) {
		return engine.Result{}, fmt.Errorf("%w: %T names group %d, which the cluster does not have", engine.ErrInvalid, c, g)
	}
	return h.run(ctx, g, c)
}

// streamGroup holds the streaming queries and their queues: a cycle acks
// its source and pushes to its sink in one command.
const streamGroup uint32 = 1

// on proposes c on group g here, or answers NotLeaderError (this node
// does not lead g, or does not host it).
func (h *Host) on(ctx context.Context, g uint32, c engine.Command) (engine.Result, error) {
	n := h.served(g)
	if n == nil {
		return engine.Result{}, h.groupError(g, raft.ErrNotLeader)
	}
	r, err := n.Propose(ctx, c)
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
// through another node: it asks the directory's leader, here or relayed
// (command.LookupQueue, answered without a log entry).
func (h *Host) find(ctx context.Context, queue string) (uint32, error) {
	if g := h.Placement(queue); g != 0 || queue == "" {
		return g, nil
	}
	r, err := h.run(ctx, raft.Directory, command.LookupQueue{Queue: queue})
	if err != nil {
		return 0, err
	}
	g, _ := r.Value.(uint32)
	return g, nil
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
		err = fmt.Errorf("%w: the directory placed %q nowhere", raft.ErrResultType, queue)
	}
	return g, err
}

// onPartition proposes c, with propose, on the group that holds partition
// id (partitionGroup); a lookup's error is the answer.
func (h *Host) onPartition(ctx context.Context, propose func(context.Context, uint32, engine.Command) (engine.Result, error),
	id engine.ID, c engine.Command) (engine.Result, error) {
	g, err := h.partitionGroup(ctx, id)
	if err != nil {
		return engine.Result{}, err
	}
	return propose(ctx, g, c)
}

// partitionGroup returns the group that holds the partition: the group
// whose replica here holds it, else the group whose leader says it does
// (command.LookupPartition: this node's replicas may lag behind a pop
// another node answered a moment ago). When no group holds it, group 1,
// whose engine answers as for any unknown partition. When a group's
// leader could not be asked, and no other group holds it, that error: an
// answer from group 1 would then be a guess (a lagging node's ack would be
// refused for a partition that exists).
func (h *Host) partitionGroup(ctx context.Context, id engine.ID) (uint32, error) {
	return h.lookup(ctx, func(n *raft.Node) (string, bool) {
		q, _, ok := n.Engine().PartitionByID(id)
		return q, ok
	}, command.LookupPartition{ID: id})
}

// leaseGroup is partitionGroup for a lease.
func (h *Host) leaseGroup(ctx context.Context, id engine.ID) (uint32, error) {
	return h.lookup(ctx, func(n *raft.Node) (string, bool) { return n.Engine().LeaseQueue(id) }, command.LookupLease{ID: id})
}

// lookup finds the group holding something: in this node's replicas
// (holds, which names the queue it belongs to), else by asking, with ask,
// each group's leader, here or relayed (command.Lookup: its applied state
// holds everything any node answered).
func (h *Host) lookup(ctx context.Context, holds func(*raft.Node) (string, bool), ask command.Lookup) (uint32, error) {
	if g, q := h.holder(holds); g != 0 {
		n := h.replica(g)
		if n == nil {
			return g, nil // retired since: its leader has it
		}
		if _, frozen := n.Engine().Frozen(q); !frozen {
			return g, nil
		}
		// A move froze it there: the directory's leader knows where it
		// lives now, which this node's directory replica may not yet.
		r, err := h.run(ctx, raft.Directory, command.LookupQueue{Queue: q})
		if placed, _ := r.Value.(uint32); err == nil && placed != 0 {
			return placed, nil
		}
		return g, nil
	}
	var first error
	for g := 1; g < len(h.nodes); g++ {
		r, err := h.run(ctx, uint32(g), ask)
		switch {
		case err != nil:
			first = cmp.Or(first, err)
		case r.Value == true:
			return uint32(g), nil
		}
	}
	return 1, first
}

// holder is the group whose replica here holds something (holds), 0 when
// none, and the queue it belongs to. While a moved queue's source copy is being dropped two groups hold
// its partitions and leases: the one the directory places the queue in is
// the queue's. Only hosted replicas are looked in: one left here by a
// replica step that removed this node from its group holds what it had
// then, which is no longer its group's state.
func (h *Host) holder(holds func(*raft.Node) (string, bool)) (uint32, string) {
	found, queue := uint32(0), ""
	for g := 1; g < len(h.nodes); g++ {
		n := h.served(uint32(g))
		if n == nil {
			continue
		}
		q, ok := holds(n)
		if !ok {
			continue
		}
		if h.Placement(q) == uint32(g) {
			return uint32(g), q
		}
		if found == 0 {
			found, queue = uint32(g), q
		}
	}
	return found, queue
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

// runSplit runs the items of a split command, one command a part (build
// makes it from the part's items; runPart proposes it), and answers each
// item in input order: its part's answer for it, or failed's when its part
// was certainly not applied. A part whose outcome is unknown after
// runPart's retries makes the whole command that UnknownError: an item is
// never answered failed when it may have been applied.
func runSplit[I, R any](ctx context.Context, h *Host, parts []part, items []I, build func([]I) engine.Command, failed func(*I, error) R) ([]R, error) {
	res := make([]engine.Result, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for k, p := range parts {
		wg.Go(func() {
			sub := make([]I, len(p.items))
			for j, i := range p.items {
				sub[j] = items[i]
			}
			res[k], errs[k] = h.runPart(ctx, p.group, build(sub))
		})
	}
	wg.Wait()
	for k, p := range parts {
		got, _ := res[k].Value.([]R)
		if errs[k] == nil && len(got) != len(p.items) {
			errs[k] = &raft.UnknownError{Group: p.group, Err: fmt.Errorf("%w: %d results for %d items", raft.ErrResultType, len(got), len(p.items))}
		}
		if errors.Is(errs[k], raft.ErrOutcomeUnknown) {
			return nil, errs[k]
		}
	}
	out := make([]R, len(items))
	for k, p := range parts {
		got, _ := res[k].Value.([]R)
		for j, i := range p.items {
			if errs[k] != nil {
				out[i] = failed(&items[i], errs[k])
				continue
			}
			out[i] = got[j]
		}
	}
	return out, nil
}

// push splits a push by its queues' groups. A part certainly not applied
// makes its items failed (Rejected, with the part's error), the others
// stand: each item's answer says what happened to it. A part whose outcome
// stays unknown is the push's error (runSplit). A push to one group
// answers its error as the push's.
func (h *Host) push(ctx context.Context, c engine.PushCmd) (engine.Result, error) {
	r, err := h.pushOnce(ctx, c)
	if err != nil || r.Err != nil || len(c.Items) < 2 {
		return r, err
	}
	out, _ := r.Value.([]engine.PushResult)
	out, err = retryMovingItems(ctx, h, c.Items, out,
		func(r *engine.PushResult) bool {
			return r.Status == engine.Rejected && errors.Is(r.Err, engine.ErrQueueMoving)
		},
		func(items []engine.PushItem) (engine.Result, error) {
			return h.pushOnce(ctx, engine.PushCmd{Items: items})
		},
		rejectedPush)
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{Value: out}, nil
}

// rejectedPush is a push item's answer when its part failed with err.
func rejectedPush(it *engine.PushItem, err error) engine.PushResult {
	return engine.PushResult{Status: engine.Rejected, TransactionID: it.TransactionID, Queue: it.Queue, Partition: it.Partition, Err: err}
}

// pushOnce routes a push once.
func (h *Host) pushOnce(ctx context.Context, c engine.PushCmd) (engine.Result, error) {
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
	out, err := runSplit(ctx, h, parts, c.Items, func(items []engine.PushItem) engine.Command { return engine.PushCmd{Items: items} },
		rejectedPush)
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{Value: out}, nil
}

// ack splits an ack by its partitions' groups, as push does.
func (h *Host) ack(ctx context.Context, c engine.AckCmd) (engine.Result, error) {
	r, err := h.ackOnce(ctx, c)
	if err != nil || r.Err != nil || len(c.Items) < 2 {
		return r, err
	}
	out, _ := r.Value.([]engine.AckResult)
	refused := engine.ErrQueueMoving.Error()
	out, err = retryMovingItems(ctx, h, c.Items, out,
		func(r *engine.AckResult) bool { return r.Error == refused },
		func(items []engine.AckItem) (engine.Result, error) {
			return h.ackOnce(ctx, engine.AckCmd{Items: items})
		},
		func(it *engine.AckItem, err error) engine.AckResult {
			return engine.AckResult{TransactionID: it.TransactionID, Error: err.Error()}
		})
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{Value: out}, nil
}

// retryMovingItems proposes again, routed afresh, the items of a split
// command whose part a queue frozen for a move refused (refused), until
// none is or HostOptions.MoveWait has passed: the other parts were
// applied, so the command is not proposed again whole. A retry answered
// with an error certain not to have applied fails its items (failed); one
// of unknown outcome is the command's error, as runSplit answers.
func retryMovingItems[I, R any](ctx context.Context, h *Host, items []I, out []R, refused func(*R) bool,
	again func([]I) (engine.Result, error), failed func(*I, error) R) ([]R, error) {
	deadline := time.Now().Add(h.opts.MoveWait)
	for wait := 10 * time.Millisecond; len(out) == len(items); wait = min(2*wait, 200*time.Millisecond) {
		var idx []int
		for i := range out {
			if refused(&out[i]) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 || ctx.Err() != nil || time.Now().After(deadline) || h.stoppingWaits() {
			break
		}
		time.Sleep(wait)
		sub := make([]I, len(idx))
		for j, i := range idx {
			sub[j] = items[i]
		}
		r, err := again(sub)
		switch got, _ := r.Value.([]R); {
		case moving(r, err):
			continue // still frozen: wait on
		case err == nil && r.Err != nil:
			err = r.Err
			fallthrough
		case err != nil:
			if !raft.NotApplied(err) {
				return nil, err
			}
			for _, i := range idx {
				out[i] = failed(&items[i], err)
			}
		case len(got) == len(idx):
			for j, i := range idx {
				out[i] = got[j]
			}
		default:
			return nil, &raft.UnknownError{Err: fmt.Errorf("%w: %d results for %d items", raft.ErrResultType, len(got), len(idx))}
		}
	}
	return out, nil
}

// ackOnce routes an ack once.
func (h *Host) ackOnce(ctx context.Context, c engine.AckCmd) (engine.Result, error) {
	// One lookup a partition: one this node's replicas do not know is
	// asked of the groups' leaders.
	parts, err := split(len(c.Items), memo(func(i int) engine.ID { return c.Items[i].PartitionID },
		func(id engine.ID) (uint32, error) { return h.partitionGroup(ctx, id) }))
	if err != nil {
		return engine.Result{}, err // nothing was proposed: the client may retry
	}
	if len(parts) <= 1 {
		g := uint32(1)
		if len(parts) == 1 {
			g = parts[0].group
		}
		return h.run(ctx, g, c)
	}
	out, err := runSplit(ctx, h, parts, c.Items, func(items []engine.AckItem) engine.Command { return engine.AckCmd{Items: items} },
		func(it *engine.AckItem, err error) engine.AckResult {
			return engine.AckResult{TransactionID: it.TransactionID, Error: err.Error()}
		})
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{Value: out}, nil
}

// discover runs a discovery pop (no queue) on the groups, from a rotating
// start so that no group is always asked first, choosing by what each
// group's state shows (engine.PopWouldDeliver, conservative: a queue no
// pop has touched yet counts, as the pop seeds its cursors):
//
//  1. the groups this node leads whose replica shows the pop may deliver
//     are proposed to in turn, until one delivers;
//  2. else the hosted groups led elsewhere whose replica here shows the
//     same (or trails a write this node relayed, Node.Behind), then the groups this node does not host, are asked through their leaders (wouldDeliver, a read on
//     the leader's state), and the first that may deliver answers
//     NotLeaderError naming that leader: the edge forwards the request
//     there, and that leader finds it among its own (step 1 there). The
//     leader's answer, not this node's replica, decides: a replica may
//     trail, and two nodes each seeing the other's group as not drained
//     would send the pop back and forth.
//
// Only then is the answer the empty pop. A group whose leader could not
// be asked counts as empty: a discovery pop promises what is there now,
// and its consumer asks again (a long poll re-checks on its timer, since
// no apply here signals a group this node does not host).
func (h *Host) discover(ctx context.Context, c engine.PopCmd) (engine.Result, error) {
	data := len(h.nodes) - 1
	start := int(h.turn.Add(1) % uint64(data))
	now := time.Now().UnixMicro()
	empty := engine.Result{Value: engine.PopResult{Group: cmp.Or(c.Group, engine.QueueMode)}}
	var later, remote []uint32 // may deliver as this node sees it, led elsewhere; not hosted here
	for k := range data {
		g := uint32(1 + (start+k)%data)
		switch n := h.served(g); {
		case n == nil:
			remote = append(remote, g)
		case !n.IsLeader() && n.Behind():
			// The replica here has not applied a push this node relayed
			// yet (Node.Written): its leader's state decides.
			later = append(later, g)
		case !n.Engine().PopWouldDeliver(now, c):
		case !n.IsLeader():
			later = append(later, g)
		default:
			r, err := h.on(ctx, g, c)
			if pop, ok := r.Value.(engine.PopResult); err != nil || r.Err != nil || !ok || len(pop.Messages) > 0 {
				return r, err
			}
			empty = r
		}
	}
	for _, g := range append(later, remote...) {
		if h.opts.Forward == nil && h.hosts(g) {
			// No cluster path to ask on: the replica here decides, and
			// the edge forwards the pop to the group's leader.
			return h.on(ctx, g, c)
		}
		deliver, err := h.wouldDeliver(g, c)
		if err != nil {
			h.opts.Node.Logger.Debug("raft: host: a discovery pop's check of a group led elsewhere", "group", g, "err", err)
			continue
		}
		if deliver {
			return h.on(ctx, g, c)
		}
	}
	return empty, nil
}

// everyGroup runs c on every data group (here or relayed) and merges the
// answers: counts add up, found is found anywhere.
//
// Each group's part waits on its own for a queue of that group frozen for
// a move (retryMoving): asked again whole (Propose's retryMoving), c would
// be applied again in the groups that had taken it, and its answer would
// count only what the last round found (a consumer group's delete
// answered 1 cursor of 3). A part that fails while others were applied is
// answered raft.UnknownError, not its own error, which could say nothing
// was applied (raft.NotApplied: a refusal, a move's) when some was.
func (h *Host) everyGroup(ctx context.Context, c engine.Command) (engine.Result, error) {
	res := make([]engine.Result, len(h.nodes)-1)
	errs := make([]error, len(res))
	var wg sync.WaitGroup
	for k := range res {
		g := uint32(k + 1)
		wg.Go(func() {
			res[k], errs[k] = h.retryMoving(ctx, func() (engine.Result, error) { return h.run(ctx, g, c) })
			if errs[k] == nil {
				errs[k] = res[k].Err
			}
		})
	}
	wg.Wait()
	applied := slices.Contains(errs, nil)
	var out engine.Result
	for k := range res {
		if errs[k] != nil {
			if applied {
				return engine.Result{}, &raft.UnknownError{Group: uint32(k + 1), Err: errs[k]}
			}
			return engine.Result{}, fmt.Errorf("group %d: %w", k+1, errs[k])
		}
		switch v := res[k].Value.(type) {
		case int:
			n, _ := out.Value.(int)
			out.Value = n + v
		case engine.GroupDeleted:
			sum, _ := out.Value.(engine.GroupDeleted)
			out.Value = engine.GroupDeleted{Cursors: sum.Cursors + v.Cursors, Metadata: sum.Metadata || v.Metadata}
		default:
			return engine.Result{}, fmt.Errorf("%w: %T from every group", raft.ErrResultType, v)
		}
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
		r, err := h.run(ctx, raft.Directory, command.PlaceQueue{Queue: q, Group: streamGroup})
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return engine.Result{}, err
		}
		if g, _ := r.Value.(uint32); g != streamGroup {
			return engine.Result{}, fmt.Errorf("%w: streams run in Raft group %d, and queue %s was placed in group %d", raft.ErrSpansGroups, streamGroup, q, g)
		}
	}
	return h.on(ctx, streamGroup, c)
}

// Barrier returns once every group this node leads has applied what was
// committed before the call; NotLeaderError when it leads none.
func (h *Host) Barrier(ctx context.Context) error {
	led := false
	for g := 1; g < len(h.nodes); g++ {
		n := h.replica(uint32(g))
		if n == nil {
			continue
		}
		err := n.Barrier(ctx)
		switch {
		case err == nil:
			led = true
		case !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrNoLeader):
			return h.groupError(uint32(g), err)
		}
	}
	if n := h.replica(1); !led && n != nil {
		return h.groupError(1, n.Barrier(ctx))
	} else if !led {
		return h.groupError(1, raft.ErrNotLeader)
	}
	return nil
}

// LeaderRead readies a read of the streams (streamGroup): NotLeaderError,
// naming its leader, when this node does not host it, and the edge
// forwards the read there.
func (h *Host) LeaderRead(ctx context.Context) error {
	n := h.served(streamGroup)
	if n == nil {
		return h.groupError(streamGroup, raft.ErrNotLeader)
	}
	return h.groupError(streamGroup, n.LeaderRead(ctx))
}

// Watch reports applies that may have made messages of queue deliverable,
// in its group, or in every group for "". A group this node does not host
// applies nothing here, so nothing of it is reported: a long poll through
// this node re-checks it on its timer (the pop asks its leader), and a pop
// of one of its queues is forwarded to its leader, which watches it.
func (h *Host) Watch(queue string) (<-chan struct{}, func()) {
	if g := h.Placement(queue); g != 0 {
		if n := h.replica(g); n != nil {
			return n.Watch(queue)
		}
		return make(chan struct{}), func() {} // applied elsewhere: see above
	}
	// Every group: a queue not placed yet may be placed anywhere.
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	var cancels []func()
	var wg sync.WaitGroup
	for _, n := range h.Replicas()[1:] {
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
