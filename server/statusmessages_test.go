package server_test

import (
	"regexp"
	"testing"
	"time"
)

type statusMessage struct {
	ID, TransactionID, PartitionID, QueuePath, Queue, Partition, Status, CreatedAt string
}

// Each message's status for queue mode, in precedence: dead_letter (even
// though the cursor is past it), completed, processing under the live
// lease, pending; a named group's progress does not count. Pages are
// newest first and always arrays.
func TestStatusQueueMessages_StatusAndPaging(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("st", map[string]any{"retryLimit": 0})
	for _, txn := range []string{"m1", "m2", "m3", "m4"} {
		c.pushOne("st", "", txn, map[string]any{"t": txn})
		c.elapse(time.Millisecond)
	}
	c.ack(c.mustPop(popPath("st", "batch=1")).Messages[0], "failed", "to the DLQ")
	c.ack(c.mustPop(popPath("st", "batch=1")).Messages[0], "completed", "")
	if got := c.mustPop(popPath("st", "batch=1")).Messages[0].TransactionID; got != "m3" {
		t.Fatalf("third pop delivered %s, want m3", got)
	}
	named := c.mustPop(popPath("st", "batch=4&consumerGroup=g"))
	c.ackBatch("g", named.Messages, "completed", "completed", "completed", "completed")

	page := func(query string) []statusMessage {
		t.Helper()
		var got []statusMessage
		r := c.do("GET", "/api/v1/status/queues/st/messages"+query, nil).expect(t, 200)
		if len(r.body) == 0 || r.body[0] != '[' {
			t.Fatalf("reply %s is not an array", r.body)
		}
		r.decode(t, &got)
		return got
	}
	all := page("")
	want := []struct{ txn, status string }{{"m4", "pending"}, {"m3", "processing"}, {"m2", "completed"}, {"m1", "dead_letter"}}
	if len(all) != len(want) {
		t.Fatalf("%d messages, want %d: %+v", len(all), len(want), all)
	}
	millis := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	for i, w := range want {
		m := all[i]
		if m.TransactionID != w.txn || m.Status != w.status {
			t.Errorf("message %d: %s %s, want %s %s", i, m.TransactionID, m.Status, w.txn, w.status)
		}
		if m.Queue != "st" || m.Partition != "Default" || m.QueuePath != "st/Default" || m.ID == "" || m.PartitionID == "" ||
			!millis.MatchString(m.CreatedAt) {
			t.Errorf("message %d fields %+v", i, m)
		}
	}
	for _, p := range []struct {
		query string
		txns  []string
	}{
		{"?limit=2", []string{"m4", "m3"}},
		{"?limit=2&offset=2", []string{"m2", "m1"}},
		{"?limit=3&offset=3", []string{"m1"}},
		{"?limit=2&offset=4", nil},
	} {
		got := page(p.query)
		var txns []string
		for _, m := range got {
			txns = append(txns, m.TransactionID)
		}
		if !equalStrings(txns, p.txns) {
			t.Errorf("page %s: %v, want %v", p.query, txns, p.txns)
		}
	}
	// A limit below 1 or a negative offset is a mistake, not a page.
	c.do("GET", "/api/v1/status/queues/q/messages?limit=0", nil).expectError(t, 400, "invalid_argument")
	c.do("GET", "/api/v1/status/queues/q/messages?offset=-5", nil).expectError(t, 400, "invalid_argument")
	if r := c.do("GET", "/api/v1/status/queues/none/messages", nil).expect(t, 200); string(r.body) != "[]" {
		t.Fatalf("unknown queue: %s, want []", r.body)
	}
}
