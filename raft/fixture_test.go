package raft_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// testdata/store-v1 is a node's data directory (engine format version 1,
// log entry version 1) made by `queen serve` without --raft, node id node1,
// cleanly stopped: queue "fixture" with f0..f9 and consumer group g1 past
// f0..f3, queue "poison" with p1 dead-lettered. Every later binary must
// open it and serve its state; never regenerate it (add a store-v2 beside
// it when the format changes).
func TestOpen_StoreV1Fixture(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dir, os.DirFS("testdata/store-v1")); err != nil {
		t.Fatal(err)
	}
	opts := rafttest.Options("node1", dir)
	opts.Transport = raft.NewLocalTransport("node1")
	opts.Bootstrap = true
	n, err := raft.Open(opts)
	if err != nil {
		t.Fatalf("open the v1 fixture: %v", err)
	}
	defer n.Close()
	rafttest.WaitLeader(t, n)
	e := n.Engine()
	q, err := e.Queue("fixture")
	if err != nil || len(q.Partitions) != 1 || q.Partitions[0].Next != 10 {
		t.Fatalf("queue fixture: %+v, %v; want one partition of 10 messages", q, err)
	}
	cursors, err := e.Cursors(0, "g1")
	if err != nil || len(cursors) != 1 || cursors[0].OffsetLag != 6 {
		t.Fatalf("g1 cursors %+v, %v: want 6 messages left", cursors, err)
	}
	if _, total, err := e.ListDLQ(engine.DLQFilter{Queue: "poison"}); err != nil || total != 1 {
		t.Fatalf("poison's dead letters: %d, %v; want 1", total, err)
	}
	// The transaction-id index survives (what dedup and lookups read). A
	// push of f3 again is not asserted a duplicate: the dedup window (1 h
	// by default) is counted from the fixture's creation, so that answer
	// would depend on the fixture's age.
	if m, err := e.MessageAt(q.Partitions[0].ID, "f3"); err != nil || m.TransactionID != "f3" {
		t.Fatalf("f3 by transaction id: %+v, %v", m, err)
	}
	if r := push(t, n, "fixture", "f10"); r.Status != engine.Queued {
		t.Fatalf("a new push answered %d", r.Status)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}
