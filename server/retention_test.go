package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// sweeper is a broker that runs a retention sweep on demand: the
// LocalBroker, or a raft.Node (its leader also sweeps every
// RetentionInterval).
type sweeper interface {
	Sweep(ctx context.Context) (engine.SweepResult, error)
}

func (c *client) sweep() engine.SweepResult {
	c.t.Helper()
	s, ok := c.broker.(sweeper)
	if !ok {
		c.t.Fatalf("%T cannot sweep", c.broker)
	}
	res, err := s.Sweep(context.Background())
	if err != nil {
		c.t.Fatalf("sweep: %v", err)
	}
	return res
}

// expectNoMessage requires GET /messages/{pid}/{txn} to be 404.
func (c *client) expectNoMessage(partitionID, txn string) {
	c.t.Helper()
	c.do("GET", "/api/v1/messages/"+partitionID+"/"+txn, nil).expectError(c.t, 404, "message_not_found")
}

// docs/semantics.md §16.40 and the DLQ page's "Retention window passes" row: retentionSeconds
// deletes what nobody consumed, and the dead letters stay.
func TestRetention_Semantics16_40_WindowPassesDeadLettersStay(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retentionEnabled": true, "retentionSeconds": 2})
	dead := c.pushOne("q", "", "dead", map[string]any{"keep": "snapshot"})
	c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "dlq", "poison")
	c.pushOne("q", "", "live", map[string]any{"unconsumed": true})

	if res := c.sweep(); res.Messages != 0 {
		t.Fatalf("a sweep inside the window deleted %+v", res)
	}
	if d := c.detail(dead.PartitionID, "live"); d.Status != "pending" {
		t.Fatalf("live message before the window passed: %+v", d)
	}
	c.elapse(3 * time.Second)
	if res := c.sweep(); res.Messages != 2 || res.Segments != 2 || res.Evicted != 0 {
		t.Fatalf("sweep after the window: %+v, want both segments", res)
	}
	c.mustBeEmpty(popPath("q", "batch=10"))
	c.expectNoMessage(dead.PartitionID, "live")
	page := c.dlq("queue=q")
	if page.Total != 1 || page.Messages[0].TransactionID != "dead" || string(page.Messages[0].Data) != `{"keep":"snapshot"}` {
		t.Fatalf("dlq after retention: %+v", page)
	}
	// The dead letter still describes the message its segment no longer holds.
	if d := c.detail(dead.PartitionID, "dead"); d.Status != "dead_letter" || string(d.Payload) != `{"keep":"snapshot"}` {
		t.Fatalf("detail of the dead letter after retention: %+v", d)
	}
	// And can still be replayed.
	c.do("POST", "/api/v1/messages/"+dead.PartitionID+"/dead/retry", nil).expect(t, 200)
	if m := c.mustPop(popPath("q", "batch=1")).Messages[0]; string(m.Data) != `{"keep":"snapshot"}` {
		t.Fatalf("replayed after retention: %s", m.Data)
	}
}

// Setting retentionSeconds alone does nothing: retentionEnabled gates it.
func TestRetention_SecondsWithoutEnabledKeepEverything(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retentionSeconds": 2, "completedRetentionSeconds": 2})
	c.pushOne("q", "", "m", 1)
	c.elapse(time.Hour)
	if res := c.sweep(); res.Messages != 0 {
		t.Fatalf("sweep without retentionEnabled: %+v", res)
	}
	c.mustPop(popPath("q", "batch=1"))
}

// completedRetentionSeconds deletes only below every group's cursor: what a
// lagging group has not consumed stays, for it and for a group that joins
// later.
func TestRetention_CompletedKeepsWhatALaggingGroupHasNotConsumed(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 2})
	first := c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2) // a second request: a second segment

	fast := c.mustPop(popPath("q", "batch=2&consumerGroup=fast"))
	c.ackBatch("fast", fast.Messages, "completed", "completed")
	slow := c.mustPop(popPath("q", "batch=1&consumerGroup=slow"))
	c.ack(slow.Messages[0], "completed", "")

	c.elapse(3 * time.Second)
	if res := c.sweep(); res.Messages != 1 || res.Segments != 1 {
		t.Fatalf("sweep: %+v, want m1's segment only", res)
	}
	c.expectNoMessage(first.PartitionID, "m1")
	if d := c.detail(first.PartitionID, "m2"); d.Status != "pending" {
		t.Fatalf("m2 after the sweep: %+v", d)
	}
	if p := c.mustPop(popPath("q", "batch=10&consumerGroup=slow")); len(p.Messages) != 1 || p.Messages[0].TransactionID != "m2" {
		t.Fatalf("the lagging group got %v, want [m2]", txns(p.Messages))
	}
	c.mustBeEmpty(popPath("q", "batch=10&consumerGroup=fast"))
	// A group that never had a cursor here starts at the oldest retained
	// message.
	if p := c.mustPop(popPath("q", "batch=10&consumerGroup=late")); len(p.Messages) != 1 || p.Messages[0].TransactionID != "m2" {
		t.Fatalf("a new group got %v, want [m2]", txns(p.Messages))
	}
	if page := c.dlq("queue=q"); page.Total != 0 {
		t.Fatalf("dlq %+v", page)
	}
}

// maxWaitTimeSeconds evicts, independent of retentionEnabled, leased or
// not, and never dead-letters (docs/decisions.md C11).
func TestRetention_EvictionDeletesWithoutDeadLettering(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"maxWaitTimeSeconds": 2})
	first := c.pushOne("q", "", "m1", 1)
	c.pushOne("q", "", "m2", 2)
	c.mustPop(popPath("q", "batch=1&consumerGroup=holder")) // m1 under a live lease (300 s)

	c.elapse(3 * time.Second)
	if res := c.sweep(); res.Messages != 2 || res.Evicted != 2 {
		t.Fatalf("sweep: %+v, want both evicted", res)
	}
	c.mustBeEmpty(popPath("q", "batch=10&consumerGroup=other"))
	c.mustBeEmpty(popPath("q", "batch=10"))
	c.expectNoMessage(first.PartitionID, "m1")
	c.expectNoMessage(first.PartitionID, "m2")
	// The holder's lease outlives its messages; after it expires there is
	// nothing to redeliver, and nothing was dead-lettered.
	c.elapse(301 * time.Second)
	c.mustBeEmpty(popPath("q", "batch=10&consumerGroup=holder"))
	if page := c.dlq(""); page.Total != 0 {
		t.Fatalf("eviction dead-lettered: %+v", page)
	}
}

// docs/semantics.md §16.40 over a real Raft node, with the queue encrypted too: the sweep is a
// replicated command, and a dead letter still decrypts after its segment
// went.
func TestRetention_RaftSweepKeepsEncryptedDeadLetters(t *testing.T) {
	t.Parallel()
	_, node, _ := newRaftNode(t)
	c := newKeyedClient(t, node, testKey)
	c.configure("q", map[string]any{"retentionEnabled": true, "retentionSeconds": 2, "encryptionEnabled": true})
	dead := c.pushOne("q", "", "dead", map[string]any{"keep": "snapshot"})
	c.ack(c.mustPop(popPath("q", "batch=1")).Messages[0], "dlq", "poison")
	c.pushOne("q", "", "live", map[string]any{"unconsumed": true})
	pushed := time.Now()

	time.Sleep(time.Until(pushed.Add(2100 * time.Millisecond)))
	if res := c.sweep(); res.Messages != 2 {
		t.Fatalf("sweep after the window: %+v", res)
	}
	c.mustBeEmpty(popPath("q", "batch=10"))
	c.expectNoMessage(dead.PartitionID, "live")
	rows := c.dlqRows("queue=q")
	if len(rows) != 1 || string(rows[0].Data) != `{"keep":"snapshot"}` || rows[0].IsEncrypted == nil || !*rows[0].IsEncrypted {
		t.Fatalf("dlq after retention: %+v", rows)
	}
}

// dirSize sums the sizes of the files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && !d.IsDir() {
				return nil // deleted while walking
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return n
}

// A retention sweep gives the disk space of a large queue back: the
// engine's directory shrinks by most of the payload bytes once the
// background compaction of the deleted ranges is done.
func TestRetention_SweepGivesDiskSpaceBack(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 24 MB")
	}
	b := servertest.NewLocalBroker(t)
	c := newClientOptions(t, b, server.Options{})
	c.configure("big", map[string]any{"retentionEnabled": true, "retentionSeconds": 60})

	const (
		requests = 24
		perReq   = 100
		size     = 10 << 10 // payload bytes, incompressible base64
	)
	var payloadBytes int64
	raw := make([]byte, size*3/4)
	for range requests {
		items := make([]map[string]any, perReq)
		for i := range items {
			rand.Read(raw)
			s := base64.StdEncoding.EncodeToString(raw)
			payloadBytes += int64(len(s)) + 2
			items[i] = map[string]any{"queue": "big", "payload": s}
		}
		c.push(items...)
	}
	before := dirSize(t, b.Dir())

	c.elapse(61 * time.Second)
	res := c.sweep()
	if res.Messages != requests*perReq {
		t.Fatalf("sweep: %+v, want %d messages", res, requests*perReq)
	}
	after := before
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		if after = dirSize(t, b.Dir()); before-after >= payloadBytes*3/4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("payload %.1f MB; engine dir %.1f MB before the sweep, %.1f MB %v after it",
		float64(payloadBytes)/1e6, float64(before)/1e6, float64(after)/1e6, time.Since(start).Round(time.Millisecond))
	if before-after < payloadBytes/2 {
		t.Fatalf("the sweep gave back %d bytes of %d payload bytes (dir %d -> %d)", before-after, payloadBytes, before, after)
	}
	c.mustBeEmpty(popPath("big", "batch=10"))
}
