package server_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// waitSpooled waits until c's spool has nothing pending.
func waitSpooled(t *testing.T, c *client) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for c.do("GET", "/api/v1/status/buffers", nil).expect(t, 200).object(t)["pending"] != float64(0) {
		if time.Now().After(deadline) {
			t.Fatal("the spool was not replayed within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A follower with the cluster secret replays its spool to the leader as a
// command on the cluster path, like any push it prepares: the leader's
// push route never sees it, sealed items keep their envelope (the path
// vouches for the bit, as for the follower's own pushes), and a spool file
// replayed a second time (here by another follower that holds a copy of
// it) answers duplicates, so each item is stored exactly once.
func TestSpool_FollowerReplaysOnTheClusterPathOnce(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret, EncryptionKey: testKey}
	leader := newClientOptions(t, lb, opts)
	fb := follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")}
	spoolDir := t.TempDir()
	opts.SpoolDir = spoolDir
	f := newClientOptions(t, fb, opts)
	leader.configure("secret", map[string]any{"encryptionEnabled": true})
	leader.configure("open", nil)

	leader.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
	const payload = `{"card":"REPLAY-MARKER-5500"}`
	var buffered []map[string]any
	f.do("POST", "/api/v1/push", `{"items":[{"queue":"secret","transactionId":"s","payload":`+payload+`},`+
		`{"queue":"open","transactionId":"o","payload":2}]}`).expect(t, http.StatusCreated).decode(t, &buffered)
	if len(buffered) != 2 || buffered[0]["status"] != "buffered" {
		t.Fatalf("push during maintenance: %v", buffered)
	}
	copyDir := t.TempDir()
	files, err := os.ReadDir(spoolDir)
	if err != nil || len(files) != 1 {
		t.Fatalf("spool holds %v, %v; want one file", files, err)
	}
	b, err := os.ReadFile(filepath.Join(spoolDir, files[0].Name()))
	if err == nil {
		err = os.WriteFile(filepath.Join(copyDir, files[0].Name()), b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}

	leader.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).expect(t, 200)
	waitSpooled(t, f)
	opts.SpoolDir = copyDir
	waitSpooled(t, newClientOptions(t, fb, opts))

	m := leader.mustPop(popPath("secret", "batch=10")).Messages
	if len(m) != 1 || m[0].TransactionID != "s" || !sameJSON(t, m[0].Data, payload) {
		t.Fatalf("replayed secret popped as %+v, want it once", m)
	}
	if raw := stored(t, lb, m[0].PartitionID, "s"); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
		t.Fatalf("replayed secret stored as %s", raw)
	}
	if m := leader.mustPop(popPath("open", "batch=10")).Messages; len(m) != 1 || !sameJSON(t, m[0].Data, `2`) {
		t.Fatalf("replayed open popped as %+v, want it once", m)
	}
	for name, want := range map[string]float64{
		`queen_http_requests_total{route="propose_relayed",status="2xx"}`: 2,
		`queen_http_requests_total{route="push",status="2xx"}`:            0,
	} {
		if got := leader.metric(name); got != want {
			t.Errorf("leader %s = %v, want %v", name, got, want)
		}
	}
}

// A follower whose leader has no cluster path (an older version answers
// 501) replays its spool as it did before: an HTTP push of the items'
// plaintext marked as a spool replay, which the leader's push route seals
// again and stores once.
func TestSpool_FollowerOfAnOlderLeaderRelaysItsReplay(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	opts := server.Options{Logger: quietLogger(), ClusterSecret: testSecret, EncryptionKey: testKey}
	leader := newClientOptions(t, lb, opts)
	old := olderLeader(t, leader, http.StatusNotImplemented, "not_implemented", "this broker runs one Raft group")
	opts.SpoolDir = t.TempDir()
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(old, "http://")}, opts)
	leader.configure("secret", map[string]any{"encryptionEnabled": true})

	leader.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
	const payload = `{"card":"OLDER-MARKER"}`
	f.do("POST", "/api/v1/push", `{"items":[{"queue":"secret","transactionId":"s","payload":`+payload+`}]}`).
		expect(t, http.StatusCreated)
	leader.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": false}).expect(t, 200)
	waitSpooled(t, f)

	m := leader.mustPop(popPath("secret", "batch=10")).Messages
	if len(m) != 1 || !sameJSON(t, m[0].Data, payload) {
		t.Fatalf("replayed secret popped as %+v", m)
	}
	if raw := stored(t, lb, m[0].PartitionID, "s"); !isEnvelope(raw) || bytes.Contains(raw, []byte("MARKER")) {
		t.Fatalf("replayed secret stored as %s", raw)
	}
	if got := leader.metric(`queen_http_requests_total{route="push",status="2xx"}`); got != 1 {
		t.Errorf("the leader's push route answered %v replays, want 1", got)
	}
}
