package cluster

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// The reads: each from the group that holds what is read, or from every
// group, merged in the order one engine gives. A group this node hosts is
// read from its replica here, one it does not from the group's leader
// (reader, hostremote.go).

// Queues describes every queue, by name. A queue moved a moment ago may
// still be in the group it left (its copy not dropped yet): it is listed
// from the group the directory places it in.
func (h *Host) Queues() ([]engine.QueueInfo, error) {
	all, err := gather(h, groupReader.Queues, func(q *engine.QueueInfo) string { return q.Name })
	slices.SortFunc(all, func(a, b engine.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	return all, err
}

// Queue describes one queue.
func (h *Host) Queue(name string) (engine.QueueInfo, error) {
	g, err := h.queueGroup(name)
	if err != nil {
		return engine.QueueInfo{}, err
	}
	return h.reader(g).Queue(name)
}

// QueueConfig returns a queue's effective configuration. A queue whose
// group could not be found or asked (a group led elsewhere) is answered
// as one that does not exist: CheckedQueueConfig tells the two apart.
func (h *Host) QueueConfig(name string) (engine.Config, bool) {
	g, err := h.queueGroup(name)
	if err != nil {
		return engine.Config{}, false
	}
	return h.reader(g).QueueConfig(name)
}

// queueGroup is a queue's group for a read: group 1 for a queue not placed
// (whose engine answers as for any unknown queue). When some group is led
// elsewhere, a queue this node's directory replica does not place yet is
// looked up with the directory's leader (find): it may have been placed a
// moment ago through another node, and its group's leader, not this
// node's replicas, answers the read. (When this node hosts every group
// the edge's read barrier has caught the directory replica up already.)
func (h *Host) queueGroup(queue string) (uint32, error) {
	g := h.Placement(queue)
	if g != 0 || h.opts.Forward == nil || h.hostsAll() {
		return cmp.Or(g, 1), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadWait)
	defer cancel()
	g, err := h.find(ctx, queue)
	return cmp.Or(g, 1), err
}

// Cursors lists every group's cursor rows.
func (h *Host) Cursors(now int64, group string) ([]engine.CursorInfo, error) {
	return gather(h, func(r groupReader) ([]engine.CursorInfo, error) { return r.Cursors(now, group) },
		func(c *engine.CursorInfo) string { return c.Queue })
}

// Subscriptions lists every group's stored subscriptions.
func (h *Host) Subscriptions() ([]engine.Subscription, error) {
	return gather(h, groupReader.Subscriptions, func(s *engine.Subscription) string { return s.Queue })
}

// gather reads every group's rows, in group order, each from this node's
// replica or the group's leader (reader). Rows of a queue (queueOf) the
// directory places in another group are left out: a moved queue's source
// copy, until it is dropped.
func gather[T any](h *Host, read func(groupReader) ([]T, error), queueOf func(*T) string) ([]T, error) {
	var all []T
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		got, err := read(h.reader(g))
		if err != nil {
			return nil, err
		}
		for i := range got {
			if h.placedIn(queueOf(&got[i]), g) {
				all = append(all, got[i])
			}
		}
	}
	return all, nil
}

// placedIn reports whether this node's directory replica places queue in
// group g, or nowhere (a queue it does not know yet is listed where it is).
func (h *Host) placedIn(queue string, g uint32) bool {
	p := h.Placement(queue)
	return p == 0 || p == g
}

// ListDLQ pages dead-letter rows, newest failure first, over every group
// (or the filter's queue's).
func (h *Host) ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error) {
	if f.Queue != "" {
		g, err := h.queueGroup(f.Queue)
		if err != nil {
			return nil, 0, err
		}
		return h.reader(g).ListDLQ(f)
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
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		rows, k, err := h.reader(g).ListDLQ(each)
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
	g, err := h.heldBy(part)
	if err != nil {
		return nil, err
	}
	return h.reader(g).DeadLettersAt(part, txn)
}

// MessageAt finds a retained message by address.
func (h *Host) MessageAt(part engine.ID, txn string) (engine.StoredMessage, error) {
	g, err := h.heldBy(part)
	if err != nil {
		return engine.StoredMessage{}, err
	}
	return h.reader(g).MessageAt(part, txn)
}

// heldBy is the group that holds the partition now, 1 if none. It looks
// in the replicas this node hosts, then, when some group is led elsewhere,
// asks each group's leader (partitionGroup): its error when one could not
// be asked and none holds it. A partition found here belongs to its
// queue's group by the directory (holder): while a moved queue's source
// copy waits to be dropped, the source still holds the partition as it
// was at the freeze, and a node that hosts the source but not the target
// would read it there and miss every message pushed since the flip.
func (h *Host) heldBy(part engine.ID) (uint32, error) {
	g, q := h.holder(func(n *raft.Node) (string, bool) {
		q, _, ok := n.Engine().PartitionByID(part)
		return q, ok
	})
	if g != 0 {
		return cmp.Or(h.Placement(q), g), nil
	}
	if h.hostsAll() {
		return 1, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteReadWait)
	defer cancel()
	return h.partitionGroup(ctx, part)
}

// ListMessages pages retained messages, newest first, over every group
// (or the filter's queue's).
func (h *Host) ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error) {
	if f.Queue != "" {
		g, err := h.queueGroup(f.Queue)
		if err != nil {
			return nil, err
		}
		return h.reader(g).ListMessages(f)
	}
	if f.Limit <= 0 {
		f.Limit = 200
	}
	each := f
	each.Offset, each.Limit = 0, f.Offset+f.Limit
	all, err := gather(h, func(r groupReader) ([]engine.ListedMessage, error) { return r.ListMessages(each) },
		func(m *engine.ListedMessage) string { return m.Queue })
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
	return h.reader(streamGroup).StreamQueryByID(id)
}

// StreamState reads streaming state (streamGroup).
func (h *Host) StreamState(f engine.StateFilter) ([]engine.StateRow, error) {
	return h.reader(streamGroup).StreamState(f)
}

// Traces returns a message's traces.
func (h *Host) Traces(part engine.ID, txn string) ([]engine.Trace, error) {
	g, err := h.heldBy(part)
	if err != nil {
		return nil, err
	}
	return h.reader(g).Traces(part, txn)
}

// TracesByName pages the traces carrying name over every group, oldest
// first (ties by id).
func (h *Host) TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error) {
	var (
		all   []engine.TraceAt
		total int
	)
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		got, k, err := h.reader(g).TracesByName(name, offset+limit, 0)
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
	for g := uint32(1); int(g) < len(h.nodes); g++ {
		got, _, err := h.reader(g).TraceNames(math.MaxInt32, 0)
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
