package raft_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// Streams state is replicated and deterministic: three replicas that apply
// a registration and cycles (state upserts and deletes, sink pushes, acks
// under the pop's lease), across a leader change and a snapshot catch-up of
// a restarted follower, end with equal digests (EnsureSame also runs Check,
// which holds the ripeness index to the state rows).
func TestCluster_StreamsStateReplicatesDeterministically(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	leaderProposer := func() raft.Proposer { return c.Leader() }
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	reg, err := raft.Propose[engine.StreamRegistered](ctx(), leaderProposer(), engine.StreamRegisterCmd{
		Name: "agg", SourceQueue: "src", HasSink: true, SinkQueue: "sink", ConfigHash: "h"})
	if err != nil || !reg.Fresh {
		t.Fatalf("register: %+v %v", reg, err)
	}
	var items []engine.PushItem
	for i := range 40 {
		items = append(items, engine.PushItem{Queue: "src", Partition: fmt.Sprint("p", i%4), TransactionID: fmt.Sprint("m", i),
			Payload: []byte(fmt.Sprintf(`{"v":%d}`, i))})
	}
	if _, err := raft.Propose[[]engine.PushResult](ctx(), leaderProposer(), engine.PushCmd{Items: items}); err != nil {
		t.Fatal(err)
	}
	total := 0
	run := func(rounds int) {
		for range rounds {
			pop, err := raft.Propose[engine.PopResult](ctx(), leaderProposer(), engine.PopCmd{Queue: "src", Group: "streams.agg", Batch: 5, Partitions: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(pop.Messages) == 0 {
				return
			}
			last := pop.Messages[len(pop.Messages)-1]
			total += len(pop.Messages)
			cyc := engine.StreamCycleCmd{Cycle: engine.Cycle{QueryID: reg.ID, PartitionID: last.PartitionID, Group: "streams.agg",
				Ops: []engine.StateOp{
					{Key: "count", Value: []byte(fmt.Sprintf(`{"n":%d,"windowEnd":%d}`, total, total)), HasWindowEnd: true, WindowEnd: float64(total)},
					{Key: fmt.Sprint("seen-", last.TransactionID), Value: []byte(`{}`)},
					{Delete: true, Key: "never"},
				},
				Ack:    &engine.CycleAck{TransactionID: last.TransactionID, Lease: pop.LeaseID, Status: cursor.Completed, Count: int64(len(pop.Messages))},
				Digest: [32]byte{byte(total)}},
				Items: []engine.PushItem{{Queue: "sink", Payload: []byte(fmt.Sprintf(`{"upTo":%d}`, total))}}}
			res, err := raft.Propose[engine.StreamCycleResult](ctx(), leaderProposer(), cyc)
			if err != nil || !res.Success {
				t.Fatalf("cycle: %+v %v", res, err)
			}
		}
	}
	run(3)
	old := c.Leader()
	c.Partition(c.Index(old))
	deadline := time.Now().Add(10 * time.Second)
	for {
		l := c.Leader()
		if l != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no new leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Heal()
	run(3)
	follower := c.Followers()[0]
	i := c.Index(follower)
	c.Stop(i)
	run(20)
	if err := c.Leader().Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.Restart(i)
	c.EnsureSame()
	if total != 40 {
		t.Fatalf("the cycles consumed %d messages, want 40", total)
	}
	rows, err := c.Leader().StreamState(engine.StateFilter{QueryID: reg.ID, PartitionID: mustPartition(t, c.Leader(), "src", "p0"), HasRipe: true, Ripe: 1e9})
	if err != nil || len(rows) != 1 || rows[0].Key != "count" {
		t.Fatalf("ripe rows of p0: %+v %v", rows, err)
	}
}

func mustPartition(t *testing.T, n *raft.Node, queue, name string) engine.ID {
	t.Helper()
	q, err := n.Queue(queue)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range q.Partitions {
		if p.Name == name {
			return p.ID
		}
	}
	t.Fatalf("no partition %s/%s", queue, name)
	return engine.ID{}
}
