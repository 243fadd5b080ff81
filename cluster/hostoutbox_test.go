package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// allCurrent reads every node's version as this binary's: the hosts of a
// test all run it, and the outbox's commands need command version 2.
type allCurrent struct{}

func (allCurrent) NodeVersion(context.Context, string) (raft.NodeVersion, error) {
	return raft.NodeVersion{Binary: "test", Command: command.MaxVersion}, nil
}

// openOutboxHosts opens three hosts of three groups that read each
// other's versions, relay to each other, and run at command version 2,
// each group led by its preferred member (group g by host g mod 3).
func openOutboxHosts(t *testing.T) *hosts {
	c := openCurrentHosts(t, 3, 3)
	c.leaders(preferredLeaders)
	c.relayInProcess()
	c.addressesKnown()
	c.atMaxVersion()
	return c
}

// openCurrentHosts opens n hosts of g data groups whose nodes read each
// other's versions, all of this binary's: the cluster reaches
// command.MaxVersion (atMaxVersion) a moment after.
func openCurrentHosts(t *testing.T, n, g int) *hosts {
	return openHostsWith(t, n, g, func(o *raft.Options) {
		o.Versions, o.VersionInterval = allCurrent{}, 50*time.Millisecond
	})
}

// atMaxVersion waits until every group of every host runs at
// command.MaxVersion.
func (c *hosts) atMaxVersion() {
	t := c.t
	waitFor(t, fmt.Sprintf("every group to run at command version %d", command.MaxVersion), func() bool {
		for _, h := range c.h {
			for _, g := range h.Groups() {
				if h.Group(g).ClusterVersion() != command.MaxVersion {
					return false
				}
			}
		}
		return true
	})
}

// popOne pops one message of queue through host h (forwarded to its
// group's leader) and returns it as an ack item with its lease.
func popOne(t *testing.T, c *hosts, h *cluster.Host, queue string) engine.AckItem {
	t.Helper()
	r, err := c.forwarded(h, engine.PopCmd{Queue: queue, Batch: 1, Partitions: 1})
	if err != nil {
		t.Fatalf("pop %s: %v", queue, err)
	}
	pop := r.Value.(engine.PopResult)
	if len(pop.Messages) != 1 {
		t.Fatalf("pop %s: %d messages, want 1", queue, len(pop.Messages))
	}
	m := pop.Messages[0]
	return engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, Lease: pop.LeaseID, Status: cursor.Completed}
}

// drain pops every message of queue (one consumer group, no acks needed:
// each is delivered once while its lease is live) and returns their
// transaction ids.
func drain(t *testing.T, c *hosts, queue string) []string {
	t.Helper()
	r, err := c.forwarded(c.h[0], engine.PopCmd{Queue: queue, Group: "check", Batch: 100, Partitions: 1, AutoAck: true})
	if err != nil {
		t.Fatalf("pop %s: %v", queue, err)
	}
	var txns []string
	for _, m := range r.Value.(engine.PopResult).Messages {
		txns = append(txns, m.TransactionID)
	}
	slices.Sort(txns)
	return txns
}

// outboxEmpty waits until group g's outbox is empty on every host.
func outboxEmpty(t *testing.T, c *hosts, g uint32) {
	t.Helper()
	waitFor(t, "the outbox rows to be deleted on every replica", func() bool {
		for _, h := range c.h {
			if rows, err := cluster.OutboxRows(h.Group(g)); err != nil || len(rows) != 0 {
				return false
			}
		}
		return true
	})
}

// A transaction acking in group 1 and pushing to a queue of group 2 (and
// to one of its own) commits: the ack is applied in group 1, the pushes
// are answered in request order with their real message and partition
// ids, and the queue of group 2 holds each push exactly once. One whose
// acks lie in two groups is still refused, naming what lies where.
func TestHost_TransactionAcrossGroupsCommits(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	for q, g := range map[string]uint32{"in": 1, "out": 2} {
		c.place(q, g)
	}
	c.push(1, "in", "in-1")
	ack := popOne(t, c, c.h[0], "in")
	ops := []engine.TxOp{
		{Push: &engine.PushItem{Queue: "out", TransactionID: "out-1", Payload: []byte(`{"n":1}`)}},
		{Ack: &ack},
		{Push: &engine.PushItem{Queue: "side", TransactionID: "side-1", Payload: []byte(`{"n":2}`)}},
		{Push: &engine.PushItem{Queue: "out", Payload: []byte(`{"n":3}`)}}, // a transaction id is minted
	}
	// Through host 3, which leads group 2 only: the transaction runs on
	// group 1's leader (host 2), which relays the push to group 2.
	r, err := c.forwarded(c.h[2], engine.TransactionCmd{Ops: ops})
	if err != nil {
		t.Fatalf("transaction across groups: %v", err)
	}
	tx := r.Value.(engine.TxResult)
	if !tx.Success || len(tx.Acks) != 1 || !tx.Acks[0].Success || len(tx.Pushes) != 3 || tx.Outbox != nil {
		t.Fatalf("transaction = %+v", tx)
	}
	for k, want := range []string{"out", "side", "out"} {
		p := tx.Pushes[k]
		// A push to another group is an outbox row this node delivers;
		// the home leader's outboxLoop delivers rows older than OutboxAge
		// (200 ms here) too, and on a busy machine may come first: this
		// node's delivery of out-1, the client's own transaction id, then
		// answers duplicate, with the message's ids (the minted one's
		// answers queued: TestHost_OutboxRowDeliveredTwice). What is
		// stored is checked below (each push once).
		status := p.Status == engine.Queued || k == 0 && p.Status == engine.Duplicate
		if !status || p.Queue != want || p.MessageID == (engine.ID{}) || p.PartitionID == (engine.ID{}) || p.TransactionID == "" {
			t.Fatalf("push %d answered %+v, want queued in %s with its ids", k, p, want)
		}
	}
	if tx.Pushes[0].TransactionID != "out-1" || tx.Pushes[1].TransactionID != "side-1" {
		t.Fatalf("pushes answered %+v, want the client's transaction ids", tx.Pushes)
	}
	if g := c.h[0].Placement("side"); g != 1 {
		t.Fatalf("a queue the transaction placed landed in group %d, want its home group 1", g)
	}
	// The ack moved group 1's cursor past in-1.
	cursors, err := c.h[1].Group(1).Cursors(time.Now().UnixMicro(), engine.QueueMode)
	if err != nil || len(cursors) != 1 || cursors[0].Committed != 0 || cursors[0].LeaseLive {
		t.Fatalf("group 1's cursor after the transaction: %+v, %v; want in-1 committed, no lease", cursors, err)
	}
	for i := range c.h {
		c.waitMessages(i, 2, "out", 2)
	}
	if got := drain(t, c, "out"); !slices.Equal(got, sortedTxns("out-1", tx.Pushes[2].TransactionID)) {
		t.Fatalf("queue out holds %q, want each push once", got)
	}
	outboxEmpty(t, c, 1)

	// Acks in two groups: refused before anything is proposed.
	c.push(1, "in", "in-2")
	c.push(2, "out", "out-x")
	ackIn, ackOut := popOne(t, c, c.h[0], "in"), popOne(t, c, c.h[0], "out")
	twoGroups := []engine.TxOp{{Ack: &ackIn}, {Ack: &ackOut}}
	_, err = c.h[0].Propose(ctxT(t), engine.TransactionCmd{Ops: twoGroups})
	if !errors.Is(err, raft.ErrSpansGroups) || !strings.Contains(err.Error(), "queue in in group 1") ||
		!strings.Contains(err.Error(), "queue out in group 2") || !strings.Contains(err.Error(), "acks and required leases") {
		t.Fatalf("acks in two groups: err %v, want ErrSpansGroups naming both queues", err)
	}
}

// A row an earlier delivery stored (the home leader's outboxLoop, which
// on a busy machine may come before the node that committed it) is
// answered queued, with the stored message's ids, when its transaction id
// was minted for it: no other push can hold that id. A client's own
// transaction id stays a duplicate: an earlier push of the client's may
// hold it. Either way the queue holds each push once.
func TestHost_OutboxRowDeliveredTwice(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	for q, g := range map[string]uint32{"in": 1, "out": 2} {
		c.place(q, g)
	}
	for _, h := range c.h {
		cluster.HoldOutbox(h, true)
	}
	ops := []engine.TxOp{
		{Push: &engine.PushItem{Queue: "in", TransactionID: "in-1", Payload: []byte(`{}`)}}, // home: group 1
		{Push: &engine.PushItem{Queue: "out", Payload: []byte(`{}`)}},                       // a transaction id is minted
		{Push: &engine.PushItem{Queue: "out", TransactionID: "out-1", Payload: []byte(`{}`)}},
	}
	r, err := c.forwarded(c.h[0], engine.TransactionCmd{Ops: ops})
	if res, ok := r.Value.(engine.TxResult); err != nil || !ok || !res.Success {
		t.Fatalf("transaction with deliveries held: %+v, %v", r.Value, err)
	}
	rows, err := cluster.OutboxRows(c.h[1].Group(1))
	if err != nil || len(rows) != 2 || rows[1].Item.TransactionID != "out-1" {
		t.Fatalf("group 1's outbox after the held commit: %+v, %v; want a minted id and out-1", rows, err)
	}
	cluster.HoldOutbox(c.h[1], false)
	first := cluster.DeliverOutbox(ctxT(t), c.h[1], 1, rows)
	again := cluster.DeliverOutbox(ctxT(t), c.h[1], 1, rows)
	for i, want := range []engine.PushStatus{engine.Queued, engine.Duplicate} {
		if again[i].Status != want || again[i].MessageID == (engine.ID{}) || again[i].MessageID != first[i].MessageID {
			t.Fatalf("row %d (%s) delivered again: %+v, first %+v; want status %v with the first's message id",
				i, rows[i].Item.TransactionID, again[i], first[i], want)
		}
	}
	for i := range c.h {
		c.waitMessages(i, 2, "out", 2)
	}
	if got := drain(t, c, "out"); !slices.Equal(got, sortedTxns("out-1", rows[0].Item.TransactionID)) {
		t.Fatalf("queue out holds %q, want each push once", got)
	}
	for _, h := range c.h {
		cluster.HoldOutbox(h, false)
	}
	outboxEmpty(t, c, 1)
}

// A crash between the home commit and the delivery (simulated by holding
// the deliveries) leaves the outbox rows, and the transaction is answered
// committed with its pushes pending; once released, the home group's
// leader redelivers them. A row whose push had reached its queue before
// the crash is a duplicate there, not a second message: the queue ends
// with each push exactly once, and the rows are deleted everywhere.
func TestHost_OutboxRedeliversWhatACrashLeft(t *testing.T) {
	t.Parallel()
	c := openOutboxHosts(t)
	for q, g := range map[string]uint32{"in": 1, "out": 2} {
		c.place(q, g)
	}
	c.push(1, "in", "in-1")
	ack := popOne(t, c, c.h[0], "in")
	for _, h := range c.h {
		cluster.HoldOutbox(h, true)
	}
	ops := []engine.TxOp{
		{Ack: &ack},
		{Push: &engine.PushItem{Queue: "out", TransactionID: "out-1", Payload: []byte(`{}`)}},
		{Push: &engine.PushItem{Queue: "out", TransactionID: "out-2", Payload: []byte(`{}`)}},
	}
	// The transaction committed: it succeeds, its pushes pending (on
	// their way from the outbox, ids not known yet).
	r, err := c.forwarded(c.h[0], engine.TransactionCmd{Ops: ops})
	res, ok := r.Value.(engine.TxResult)
	if err != nil || !ok || !res.Success || len(res.Pushes) != 2 ||
		res.Pushes[0].Status != engine.Pending || res.Pushes[0].TransactionID != "out-1" ||
		res.Pushes[1].Status != engine.Pending || res.Pushes[1].TransactionID != "out-2" {
		t.Fatalf("transaction with deliveries held: %+v, %v; want success with both pushes pending", r.Value, err)
	}
	rows, err := cluster.OutboxRows(c.h[1].Group(1))
	if err != nil || len(rows) != 2 || rows[0].Item.TransactionID != "out-1" || rows[1].Item.TransactionID != "out-2" {
		t.Fatalf("group 1's outbox after the held commit: %+v, %v; want out-1 and out-2", rows, err)
	}
	if q, err := c.h[2].Group(2).Queue("out"); err == nil && len(q.Partitions) != 0 {
		t.Fatalf("queue out was written while deliveries were held: %+v", q)
	}
	// out-1 reached its queue before the crash; its row was not deleted.
	if r := c.push(2, "out", "out-1"); r.Status != engine.Queued {
		t.Fatalf("push out-1 by hand: %+v", r)
	}
	time.Sleep(300 * time.Millisecond) // several outbox rounds: held, they do nothing
	if rows, _ := cluster.OutboxRows(c.h[1].Group(1)); len(rows) != 2 {
		t.Fatalf("rows while held: %d, want 2", len(rows))
	}
	for _, h := range c.h {
		cluster.HoldOutbox(h, false)
	}
	outboxEmpty(t, c, 1)
	for i := range c.h {
		c.waitMessages(i, 2, "out", 2)
	}
	if got := drain(t, c, "out"); !slices.Equal(got, []string{"out-1", "out-2"}) {
		t.Fatalf("queue out holds %q, want out-1 and out-2 once each", got)
	}
	// The ack committed with the transaction, before any delivery.
	cursors, err := c.h[1].Group(1).Cursors(time.Now().UnixMicro(), engine.QueueMode)
	if err != nil || len(cursors) != 1 || cursors[0].Committed != 0 {
		t.Fatalf("group 1's cursor: %+v, %v; want in-1 committed", cursors, err)
	}
}

func sortedTxns(txns ...string) []string {
	slices.Sort(txns)
	return txns
}
