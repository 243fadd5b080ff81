package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server"
)

// The "What to expect" table of docs/semantics.md (failures and the dead-letter queue), one test per row.

// groupRetryCount reads the retry budget consumed on q's only partition.
func (c *client) groupRetryCount(group string) int {
	c.t.Helper()
	var detail map[string]struct {
		Partitions []struct {
			RetryCount int `json:"retryCount"`
		} `json:"partitions"`
	}
	c.do("GET", "/api/v1/consumer-groups/"+group, nil).expect(c.t, 200).decode(c.t, &detail)
	ps := detail["q"].Partitions
	if len(ps) != 1 {
		c.t.Fatalf("group %s has %d partitions on q, want 1", group, len(ps))
	}
	return ps[0].RetryCount
}

func TestFailures_HandlerThrowsBudgetRemains(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m0", 0)
	c.pushOne("q", "", "m1", 1)
	p := c.mustPop(popPath("q", "batch=2&consumerGroup=G"))
	res := c.ackBatch("G", p.Messages, "completed", "failed")
	if !res[1].Success || !res[1].LeaseReleased || res[1].DLQ {
		t.Fatalf("nack: %+v, want success with the lease released", res[1])
	}
	if got := c.groupRetryCount("G"); got != 1 {
		t.Fatalf("retry budget consumed %d, want 1", got)
	}
	// The cursor clamped below m1: m0 is done, m1 redelivers at once.
	if got := txns(c.mustPop(popPath("q", "batch=2&consumerGroup=G")).Messages); !equalStrings(got, []string{"m1"}) {
		t.Fatalf("redelivered %v, want [m1]", got)
	}
}

func TestFailures_BudgetExhaustedDeadLettersAndResets(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 1})
	c.pushOne("q", "", "poison", 0)
	c.pushOne("q", "", "next", 1)
	c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "failed", "e1")
	r := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "failed", "e2")
	if !r.DLQ || !r.LeaseReleased {
		t.Fatalf("exhausting nack: %+v, want dlq:true with the lease released", r)
	}
	if got := c.groupRetryCount("__QUEUE_MODE__"); got != 0 {
		t.Fatalf("budget after dead-lettering %d, want 0 (reset)", got)
	}
	// The cursor moved past the poison; the next message's first failure
	// is charged from a fresh budget, not dead-lettered.
	next := c.mustPop(popPath("q", "batch=1"))
	if next.Messages[0].TransactionID != "next" {
		t.Fatalf("after the dead letter got %q, want next", next.Messages[0].TransactionID)
	}
	if r := c.ack(next.Messages[0], "failed", ""); r.DLQ {
		t.Fatalf("first failure of the next message: %+v, want a plain retry", r)
	}
	if page := c.dlq("queue=q"); page.Total != 1 || page.Messages[0].TransactionID != "poison" {
		t.Fatalf("dlq %+v, want only poison", page)
	}
}

func TestFailures_BothDLQOptionsFalseDrops(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 0, "deadLetterQueue": false, "dlqAfterMaxRetries": false})
	c.pushOne("q", "", "m", 0)
	r := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "failed", "")
	if !r.Dropped || r.DLQ {
		t.Fatalf("nack: %+v, want dropped:true", r)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
	if page := c.dlq("queue=q"); page.Total != 0 {
		t.Fatalf("dlq total %d, want 0", page.Total)
	}
}

func TestFailures_AckWithDLQIgnoresBudget(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 100})
	c.pushOne("q", "", "m", 0)
	if r := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "dlq", "schema"); !r.DLQ {
		t.Fatalf("dlq ack: %+v", r)
	}
	if page := c.dlq("queue=q"); page.Total != 1 || page.Messages[0].ErrorMessage != "schema" {
		t.Fatalf("dlq %+v", page)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
}

func TestFailures_AckWithRetryRedeliversBudgetUntouched(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 0)
	for range 3 {
		if r := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "retry", ""); !r.Success || !r.LeaseReleased {
			t.Fatalf("retry ack: %+v", r)
		}
	}
	if got := c.groupRetryCount("__QUEUE_MODE__"); got != 0 {
		t.Fatalf("budget consumed %d, want 0", got)
	}
	c.mustPop(popPath("q", "batch=1"))
}

func TestFailures_LeaseExpiryRedeliversForeverNeverDLQ(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 0})
	c.pushOne("q", "", "m", 0)
	for i := range 5 {
		p := c.mustPop(popPath("q", "batch=1&leaseSeconds=1"))
		if p.Messages[0].DeliveryAttempt != i+1 {
			t.Fatalf("delivery %d reports attempt %d", i+1, p.Messages[0].DeliveryAttempt)
		}
		c.elapse(2 * time.Second)
	}
	if got := c.groupRetryCount("__QUEUE_MODE__"); got != 0 {
		t.Fatalf("budget consumed %d, want 0", got)
	}
	if page := c.dlq("queue=q"); page.Total != 0 {
		t.Fatalf("dlq total %d, want 0", page.Total)
	}
	c.mustPop(popPath("q", "batch=1"))
}

// Deleting the queue deletes its segments as retention does (the sweep
// itself: retention_test.go); the dead-letter snapshots must survive it.
func TestFailures_SegmentsDeletedDeadLettersKept(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", map[string]any{"keep": true})
	c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "dlq", "x")
	var del struct {
		Deleted bool `json:"deleted"`
		Existed bool `json:"existed"`
	}
	c.do("DELETE", "/api/v1/resources/queues/q", nil).expect(t, 200).decode(t, &del)
	if !del.Deleted || !del.Existed {
		t.Fatalf("delete queue: %+v", del)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
	page := c.dlq("queue=q")
	if page.Total != 1 || string(page.Messages[0].Data) != `{"keep":true}` {
		t.Fatalf("dlq after the segments went: %+v", page)
	}
}

func TestFailures_ReplayOfLiveMessageIs404(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	res := c.pushOne("q", "", "m", 0)
	c.do("POST", "/api/v1/messages/"+res.PartitionID+"/m/retry", `{}`).expectError(t, 404, "no_dead_letter")
	c.mustPop(popPath("q", "batch=1"))
}

// keepRowBroker replays but reports the dead-letter row as not removed: the
// delete-after-push failure the replay contract must surface.
type keepRowBroker struct {
	server.Broker
}

func (b keepRowBroker) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	r, err := b.Broker.Propose(ctx, c)
	if res, ok := r.Value.(engine.ReplayResult); ok {
		res.RowsRemoved = 0
		r.Value = res
	}
	return r, err
}

func TestFailures_ReplayDeleteFailsReportsRowKept(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, keepRowBroker{newBroker(t)}, server.Options{})
	c.pushOne("q", "", "m", 0)
	p := c.mustPop(popPath("q", "batch=1"))
	c.ack(p.Messages[0], "dlq", "")
	var res struct {
		Success  bool `json:"success"`
		Replayed bool `json:"replayed"`
		Removed  bool `json:"dlqRowRemoved"`
	}
	c.do("POST", "/api/v1/messages/"+p.Messages[0].PartitionID+"/m/retry", nil).expect(t, 200).decode(t, &res)
	if !res.Replayed || res.Removed {
		t.Fatalf("replay: %+v, want replayed:true dlqRowRemoved:false", res)
	}
}
