package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Transactions across groups (ARCHITECTURE.md, "Scale-out", a
// transaction). A transaction's acks and required leases must lie in one
// group, its home; its pushes may go anywhere. One whose pushes all lie in
// the home group is one TransactionCmd there, as on a single group. One
// with pushes to other groups commits in the home group as one
// engine.OutboxTxCmd, the pushes bound elsewhere written as outbox rows
// under fixed transaction ids; this node then pushes each row to its group
// (deliverOutbox) and answers once they are applied, and deletes the rows
// it delivered. Rows a crash or a failed delivery left behind are
// redelivered by the home group's leader (outboxLoop); the target queue's
// transaction-id dedup makes a repeat a duplicate, not a second message.

// transaction runs a transaction in its home group, its pushes to other
// groups through the outbox. One whose acks and leases lie in several
// groups is refused (ErrSpansGroups), naming what lies where, before
// anything is proposed. A queue no group holds yet is placed in the home
// group (a pipeline step's output lands with its input); with no acks or
// leases, the home is the group of the first push.
func (h *Host) transaction(ctx context.Context, c engine.TransactionCmd) (engine.Result, error) {
	home, err := h.txHome(ctx, c)
	if err != nil {
		return engine.Result{}, err
	}
	groups := map[string]uint32{} // one placement a queue
	var local, away []engine.TxOp
	for _, op := range c.Ops {
		if op.Push == nil {
			local = append(local, op)
			continue
		}
		g, ok := groups[op.Push.Queue]
		if !ok {
			if g, err = h.txPlace(ctx, op.Push.Queue, home); err != nil {
				return engine.Result{}, err
			}
			groups[op.Push.Queue] = g
		}
		if home == 0 {
			home = g
		}
		if g == home {
			local = append(local, op)
		} else {
			away = append(away, op)
		}
	}
	if home == 0 {
		home = 1 // nothing to place: group 1's engine answers the empty transaction
	}
	if len(away) == 0 {
		return h.on(ctx, home, c)
	}
	cmd := engine.OutboxTxCmd{TransactionCmd: engine.TransactionCmd{Ops: local, RequiredLeases: c.RequiredLeases}}
	for _, op := range away {
		cmd.Away = append(cmd.Away, *op.Push)
	}
	r, err := h.on(ctx, home, cmd)
	v, ok := r.Value.(engine.TxResult)
	if err != nil || !ok || !v.Success {
		return r, err
	}
	if len(v.Outbox) != len(cmd.Away) {
		return engine.Result{}, &raft.UnknownError{Group: home, Err: fmt.Errorf("%w: %d outbox rows for %d pushes", raft.ErrResultType, len(v.Outbox), len(cmd.Away))}
	}
	delivered := h.deliverOutbox(ctx, home, v.Outbox)
	// The pushes in request order: the home group's, then the others'.
	homePushes := v.Pushes
	v.Pushes = nil
	for _, op := range c.Ops {
		if op.Push == nil {
			continue
		}
		if groups[op.Push.Queue] == home {
			v.Pushes, homePushes = append(v.Pushes, homePushes[0]), homePushes[1:]
		} else {
			v.Pushes, delivered = append(v.Pushes, delivered[0]), delivered[1:]
		}
	}
	v.Outbox = nil
	r.Value = v
	return r, nil
}

// txHome returns the group all of c's acks and required leases lie in, 0
// when it has none; ErrSpansGroups when they lie in several.
func (h *Host) txHome(ctx context.Context, c engine.TransactionCmd) (uint32, error) {
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
	for _, op := range c.Ops {
		if op.Ack == nil {
			continue
		}
		g, err := h.partitionGroup(ctx, op.Ack.PartitionID)
		if err != nil {
			return 0, err
		}
		what := "partition " + uuid.UUID(op.Ack.PartitionID).String()
		if n := h.replica(g); n == nil {
		} else if name, _, ok := n.Engine().PartitionByID(op.Ack.PartitionID); ok {
			what = "queue " + name
		}
		add(g, what)
	}
	for _, l := range c.RequiredLeases {
		g, err := h.leaseGroup(ctx, l)
		if err != nil {
			return 0, err
		}
		add(g, "lease "+uuid.UUID(l).String())
	}
	switch len(groups) {
	case 0:
		return 0, nil
	case 1:
		return groups[0], nil
	}
	slices.Sort(where)
	return 0, fmt.Errorf("%w: a transaction's acks and required leases must lie in one Raft group "+
		"(its pushes may go to any); it has %s", raft.ErrSpansGroups, strings.Join(slices.Compact(where), ", "))
}

// txPlace returns queue's group, placing it in home (when not 0) if no
// group holds it.
func (h *Host) txPlace(ctx context.Context, queue string, home uint32) (uint32, error) {
	if g := h.Placement(queue); g != 0 {
		return g, nil
	}
	if queue == "" {
		return max(home, 1), nil // the engine refuses the name
	}
	return h.Place(ctx, queue, home)
}

// deliverOutbox pushes the committed rows of a transaction to their
// groups, one part a group (runSplit: each retried for PartWait), deletes
// the rows whose push was applied, and returns each row's push result. The
// transaction has committed, so nothing here fails it: a row whose push may
// not have been applied stays for outboxLoop, which delivers it later, and
// its result is engine.Pending (committed, on its way, ids not known yet).
// A push the target refuses as invalid can never succeed; its row is
// dropped, logged.
func (h *Host) deliverOutbox(ctx context.Context, home uint32, rows []engine.OutboxRow) []engine.PushResult {
	out := make([]engine.PushResult, len(rows))
	for i := range rows {
		it := &rows[i].Item
		out[i] = engine.PushResult{Status: engine.Pending, TransactionID: it.TransactionID, Queue: it.Queue, Partition: it.Partition}
	}
	if h.holdOutbox.Load() {
		return out // a test's crash: the rows stay
	}
	items := make([]engine.PushItem, len(rows))
	for i := range rows {
		items[i] = rows[i].Item
	}
	parts, err := split(len(items), memo(func(i int) string { return items[i].Queue },
		func(q string) (uint32, error) { return h.groupOf(ctx, q) }))
	if err != nil {
		h.logger(home).Warn("raft: outbox: find the pushes' groups; the loop delivers them", "err", err)
		return out
	}
	res, err := runSplit(ctx, h, parts, items, func(items []engine.PushItem) engine.Command { return engine.PushCmd{Items: items} },
		func(it *engine.PushItem, err error) engine.PushResult {
			return engine.PushResult{Status: engine.Rejected, TransactionID: it.TransactionID, Queue: it.Queue, Partition: it.Partition, Err: err}
		})
	if err != nil {
		h.logger(home).Warn("raft: outbox: deliver; the loop delivers what is left", "err", err)
		return out
	}
	var done []engine.ID
	for i, r := range res {
		switch {
		case r.Status == engine.Duplicate && rows[i].Item.TransactionID == engine.FormatID(rows[i].ID):
			// The transaction id was minted for this row, so no other
			// push holds it: an earlier delivery of the row stored the
			// message (outboxLoop's, or one whose answer was lost). The
			// push is done, and the answer says so, with its ids. A
			// client's own id stays a duplicate: an earlier push of the
			// client's may hold it.
			r.Status = engine.Queued
			done = append(done, rows[i].ID)
			out[i] = r
		case r.Status != engine.Rejected:
			done = append(done, rows[i].ID)
			out[i] = r
		case errors.Is(r.Err, engine.ErrInvalid):
			h.logger(home).Error("raft: outbox: the target refuses a push a transaction committed; dropping it",
				"queue", r.Queue, "transaction_id", r.TransactionID, "err", r.Err)
			done = append(done, rows[i].ID)
			out[i] = r
		}
	}
	if len(done) > 0 {
		r, err := h.run(ctx, home, engine.OutboxDeleteCmd{Rows: done})
		if err = errors.Join(err, r.Err); err != nil {
			// The rows stay: a redelivery is a duplicate, and deletes them.
			h.logger(home).Warn("raft: outbox: delete delivered rows", "rows", len(done), "err", err)
		}
	}
	return out
}

// outboxBatch bounds the rows one round of outboxLoop redelivers from a
// group; maxOutboxBackoff the wait after rounds that failed.
const (
	outboxBatch      = 256
	maxOutboxBackoff = 30 * time.Second
)

// outboxLoop redelivers, every OutboxInterval, the outbox rows older than
// OutboxAge of every group this node leads: the rows whose delivery a
// crash, a lost leadership or a failed push interrupted. The age leaves
// the node that committed a row time to deliver it first; a repeat would
// be harmless all the same. After a round that did not deliver everything
// it waits twice as long, up to maxOutboxBackoff.
func (h *Host) outboxLoop() {
	defer h.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.done
		cancel()
	}()
	wait := h.opts.OutboxInterval
	for {
		select {
		case <-time.After(wait):
		case <-h.done:
			return
		}
		if h.redeliver(ctx) {
			wait = h.opts.OutboxInterval
		} else {
			wait = min(2*wait, maxOutboxBackoff)
		}
	}
}

// redeliver runs one round of outboxLoop; false when a row it tried stays.
func (h *Host) redeliver(ctx context.Context) bool {
	ok := true
	oldest := time.Now().Add(-h.opts.OutboxAge).UnixMicro()
	for g := 1; g < len(h.nodes); g++ {
		n := h.replica(uint32(g))
		if n == nil || !n.IsLeader() || h.holdOutbox.Load() {
			continue
		}
		rows, err := n.Engine().Outbox(outboxBatch)
		if err != nil {
			n.Logger().Warn("raft: outbox: read rows", "err", err)
			ok = false
			continue
		}
		rows = slices.DeleteFunc(rows, func(r engine.OutboxRow) bool { return r.CreatedAt > oldest })
		if len(rows) == 0 {
			continue
		}
		left := 0
		for _, r := range h.deliverOutbox(ctx, uint32(g), rows) {
			if r.Status == engine.Pending {
				left++
			}
		}
		if left > 0 {
			n.Logger().Warn("raft: outbox: redeliver", "rows", len(rows), "left", left)
			ok = false
			continue
		}
		n.Logger().Info("raft: outbox: redelivered rows", "rows", len(rows))
	}
	return ok
}
