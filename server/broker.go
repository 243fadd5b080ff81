package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Reader is the local, read-only view of the broker's state the admin and
// DLQ routes use. Reads are served from this node's applied state; a route
// that needs read-your-writes across nodes calls Broker.Barrier first.
type Reader interface {
	Queues() ([]engine.QueueInfo, error)
	Queue(name string) (engine.QueueInfo, error)
	Cursors(now int64, group string) ([]engine.CursorInfo, error)
	Subscriptions() ([]engine.Subscription, error)
	ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error)
	DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error)
	MessageAt(part engine.ID, txn string) (engine.StoredMessage, error)
	ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error)
}

// Broker is the replicated broker as the HTTP edge sees it; raft.Node
// implements it. Every command is stamped by the leader (time, ids) and
// applied on every node; a follower forwards it to the leader and relays the
// answer. Errors are engine or raft sentinels, mapped in errors.go.
type Broker interface {
	Reader

	// Propose runs a command (raft.Proposer): handlers call it through
	// raft.Propose, which checks the answer's type. It returns
	// raft.ErrNotLeader, before proposing anything, on a follower: the
	// request is then forwarded to the leader.
	raft.Proposer

	// Barrier returns once this node has applied every command committed
	// before the call (a consistent read).
	Barrier(ctx context.Context) error
	// Watch returns a channel that receives (without blocking the sender)
	// whenever a command applied on this node may have made messages of
	// queue deliverable: a push to it, an ack or lease change on it. The
	// empty queue name watches every queue (discovery pops). cancel releases
	// the watch.
	Watch(queue string) (ch <-chan struct{}, cancel func())
	// Status reports the node's Raft role, leader and applied index.
	Status() raft.Status
}

// Grouped is a broker that spreads queues over several Raft groups
// (cluster.Host; ARCHITECTURE.md, "Scale-out"). It routes each command to its
// group itself, forwards the parts of split commands (package cluster,
// given to it when it was opened), and answers a *raft.NotLeaderError
// naming the leader to forward the rest of a request to.
type Grouped interface {
	ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error)
	Groups() []uint32
	GroupStatus(g uint32) raft.Status
	// Placement is a queue's group, 0 while it has none.
	Placement(queue string) uint32
	// Place places a queue in group (0: where the directory chooses)
	// unless it has a group, and returns its group.
	Place(ctx context.Context, queue string, group uint32) (uint32, error)
	// Layout is the nodes and every group's members and leader.
	Layout() raft.Layout
}

// LaidOut is a broker that knows its nodes and its group's members
// (raft.Node); one without it (an engine in process) is a node alone.
type LaidOut interface {
	Layout() raft.Layout
}

// groupView is the broker's Raft groups as the handlers see them, one
// interface whether the node runs one group or many (New picks the
// adapter: spreadGroups for a Grouped broker, oneGroup for any other).
// Handlers never ask which it is: where the two truly differ, the
// difference is a capability (leaderKnownUnread).
type groupView interface {
	// list is the groups queues are spread over, the directory (0)
	// first; none when one group holds every queue (the node's own
	// status is then that group's).
	list() []uint32
	// status is group g's status on this node.
	status(g uint32) raft.Status
	// placement is a queue's group: 0 while it has none, and always with
	// one group.
	placement(queue string) uint32
	// holder is the group holding a queue's messages: its placement with
	// many groups (0 while this node's directory replica has not applied
	// it), group 1 with one.
	holder(queue string) uint32
	// layout is the nodes and the groups with their members and leaders
	// (GET /api/v1/system/placement).
	layout() raft.Layout
	// place places a queue being configured (beyond Queen, with
	// --groups) in group when one is asked for (1 to G; 0 or none: where
	// the directory chooses), so that queues a transaction spans can
	// share a group, and returns its group: 0 with one group, which takes
	// only group 1. A queue keeps the group it has: asking for another is
	// 409 placed_elsewhere.
	place(ctx context.Context, queue string, group int64) (uint32, error)
	// ProposeEntry proposes an encoded command another node sent on
	// group g (cluster.Proposer).
	ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error)
	// leaderKnownUnread reports whether the leader that serves a request
	// is known before its body is read. With one group it is the node's
	// leader: a follower relays a request unread, proposes through a
	// cluster.Proxy (sender) and sends the leader its reports. With many, a command's group is in what
	// it names: the broker routes it after it is read.
	leaderKnownUnread() bool
}

// groupsOf is b's groupView.
func groupsOf(b Broker) groupView {
	if g, ok := b.(Grouped); ok {
		return spreadGroups{g}
	}
	return oneGroup{b}
}

// spreadGroups is the groupView of a broker of many groups.
type spreadGroups struct{ Grouped }

func (g spreadGroups) list() []uint32                { return g.Groups() }
func (g spreadGroups) status(n uint32) raft.Status   { return g.GroupStatus(n) }
func (g spreadGroups) placement(queue string) uint32 { return g.Placement(queue) }
func (g spreadGroups) holder(queue string) uint32    { return g.Placement(queue) }
func (g spreadGroups) layout() raft.Layout           { return g.Layout() }
func (g spreadGroups) leaderKnownUnread() bool       { return false }

func (g spreadGroups) place(ctx context.Context, queue string, group int64) (uint32, error) {
	if n := int64(len(g.Groups()) - 1); group < 0 || group > n {
		return 0, badRequest("raftGroup must be between 1 and " + strconv.FormatInt(n, 10) + " (0 or absent: the directory chooses)")
	}
	placed, err := g.Place(ctx, queue, uint32(group))
	if err == nil && group != 0 && placed != uint32(group) {
		err = fmt.Errorf("%w: queue %s lives in Raft group %d, configure does not move it (POST /api/v1/system/queues/%s/move does)", raft.ErrPlaced, queue, placed, queue)
	}
	return placed, err
}

// oneGroup is the groupView of a broker of one group (raft.Node, or an
// engine in process): group 1 holds every queue.
type oneGroup struct{ b Broker }

func (oneGroup) list() []uint32              { return nil }
func (o oneGroup) status(uint32) raft.Status { return o.b.Status() }
func (oneGroup) placement(string) uint32     { return 0 }
func (oneGroup) holder(string) uint32        { return 1 }
func (oneGroup) leaderKnownUnread() bool     { return true }

func (oneGroup) place(_ context.Context, _ string, group int64) (uint32, error) {
	if group > 1 {
		return 0, badRequest("raftGroup: this node runs one Raft group (--groups 1)")
	}
	return 0, nil
}

func (o oneGroup) layout() raft.Layout {
	if l, ok := o.b.(LaidOut); ok {
		return l.Layout()
	}
	st := o.b.Status()
	return raft.Layout{Nodes: []raft.LayoutNode{{ID: st.ID, Live: true}},
		Groups: []raft.LayoutGroup{{ID: 1, Members: []string{st.ID}, Leader: st.Leader}}}
}

func (o oneGroup) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	p, ok := o.b.(cluster.Proposer)
	if !ok {
		return engine.Result{}, notImplemented("this broker proposes no commands for other nodes")
	}
	return p.ProposeEntry(ctx, g, entry)
}
