package counts

import (
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/keyspace"
)

// partition holds offsets start..next-1 (ten messages, 0..9) and the
// cursors given.
func partition(cursors ...keyspace.CursorRecord) *engine.PartitionInfo {
	p := &engine.PartitionInfo{PartitionRecord: keyspace.PartitionRecord{Start: 0, Next: 10}}
	for _, r := range cursors {
		p.Cursors = append(p.Cursors, engine.CursorInfo{CursorRecord: r})
	}
	return p
}

// The counts follow the slowest group; a live lease over messages past its
// cursor makes them processing, an expired one leaves them pending.
func TestPartition(t *testing.T) {
	const now = 1000
	lease := engine.ID{1}
	for _, tc := range []struct {
		name string
		p    *engine.PartitionInfo
		want Counts
	}{
		{"untouched", partition(), Counts{Total: 10, Pending: 10}},
		{"one group at 3", partition(keyspace.CursorRecord{Committed: 3}), Counts{Total: 10, Pending: 6, Completed: 4}},
		{"slowest of two", partition(keyspace.CursorRecord{Committed: 8}, keyspace.CursorRecord{Committed: 1}),
			Counts{Total: 10, Pending: 8, Completed: 2}},
		{"live lease", partition(keyspace.CursorRecord{Committed: 3, Lease: lease, LeaseExpiresAt: now + 1, BatchEnd: 6}),
			Counts{Total: 10, Pending: 3, Processing: 3, Completed: 4}},
		{"lease past the head", partition(keyspace.CursorRecord{Committed: 3, Lease: lease, LeaseExpiresAt: now + 1, BatchEnd: 20}),
			Counts{Total: 10, Processing: 6, Completed: 4}},
		{"expired lease", partition(keyspace.CursorRecord{Committed: 3, Lease: lease, LeaseExpiresAt: now, BatchEnd: 6}),
			Counts{Total: 10, Pending: 6, Completed: 4}},
	} {
		if got := Partition(tc.p, now); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// A queue sums its partitions and takes its dead letters from the summary.
func TestQueue(t *testing.T) {
	q := &engine.QueueInfo{Partitions: []engine.PartitionInfo{*partition(), *partition(keyspace.CursorRecord{Committed: 4})}}
	q.Name = "q"
	got := Queue(q, 0, &DLQ{ByQueue: map[string]int64{"q": 2, "other": 7}})
	want := Counts{Total: 20, Pending: 15, Completed: 5, DeadLetter: 2}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
