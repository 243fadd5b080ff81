package server

import (
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/keyspace"
)

// TestStatusOf: a message's status over its partition's groups, as
// /api/v1/messages answers it (doc.go, "Message status").
func TestStatusOf(t *testing.T) {
	const now = 1_000_000
	lease := engine.ID{1}
	group := func(name string, committed, batchEnd int64, leaseExpires int64) engine.CursorInfo {
		g := engine.CursorInfo{Group: name, CursorRecord: keyspace.CursorRecord{Committed: committed, BatchEnd: batchEnd}}
		if leaseExpires != 0 {
			g.Lease, g.LeaseExpiresAt = lease, leaseExpires
		}
		return g
	}
	for _, tc := range []struct {
		name   string
		groups []engine.CursorInfo
		dead   bool
		want   messageStatus
	}{
		{"no groups", nil, false, messageStatus{status: "pending", queueStatus: "pending"}},
		{"queue mode consumed", []engine.CursorInfo{group(engine.QueueMode, 5, 5, 0)}, false,
			messageStatus{status: "completed", queueStatus: "completed", consumedBy: 1}},
		{"queue mode leased", []engine.CursorInfo{group(engine.QueueMode, 4, 7, now+1)}, false,
			messageStatus{status: "processing", queueStatus: "processing", leaseExpires: now + 1}},
		{"lease expired", []engine.CursorInfo{group(engine.QueueMode, 4, 7, now)}, false,
			messageStatus{status: "pending", queueStatus: "pending"}},
		{"lease not covering", []engine.CursorInfo{group(engine.QueueMode, 2, 4, now+1)}, false,
			messageStatus{status: "pending", queueStatus: "pending"}},
		{"bus half consumed", []engine.CursorInfo{group("a", 5, 5, 0), group("b", 1, 1, 0)}, false,
			messageStatus{status: "pending", queueStatus: "pending", busConsumed: 1, busGroups: 2, consumedBy: 1}},
		{"hybrid all consumed", []engine.CursorInfo{group(engine.QueueMode, 9, 9, 0), group("a", 5, 5, 0)}, false,
			messageStatus{status: "completed", queueStatus: "completed", busConsumed: 1, busGroups: 1, consumedBy: 2}},
		{"dead letter wins", []engine.CursorInfo{group(engine.QueueMode, 5, 5, 0)}, true,
			messageStatus{status: "dead_letter", queueStatus: "completed", consumedBy: 1}},
	} {
		m := engine.StoredMessage{Message: engine.Message{Offset: 5}, Groups: tc.groups}
		if got := statusOf(&m, tc.dead, now); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
