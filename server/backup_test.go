package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// restoreInto restores file into dir as node id.
func restoreInto(t *testing.T, file []byte, dir, id string) error {
	t.Helper()
	r, err := backup.NewReader(bytes.NewReader(file))
	if err != nil {
		return err
	}
	defer r.Close()
	opts := rafttest.Options(id, dir)
	return raft.Restore(opts, r)
}

// openRestored starts the node restore made in dir, as serve does without
// --raft, and serves it.
func openRestored(t *testing.T, dir, id string) (*raft.Node, *client) {
	t.Helper()
	opts := rafttest.Options(id, dir)
	opts.Transport = raft.NewLocalTransport(id)
	opts.Bootstrap = true
	opts.RetentionInterval = 0
	n, err := raft.Open(opts)
	if err != nil {
		t.Fatalf("open the restored store: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	rafttest.WaitLeader(t, n)
	return n, newClientOptions(t, n, server.Options{})
}

// A backup holds every message, the cursors and the DLQ rows; restored,
// it is the same store (the same digest) and a new cluster serves it: the
// consumer group resumes where it was, pushes acknowledged before a backup
// taken under load are all there, and the restored node takes writes.
func TestBackup_RestoreRoundTrip(t *testing.T) {
	t.Parallel()
	_, n, _ := newRaftNode(t)
	c := newClientOptions(t, n, server.Options{})
	c.configure("bq", map[string]any{"retryLimit": 0})
	var pushed []pushResult
	for i := range 30 {
		pushed = append(pushed, c.pushOne("bq", "", fmt.Sprintf("t%02d", i), map[string]int{"i": i}))
	}
	p := c.mustPop(popPath("bq", "consumerGroup=g1&batch=10"))
	c.ackBatch("g1", p.Messages, repeat("completed", 10)...)
	c.pushOne("dead", "", "d1", "poison")
	pd := c.mustPop(popPath("dead", "batch=1"))
	c.ack(pd.Messages[0], "dlq", "poison pill")

	// Quiet: the restored store must equal the original at the backup's index.
	quiet := c.do("GET", "/api/v1/system/backup", nil).expect(t, 200).body
	want, err := n.Engine().Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.Verify(bytes.NewReader(quiet))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(m.Groups) != 1 || m.Groups[0].Index != n.Applied() || m.Groups[0].Queues["bq"] != 30 {
		t.Fatalf("manifest %+v; the node is at %d", m, n.Applied())
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if err := restoreInto(t, quiet, dir, "r1"); err != nil {
		t.Fatalf("restore: %v", err)
	}
	h, err := engine.Open(filepath.Join(dir, "engine"), enginetest.Options())
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Digest()
	if err := errors.Join(err, h.Check(), h.Close()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("restored digest %x, original %x", got, want)
	}

	// Under load: every push answered before the backup was asked for is in it.
	var (
		stop    atomic.Bool
		mu      sync.Mutex
		before  []pushResult // answered before the backup request
		started atomic.Bool
		wg      sync.WaitGroup
	)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; i < 2000 && !stop.Load(); i++ {
				var res []pushResult
				resp := c.do("POST", "/api/v1/push", map[string]any{"items": []map[string]any{
					{"queue": "live", "transactionId": fmt.Sprintf("w%d-%d", w, i), "payload": i}}})
				if resp.status != 201 || json.Unmarshal(resp.body, &res) != nil || len(res) != 1 || res[0].Status != "queued" {
					t.Errorf("push under load: %d %s", resp.status, resp.body)
					return
				}
				if r := res[0]; !started.Load() {
					mu.Lock()
					before = append(before, r)
					mu.Unlock()
				}
			}
		})
	}
	for {
		mu.Lock()
		k := len(before)
		mu.Unlock()
		if k >= 20 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	started.Store(true)
	loaded := c.do("GET", "/api/v1/system/backup", nil).expect(t, 200).body
	stop.Store(true)
	wg.Wait()
	dir2 := filepath.Join(t.TempDir(), "restored")
	if err := restoreInto(t, loaded, dir2, "r1"); err != nil {
		t.Fatalf("restore under load: %v", err)
	}
	_, rc := openRestored(t, dir2, "r1")
	for _, r := range append(pushed, before...) {
		rc.do("GET", "/api/v1/messages/"+r.PartitionID+"/"+r.TransactionID, nil).expect(t, 200)
	}
	rest := rc.mustPop(popPath("bq", "consumerGroup=g1&batch=100"))
	if len(rest.Messages) != 20 || rest.Messages[0].TransactionID != "t10" {
		t.Fatalf("g1 resumed with %d messages from %s, want 20 from t10", len(rest.Messages), rest.Messages[0].TransactionID)
	}
	if d := rc.dlq("queue=dead"); d.Total != 1 || d.Messages[0].TransactionID != "d1" {
		t.Fatalf("DLQ after restore: %+v", d)
	}
	rc.pushOne("bq", "", "after", "new cluster takes writes")
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// A truncated file, a flipped byte, a non-empty target: each is refused,
// naming the problem, and nothing is left behind.
func TestBackup_RestoreRefuses(t *testing.T) {
	t.Parallel()
	_, n, _ := newRaftNode(t)
	c := newClientOptions(t, n, server.Options{})
	for i := range 50 {
		c.pushOne("q", "", fmt.Sprintf("t%d", i), map[string]string{"pad": string(bytes.Repeat([]byte{'x'}, 1000))})
	}
	file := c.do("GET", "/api/v1/system/backup", nil).expect(t, 200).body
	flipped := bytes.Clone(file)
	flipped[len(flipped)/2] ^= 0x10
	newer := bytes.Clone(file)
	newer[4] = backup.Version + 1
	for _, tc := range []struct {
		name string
		file []byte
		want error
	}{
		{"truncated", file[:len(file)-10], backup.ErrCorrupt},
		{"truncated_at_half", file[:len(file)/2], backup.ErrCorrupt},
		{"flipped_byte", flipped, backup.ErrCorrupt},
		{"newer_format", newer, backup.ErrNewer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			err := restoreInto(t, tc.file, filepath.Join(parent, "data"), "r1")
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
	t.Run("non_empty_target", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "keep"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := restoreInto(t, file, dir, "r1")
		if !errors.Is(err, raft.ErrNotEmpty) {
			t.Fatalf("err = %v, want ErrNotEmpty", err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Fatalf("target changed: %v", left)
		}
		if sib, _ := os.ReadDir(filepath.Dir(dir)); len(sib) != 1 {
			t.Fatalf("left beside the target: %v", sib)
		}
	})
	if err := restoreInto(t, file, filepath.Join(t.TempDir(), "data"), "r1"); err != nil {
		t.Fatalf("the intact file: %v", err)
	}
}

// A follower streams the leader's backup through (one group); with
// ?local=true it serves its own copy.
func TestBackup_FollowerRelaysToLeader(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	leader := newClientOptions(t, lb, server.Options{Logger: quietLogger()})
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")},
		server.Options{Logger: quietLogger()})
	pad := strings.Repeat("x", 2000)
	for i := range 40 {
		items := make([]map[string]any, 50)
		for j := range items {
			items[j] = map[string]any{"queue": "big", "payload": map[string]any{"i": i*50 + j, "pad": pad}}
		}
		leader.push(items...)
	}
	for _, tc := range []struct {
		query     string
		node      string
		forwarded float64
	}{{"", "local", 1}, {"?local=true", "follower", 1}} {
		r := f.do("GET", "/api/v1/system/backup"+tc.query, nil).expect(t, 200)
		m, err := backup.Verify(bytes.NewReader(r.body))
		if err != nil {
			t.Fatalf("%q: verify %d bytes: %v", tc.query, len(r.body), err)
		}
		if m.Node != tc.node || len(m.Groups) != 1 || m.Groups[0].Queues["big"] != 2000 {
			t.Fatalf("%q: manifest %+v, want node %s with 2000 messages in big", tc.query, m, tc.node)
		}
		if got := f.metric("queen_forwarded_requests_total"); got != tc.forwarded {
			t.Fatalf("%q: follower relayed %v requests, want %v", tc.query, got, tc.forwarded)
		}
	}
}
