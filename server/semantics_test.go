package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// docs/semantics.md §16: one test per conformance statement (37 and 40,
// encryption and retention, are out of scope). Each test has a fresh broker
// and queue "q"; batch is always sent.

func TestSemantics16_01_PushWithoutPartitionGoesToDefault(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	res := c.push(map[string]any{"queue": "q", "payload": map[string]any{"a": 1}})
	if res[0].Status != "queued" {
		t.Fatalf("status %q, want queued", res[0].Status)
	}
	p := c.mustPop("/api/v1/pop/queue/q/partition/Default?batch=1")
	if got := p.Messages[0].Partition; got != "Default" {
		t.Fatalf("partition %q, want Default", got)
	}
	if got := string(p.Messages[0].Data); got != `{"a":1}` {
		t.Fatalf("data %s, want {\"a\":1}", got)
	}
}

func TestSemantics16_02_MintedTransactionIDIsEchoed(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	res := c.pushOne("q", "", "", map[string]any{"a": 1})
	if res.TransactionID == "" {
		t.Fatal("push returned no transaction_id")
	}
	p := c.mustPop(popPath("q", "batch=1"))
	if got := p.Messages[0].TransactionID; got != res.TransactionID {
		t.Fatalf("popped transactionId %q, pushed %q", got, res.TransactionID)
	}
}

func TestSemantics16_03_DuplicateAcrossRequestsEchoesOriginal(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	first := c.pushOne("q", "p1", "T", 1)
	second := c.push(map[string]any{"queue": "q", "partition": "p1", "transactionId": "T", "payload": 2})[0]
	if second.Status != "duplicate" || second.MessageID != first.MessageID {
		t.Fatalf("second push %+v, want duplicate of %s", second, first.MessageID)
	}
	p := c.mustPop(popPath("q", "batch=10"))
	if len(p.Messages) != 1 {
		t.Fatalf("popped %d messages, want 1", len(p.Messages))
	}
}

func TestSemantics16_04_DedupIsPartitionScoped(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "p1", "T", 1)
	if res := c.push(map[string]any{"queue": "q", "partition": "p2", "transactionId": "T", "payload": 1})[0]; res.Status != "queued" {
		t.Fatalf("push to p2: %+v, want queued", res)
	}
}

func TestSemantics16_05_DuplicateWithinOneRequest(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	item := map[string]any{"queue": "q", "partition": "p", "transactionId": "T", "payload": 1}
	res := c.push(item, item)
	if res[0].Status != "queued" || res[1].Status != "duplicate" || res[1].MessageID != res[0].MessageID {
		t.Fatalf("results %+v, want queued then duplicate with the same message_id", res)
	}
	if p := c.mustPop(popPath("q", "batch=10")); len(p.Messages) != 1 {
		t.Fatalf("popped %d messages, want 1", len(p.Messages))
	}
}

func TestSemantics16_06_DedupWindowZeroAcceptsRepeats(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"dedupWindowSeconds": 0})
	c.pushOne("q", "", "T", 1)
	c.pushOne("q", "", "T", 2)
	if p := c.mustPop(popPath("q", "batch=10")); len(p.Messages) != 2 {
		t.Fatalf("popped %d messages, want 2", len(p.Messages))
	}
}

func TestSemantics16_07_OrderWithinOneRequest(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.push(
		map[string]any{"queue": "q", "transactionId": "A", "payload": 1},
		map[string]any{"queue": "q", "transactionId": "B", "payload": 2},
		map[string]any{"queue": "q", "transactionId": "C", "payload": 3},
	)
	p := c.mustPop(popPath("q", "batch=10"))
	if got := txns(p.Messages); !equalStrings(got, []string{"A", "B", "C"}) {
		t.Fatalf("order %v, want [A B C]", got)
	}
}

func TestSemantics16_08_EmptyItemsAndMissingItems(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	r := c.do("POST", "/api/v1/push", `{"items":[]}`).expect(t, 201)
	if string(r.body) != "[]" {
		t.Fatalf("body %s, want []", r.body)
	}
	c.do("POST", "/api/v1/push", `{}`).expectError(t, 400, "invalid_argument")
}

func TestSemantics16_09_EmptyQueuePopIs204(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", nil)
	c.mustBeEmpty(popPath("q", "batch=1"))
}

func TestSemantics16_10_LongPollWakesOnPush(t *testing.T) {
	c := newClient(t)
	c.configure("q", nil)
	go func() {
		time.Sleep(300 * time.Millisecond)
		c.pushOne("q", "", "late", 1)
	}()
	start := time.Now()
	p := c.mustPop(popPath("q", "batch=1&wait=true&timeout=5000"))
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("long poll took %v, want well before 5s", took)
	}
	if p.Messages[0].TransactionID != "late" {
		t.Fatalf("got %q, want late", p.Messages[0].TransactionID)
	}
}

func TestSemantics16_11_LongPollTimesOutWith204(t *testing.T) {
	c := newClient(t)
	c.configure("q", nil)
	start := time.Now()
	c.mustBeEmpty(popPath("q", "batch=1&wait=true&timeout=1000"))
	if took := time.Since(start); took < 900*time.Millisecond || took > 2500*time.Millisecond {
		t.Fatalf("long poll returned after %v, want about 1s", took)
	}
}

func TestSemantics16_12_LeasedPartitionIsNotPoppedByAnother(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 5 {
		c.pushOne("q", "", fmt.Sprint("m", i), i)
	}
	c.mustPop(popPath("q", "batch=2&consumerGroup=G"))
	c.mustBeEmpty(popPath("q", "batch=2&consumerGroup=G"))
}

func TestSemantics16_13_GroupsFanOut(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	for _, g := range []string{"G1", "G2"} {
		if p := c.mustPop(popPath("q", "batch=1&consumerGroup="+g)); p.Messages[0].TransactionID != "m" {
			t.Fatalf("group %s got %q", g, p.Messages[0].TransactionID)
		}
	}
}

func TestSemantics16_14_SubscriptionModeNewSkipsBacklog(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "old", 1)
	c.mustBeEmpty(popPath("q", "batch=10&consumerGroup=G&subscriptionMode=new"))
	c.pushOne("q", "", "new", 2)
	p := c.mustPop(popPath("q", "batch=10&consumerGroup=G&subscriptionMode=new"))
	if got := txns(p.Messages); !equalStrings(got, []string{"new"}) {
		t.Fatalf("got %v, want [new]", got)
	}
}

func TestSemantics16_15_QueueModeIgnoresSubscriptionNew(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 3 {
		c.pushOne("q", "", fmt.Sprint("m", i), i)
	}
	if p := c.mustPop(popPath("q", "batch=10&subscriptionMode=new")); len(p.Messages) != 3 {
		t.Fatalf("popped %d, want 3", len(p.Messages))
	}
}

func TestSemantics16_16_SubscriptionFromTimestamp(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	m1 := c.pushOne("q", "", "m1", 1)
	// ts just after m1's createdAt, read back from the broker's own clock.
	var detail struct {
		CreatedAt string `json:"createdAt"`
	}
	c.do("GET", "/api/v1/messages/"+m1.PartitionID+"/m1", nil).expect(t, 200).decode(t, &detail)
	at, err := time.Parse(time.RFC3339Nano, detail.CreatedAt)
	if err != nil {
		t.Fatalf("createdAt %q: %v", detail.CreatedAt, err)
	}
	ts := at.Add(time.Microsecond).Format(time.RFC3339Nano)
	time.Sleep(2 * time.Millisecond)
	c.pushOne("q", "", "m2", 2)
	p := c.mustPop(popPath("q", "batch=10&consumerGroup=G&subscriptionFrom="+ts))
	if got := txns(p.Messages); !equalStrings(got, []string{"m2"}) {
		t.Fatalf("got %v, want [m2]", got)
	}
}

func TestSemantics16_17_BatchReturnsFirstInOrder(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 10 {
		c.pushOne("q", "", fmt.Sprint("m", i), i)
	}
	p := c.mustPop(popPath("q", "batch=3"))
	if got := txns(p.Messages); !equalStrings(got, []string{"m0", "m1", "m2"}) {
		t.Fatalf("got %v, want [m0 m1 m2]", got)
	}
}

func TestSemantics16_18_MultiPartitionPopSharesOneLease(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 5 {
		c.pushOne("q", fmt.Sprint("p", i), "m", i)
	}
	p := c.mustPop(popPath("q", "partitions=3&batch=10"))
	if len(p.Messages) != 3 || p.PartitionsClaimed != 3 {
		t.Fatalf("got %d messages from %d partitions, want 3 and 3", len(p.Messages), p.PartitionsClaimed)
	}
	parts := map[string]bool{}
	for _, m := range p.Messages {
		parts[m.PartitionID] = true
		if m.LeaseID != p.LeaseID || m.LeaseID == "" {
			t.Fatalf("message lease %q, envelope lease %q", m.LeaseID, p.LeaseID)
		}
	}
	if len(parts) != 3 {
		t.Fatalf("messages from %d distinct partitions, want 3", len(parts))
	}
}

func TestSemantics16_19_AutoAckHasNoLeaseAndDoesNotRedeliver(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	p := c.mustPop(popPath("q", "batch=1&autoAck=true"))
	if p.LeaseID != "" || p.Messages[0].LeaseID != "" {
		t.Fatalf("autoAck lease %q/%q, want empty", p.LeaseID, p.Messages[0].LeaseID)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
}

func TestSemantics16_20_AckingLastCompletesTheBatch(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 3 {
		c.pushOne("q", "", fmt.Sprint("m", i), i)
	}
	p := c.mustPop(popPath("q", "batch=3"))
	if r := c.ack(p.Messages[2], "completed", ""); !r.Success || !r.LeaseReleased {
		t.Fatalf("ack last: %+v", r)
	}
	c.mustBeEmpty(popPath("q", "batch=10"))
	c.pushOne("q", "", "m3", 3)
	if got := txns(c.mustPop(popPath("q", "batch=10")).Messages); !equalStrings(got, []string{"m3"}) {
		t.Fatalf("after completing m0..m2 got %v, want [m3]", got)
	}
}

func TestSemantics16_21_PartialAckKeepsLeaseTailRedeliversAfterExpiry(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for i := range 4 {
		c.pushOne("q", "", fmt.Sprint("m", i), i)
	}
	p := c.mustPop(popPath("q", "batch=4&leaseSeconds=2"))
	if r := c.ack(p.Messages[0], "completed", ""); !r.Success || r.LeaseReleased {
		t.Fatalf("partial ack: %+v, want success with the lease kept", r)
	}
	c.mustBeEmpty(popPath("q", "batch=4"))
	c.elapse(3 * time.Second)
	again := c.mustPop(popPath("q", "batch=4"))
	if got := txns(again.Messages); !equalStrings(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("after expiry got %v, want [m1 m2 m3]", got)
	}
}

func TestSemantics16_22_ExpiredLeaseRedeliversAndOldLeaseIsRejected(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	first := c.mustPop(popPath("q", "batch=1&leaseSeconds=2"))
	c.elapse(3 * time.Second)
	second := c.mustPop(popPath("q", "batch=1&leaseSeconds=2"))
	if second.Messages[0].TransactionID != "m" || second.LeaseID == first.LeaseID {
		t.Fatalf("redelivery %q under lease %q (first lease %q)", second.Messages[0].TransactionID, second.LeaseID, first.LeaseID)
	}
	if r := c.ack(first.Messages[0], "completed", ""); r.Success || r.Error == nil {
		t.Fatalf("ack with the old lease: %+v, want success:false with an error", r)
	}
}

func TestSemantics16_23_ExtendLiveLeaseThenExpired(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "a", "live", 1)
	c.pushOne("q", "b", "expiring", 2)
	type extended struct {
		LeaseID      string     `json:"leaseId"`
		Success      bool       `json:"success"`
		Renewed      int        `json:"renewed"`
		NewExpiresAt *time.Time `json:"newExpiresAt"`
	}
	extend := func(lease string) (e extended) {
		c.do("POST", "/api/v1/lease/"+lease+"/extend", map[string]any{"seconds": 30}).expect(t, 200).decode(t, &e)
		return e
	}
	live := c.mustPop("/api/v1/pop/queue/q/partition/a?batch=1&leaseSeconds=5")
	ext := extend(live.LeaseID)
	if !ext.Success || ext.Renewed != 1 || ext.NewExpiresAt == nil || ext.LeaseID != live.LeaseID {
		t.Fatalf("extend: %+v", ext)
	}
	if ahead := time.Until(*ext.NewExpiresAt); ahead < 20*time.Second {
		t.Fatalf("newExpiresAt only %v ahead, want about 30s", ahead)
	}
	// The same call on a lease that has expired (a short one, so a real
	// cluster need not wait 30 s).
	expiring := c.mustPop("/api/v1/pop/queue/q/partition/b?batch=1&leaseSeconds=1")
	c.elapse(2 * time.Second)
	if late := extend(expiring.LeaseID); late.Success || late.Renewed != 0 || late.NewExpiresAt != nil {
		t.Fatalf("extend after expiry: %+v, want success:false renewed:0", late)
	}
}

func TestSemantics16_24_RetryLimit3FourthFailedDeadLetters(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 3})
	c.pushOne("q", "", "poison", 1)
	var last ackResult
	for i := 1; i <= 4; i++ {
		p := c.mustPop(popPath("q", "batch=1"))
		last = c.ack(p.Messages[0], "failed", fmt.Sprint("boom ", i))
		if i < 4 && (last.DLQ || !last.Success) {
			t.Fatalf("failed ack %d: %+v, want a plain retry", i, last)
		}
	}
	if !last.DLQ {
		t.Fatalf("4th failed ack: %+v, want dlq:true", last)
	}
	page := c.dlq("queue=q")
	if page.Total != 1 || len(page.Messages) != 1 {
		t.Fatalf("dlq: %+v, want one row", page)
	}
	if d := page.Messages[0]; d.TransactionID != "poison" || d.RetryCount != 3 || d.ErrorMessage != "boom 4" {
		t.Fatalf("dlq row %+v, want poison with retryCount 3 and errorMessage \"boom 4\"", d)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
}

func TestSemantics16_25_RetryNeverChargesBudget(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 1})
	c.pushOne("q", "", "m", 1)
	for i := range 5 {
		p := c.mustPop(popPath("q", "batch=1"))
		if r := c.ack(p.Messages[0], "retry", ""); !r.Success || r.DLQ {
			t.Fatalf("retry ack %d: %+v", i, r)
		}
	}
	c.mustPop(popPath("q", "batch=1"))
	if page := c.dlq("queue=q"); page.Total != 0 {
		t.Fatalf("dlq total %d, want 0", page.Total)
	}
}

func TestSemantics16_26_AckDLQDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2)
	p := c.mustPop(popPath("q", "batch=1"))
	if r := c.ack(p.Messages[0], "dlq", "bad"); !r.DLQ {
		t.Fatalf("dlq ack: %+v, want dlq:true", r)
	}
	page := c.dlq("queue=q")
	if len(page.Messages) != 1 || page.Messages[0].RetryCount != 0 || page.Messages[0].ErrorMessage != "bad" {
		t.Fatalf("dlq %+v, want m1 with retryCount 0 and errorMessage bad", page)
	}
	if next := c.mustPop(popPath("q", "batch=1")); next.Messages[0].TransactionID != "m2" {
		t.Fatalf("next pop %q, want m2", next.Messages[0].TransactionID)
	}
}

func TestSemantics16_27_DLQDisabledDropsExhaustedMessage(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"deadLetterQueue": false, "dlqAfterMaxRetries": false, "retryLimit": 1})
	c.pushOne("q", "", "m", 1)
	r1 := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "failed", "")
	r2 := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "failed", "")
	if r1.Dropped || !r2.Dropped || r2.DLQ {
		t.Fatalf("first %+v, second %+v: want the second dropped", r1, r2)
	}
	if page := c.dlq("queue=q"); page.Total != 0 {
		t.Fatalf("dlq total %d, want 0", page.Total)
	}
	c.mustBeEmpty(popPath("q", "batch=1"))
}

func TestSemantics16_28_FailureIsNotSkippedByLaterSuccess(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var items []map[string]any
	for i := range 10 {
		items = append(items, map[string]any{"queue": "q", "transactionId": fmt.Sprint("m", i), "payload": i})
	}
	c.push(items...)
	p := c.mustPop(popPath("q", "batch=10"))
	statuses := strings.Split("completed completed completed completed completed failed completed completed completed completed", " ")
	c.ackBatch("", p.Messages, statuses...)
	again := c.mustPop(popPath("q", "batch=10"))
	if got := txns(again.Messages); !equalStrings(got, []string{"m5", "m6", "m7", "m8", "m9"}) {
		t.Fatalf("redelivered %v, want m5..m9", got)
	}
}

func TestSemantics16_29_UnknownStatusCountsAsFailed(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 1})
	c.pushOne("q", "", "m", 1)
	if r := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "bogus", ""); r.DLQ {
		t.Fatalf("first bogus ack: %+v, want a redelivery", r)
	}
	if r := c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "bogus", ""); !r.DLQ {
		t.Fatalf("second bogus ack: %+v, want dlq:true", r)
	}
}

func TestSemantics16_30_LeaseExpiryNeverChargesBudget(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 1})
	c.pushOne("q", "", "m", 1)
	for range 3 {
		c.mustPop(popPath("q", "batch=1&leaseSeconds=1"))
		c.elapse(2 * time.Second)
	}
	p := c.mustPop(popPath("q", "batch=1"))
	if r := c.ack(p.Messages[0], "failed", ""); r.DLQ || !r.Success {
		t.Fatalf("failed ack after expiries: %+v, want a plain retry", r)
	}
	c.mustPop(popPath("q", "batch=1"))
}

func TestSemantics16_31_ReAckOfCommittedMessage(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	p := c.mustPop(popPath("q", "batch=1"))
	c.ack(p.Messages[0], "completed", "")
	m := p.Messages[0]
	m.LeaseID = "" // the lease is gone; a lease-less re-ack (docs/decisions.md C10)
	if r := c.ack(m, "completed", ""); !r.Success || !r.Noop {
		t.Fatalf("re-ack completed: %+v, want success:true noop:true", r)
	}
	if r := c.ack(m, "failed", ""); r.Success {
		t.Fatalf("re-ack failed: %+v, want success:false", r)
	}
}

func TestSemantics16_32_AckWithAnotherLiveLeaseIsRejected(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	g1 := c.mustPop(popPath("q", "batch=1&consumerGroup=G1"))
	g2 := c.mustPop(popPath("q", "batch=1&consumerGroup=G2"))
	m := g1.Messages[0]
	m.LeaseID = g2.LeaseID // a live lease on the same partition, not G1's
	if r := c.ack(m, "completed", ""); r.Success || r.Error == nil {
		t.Fatalf("ack under another lease: %+v, want success:false with an error", r)
	}
	var detail map[string]struct {
		Partitions []struct {
			OffsetLag int `json:"offsetLag"`
		} `json:"partitions"`
	}
	c.do("GET", "/api/v1/consumer-groups/G1", nil).expect(t, 200).decode(t, &detail)
	if got := detail["q"].Partitions; len(got) != 1 || got[0].OffsetLag != 1 {
		t.Fatalf("G1 cursor %+v, want offsetLag 1 (not moved)", got)
	}
}

func TestSemantics16_33_SeekToEndAndToTimestamp(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2)
	c.ack(c.mustPop(popPath("q", "batch=10&consumerGroup=G")).Messages[1], "completed", "")
	before := "1970-01-01T00:00:00Z"
	c.pushOne("q", "", "m3", 3)
	c.do("POST", "/api/v1/consumer-groups/G/queues/q/seek", map[string]any{"toEnd": true}).expect(t, 200)
	c.mustBeEmpty(popPath("q", "batch=10&consumerGroup=G"))
	c.do("POST", "/api/v1/consumer-groups/G/queues/q/seek", map[string]any{"timestamp": before}).expect(t, 200)
	p := c.mustPop(popPath("q", "batch=10&consumerGroup=G"))
	if got := txns(p.Messages); !equalStrings(got, []string{"m1", "m2", "m3"}) {
		t.Fatalf("after seek to the past got %v, want [m1 m2 m3]", got)
	}
}

func TestSemantics16_34_DeleteGroupRedeliversBacklog(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2)
	c.ack(c.mustPop(popPath("q", "batch=10&consumerGroup=G")).Messages[1], "completed", "")
	c.mustBeEmpty(popPath("q", "batch=10&consumerGroup=G"))
	c.do("DELETE", "/api/v1/consumer-groups/G", nil).expect(t, 200)
	p := c.mustPop(popPath("q", "batch=10&consumerGroup=G"))
	if got := txns(p.Messages); !equalStrings(got, []string{"m1", "m2"}) {
		t.Fatalf("after delete got %v, want [m1 m2]", got)
	}
}

func TestSemantics16_35_TransactionAckAndPushCommitTogether(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q1", "", "in", 1)
	in := c.mustPop(popPath("q1", "batch=1&leaseSeconds=2")).Messages[0]
	var res struct {
		TransactionID string `json:"transactionId"`
		Success       bool   `json:"success"`
		Results       []struct {
			Type    string `json:"type"`
			Success bool   `json:"success"`
		} `json:"results"`
	}
	c.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": in.TransactionID, "partitionId": in.PartitionID, "status": "completed"},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "q2", "payload": map[string]any{"out": true}}}},
	}, "requiredLeases": []string{in.LeaseID}}).expect(t, 200).decode(t, &res)
	if !res.Success || len(res.Results) != 2 || res.Results[0].Type != "ack" || res.Results[1].Type != "push" || res.TransactionID == "" {
		t.Fatalf("transaction: %+v", res)
	}
	c.elapse(3 * time.Second) // past the input's lease: it must not come back
	c.mustBeEmpty(popPath("q1", "batch=1"))
	if out := c.mustPop(popPath("q2", "batch=1")); string(out.Messages[0].Data) != `{"out":true}` {
		t.Fatalf("q2 got %s", out.Messages[0].Data)
	}
}

func TestSemantics16_36_TransactionWithDuplicatePushWritesNothing(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q2", "", "T", "original")
	c.pushOne("q1", "", "in", 1)
	in := c.mustPop(popPath("q1", "batch=1&leaseSeconds=2")).Messages[0]
	var res struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
		Results []any  `json:"results"`
	}
	c.do("POST", "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "ack", "transactionId": in.TransactionID, "partitionId": in.PartitionID, "leaseId": in.LeaseID},
		map[string]any{"type": "push", "queue": "q2", "transactionId": "T", "payload": "copy"},
	}}).expect(t, 200).decode(t, &res)
	if res.Success || res.Error == "" || len(res.Results) != 0 {
		t.Fatalf("transaction: %+v, want success:false with an error and no results", res)
	}
	if p := c.mustPop(popPath("q2", "batch=10")); len(p.Messages) != 1 || string(p.Messages[0].Data) != `"original"` {
		t.Fatalf("q2 holds %d messages, want only the original", len(p.Messages))
	}
	c.elapse(3 * time.Second)
	if p := c.mustPop(popPath("q1", "batch=1")); p.Messages[0].TransactionID != "in" {
		t.Fatalf("input not redelivered: %q", p.Messages[0].TransactionID)
	}
}

func TestSemantics16_38_ReplayRepublishesWithFreshTransactionID(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", map[string]any{"v": 1})
	p := c.mustPop(popPath("q", "batch=1"))
	c.ack(p.Messages[0], "dlq", "bad")
	path := "/api/v1/messages/" + p.Messages[0].PartitionID + "/m/retry"
	var res struct {
		Success    bool       `json:"success"`
		Queue      string     `json:"queue"`
		Partition  string     `json:"partition"`
		ReplayedAs pushResult `json:"replayedAs"`
		Removed    bool       `json:"dlqRowRemoved"`
	}
	c.do("POST", path, `{}`).expect(t, 200).decode(t, &res)
	if !res.Success || !res.Removed || res.ReplayedAs.TransactionID == "m" || res.ReplayedAs.Status != "queued" ||
		res.Queue != "q" || res.Partition != "Default" {
		t.Fatalf("replay: %+v", res)
	}
	if page := c.dlq("queue=q"); page.Total != 0 {
		t.Fatalf("dlq total %d after replay, want 0", page.Total)
	}
	again := c.mustPop(popPath("q", "batch=1"))
	if m := again.Messages[0]; m.TransactionID != res.ReplayedAs.TransactionID || string(m.Data) != `{"v":1}` {
		t.Fatalf("replayed message %+v", m)
	}
	c.do("POST", path, `{}`).expectError(t, 404, "no_dead_letter")
}

func TestSemantics16_39_LiveMessageCannotBeDeletedOrReplayed(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	res := c.pushOne("q", "", "m", 1)
	base := "/api/v1/messages/" + res.PartitionID + "/m"
	c.do("DELETE", base, nil).expectError(t, 404, "no_dead_letter")
	c.do("POST", base+"/retry", nil).expectError(t, 404, "no_dead_letter")
}
