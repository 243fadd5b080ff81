package server_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/servertest"
)

const mib = 1 << 20

// newDiskClient starts a server over b whose guard (a 64 MiB reserve) reads
// the returned fake; free space starts at 1 GiB.
func newDiskClient(t *testing.T, b server.Broker, opts server.Options) (*client, *servertest.InmemSpace) {
	t.Helper()
	space := &servertest.InmemSpace{}
	if opts.SpoolDir == "" {
		opts.SpoolDir = t.TempDir()
	}
	opts.Storage = space.Guard(t, 1<<30, 64*mib, opts.SpoolDir)
	return newClientOptions(t, b, opts), space
}

// expectInsufficientStorage checks a 507: docs/decisions.md C2 body, Retry-After, and a
// message that says which node and why.
func (r *response) expectInsufficientStorage(t *testing.T, node string) {
	t.Helper()
	r.expectError(t, http.StatusInsufficientStorage, "insufficient_storage")
	if got := r.header.Get("Retry-After"); got != "5" {
		t.Errorf("507 Retry-After %q, want 5", got)
	}
	msg := r.object(t)["error"].(string)
	if !strings.HasPrefix(msg, "node "+node+": free space below reserve on ") {
		t.Errorf("507 error %q, want it to name node %s and the shortage", msg, node)
	}
}

// The decision of which routes add data is the table's; pin it.
func TestServer_Routes_AddsData(t *testing.T) {
	t.Parallel()
	s, err := server.New(servertest.NewLocalBroker(t), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Routes() {
		if r.AddsData {
			got = append(got, r.Name)
		}
	}
	// propose_relayed (the cluster path) adds data or not by the command
	// it carries (TestPrepared_BelowReserveAcksGoOnAndTransactionsAreRefused).
	want := []string{"configure", "push", "transaction", "dlq_replay", "message_replay", "trace_add", "stream_register", "stream_cycle"}
	if !slices.Equal(got, want) {
		t.Fatalf("routes that add data %v, want %v", got, want)
	}
}

// Below the reserve, every route that adds data answers 507 before it
// runs, and every other route still answers as it would: pops, acks, lease
// extensions, seeks, deletes, reads. Each route gets a fresh fixture made
// while there was room.
func TestServer_Storage_BelowReserve(t *testing.T) {
	t.Parallel()
	probe, err := server.New(servertest.NewLocalBroker(t), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range probe.Routes() {
		t.Run(r.Name, func(t *testing.T) {
			c, space := newDiskClient(t, newBroker(t), server.Options{})
			f := seed(t, c, "x")
			space.SetFree(63 * mib)
			path, body := request(r, f)
			resp := c.do(r.Method, path, body)
			switch {
			case r.Level == auth.Cluster:
				// Closed without a cluster secret; not a storage answer.
				resp.expectError(t, http.StatusForbidden, "cluster_closed")
			case r.AddsData:
				resp.expectInsufficientStorage(t, "local")
			case migrationAction(r), groupsOnly(r):
				resp.expectError(t, http.StatusNotImplemented, "not_implemented")
			case resp.status < 200 || resp.status > 299:
				t.Errorf("%s %s below the reserve: %d %s, want 2xx", r.Method, path, resp.status, resp.body)
			}
		})
	}
}

// A refused push is not applied, and pushes are accepted again as soon as
// space returns, without a restart.
func TestServer_Storage_RecoversWhenSpaceReturns(t *testing.T) {
	t.Parallel()
	c, space := newDiskClient(t, newBroker(t), server.Options{})
	c.pushOne("q", "", "before", 1)
	space.SetFree(10 * mib)
	for range 3 {
		c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "transactionId": "refused", "payload": 2}}}).
			expectInsufficientStorage(t, "local")
	}
	c.do("POST", "/api/v1/configure", map[string]any{"queue": "new"}).expectInsufficientStorage(t, "local")
	// Consumers go on below the reserve.
	m := c.mustPop(popPath("q", "batch=10")).Messages
	if got := txns(m); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("popped %v, want [before]: the refused push must not be stored", got)
	}
	if r := c.ack(m[0], "completed", ""); !r.Success {
		t.Fatalf("ack below the reserve: %+v", r)
	}
	// Just above the reserve is not enough after a shortage: the guard
	// wants its resume margin (1/16 of the reserve) as well.
	space.SetFree(65 * mib)
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "transactionId": "refused", "payload": 2}}}).
		expectInsufficientStorage(t, "local")
	space.SetFree(69 * mib)
	c.pushOne("q", "", "after", 3)
	if got := txns(c.mustPop(popPath("q", "batch=10")).Messages); !slices.Equal(got, []string{"after"}) {
		t.Fatalf("popped %v, want [after]", got)
	}
}

// A request counts its body against free space while it runs: a body
// larger than the room above the reserve is refused on its own, and a small
// one still goes while the room exceeds the guard's resume margin (4 MiB).
func TestServer_Storage_LargeBodyCountsAgainstTheMargin(t *testing.T) {
	t.Parallel()
	c, space := newDiskClient(t, newBroker(t), server.Options{})
	space.SetFree(64*mib + 5*mib)
	big := strings.Repeat("x", 3*mib) // charged twice: Raft log and engine
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": big}}}).
		expectInsufficientStorage(t, "local")
	c.pushOne("q", "", "small", 1)
}

// During push maintenance a push writes the spool, which is on disk too:
// below the reserve it is refused and nothing is spooled.
func TestServer_Storage_MaintenanceSpoolBelowReserve(t *testing.T) {
	t.Parallel()
	spool := t.TempDir()
	c, space := newDiskClient(t, newBroker(t), server.Options{SpoolDir: spool})
	c.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
	space.SetFree(mib)
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}}).
		expectInsufficientStorage(t, "local")
	if names, _ := os.ReadDir(spool); len(names) != 0 {
		t.Fatalf("spool holds %d files after a refused push, want 0", len(names))
	}
	space.SetFree(1 << 30)
	var res []map[string]any
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}}).expect(t, 201).decode(t, &res)
	if res[0]["status"] != "buffered" {
		t.Fatalf("push during maintenance with room: %v, want buffered", res)
	}
}

// memberBroker is a LocalBroker in a cluster: it has membership, so the
// node-to-node routes run.
type memberBroker struct{ *servertest.LocalBroker }

func (memberBroker) Join(string, string, bool) error         { return nil }
func (memberBroker) JoinNonvoter(string, string, bool) error { return nil }
func (memberBroker) Leave(string, bool) error                { return nil }

// followerBroker is a LocalBroker that says it follows the leader at
// leaderHTTP, as node id.
type followerBroker struct {
	memberBroker
	id, leaderHTTP string
}

func (b followerBroker) Status() raft.Status {
	st := b.memberBroker.Status()
	st.ID, st.Role, st.Leader, st.LeaderHTTP = b.id, "follower", "leader", b.leaderHTTP
	return st
}

const testSecret = "storage-test-secret-storage-test"

// The leader refuses data while a follower reports its disk below the
// reserve, and says which; the report route is the cluster's only.
func TestServer_StorageReport_LeaderRefusesForALowFollower(t *testing.T) {
	t.Parallel()
	c, _ := newDiskClient(t, memberBroker{servertest.NewLocalBroker(t)}, server.Options{ClusterSecret: testSecret})
	low := map[string]any{"id": "n2", "ok": false, "reason": "free space below reserve on /data/raft: 1 MiB < 2 MiB"}
	c.do("POST", "/internal/v1/cluster/storage", low).expectError(t, http.StatusForbidden, "cluster_secret_invalid")
	c.header.Set("X-Queen-Cluster-Secret", testSecret)
	for _, bad := range []map[string]any{
		{"ok": true},
		{"id": "n2"},
		{"id": "n2", "ok": false},
		{"id": 2, "ok": true},
	} {
		c.do("POST", "/internal/v1/cluster/storage", bad).expectError(t, 400, "invalid_argument")
	}
	c.do("POST", "/internal/v1/cluster/storage", low).expect(t, http.StatusNoContent)
	c.header.Del("X-Queen-Cluster-Secret")

	r := c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}})
	r.expectInsufficientStorage(t, "n2")
	if msg := r.object(t)["error"]; msg != "node n2: free space below reserve on /data/raft: 1 MiB < 2 MiB" {
		t.Fatalf("507 error %q", msg)
	}
	var h struct {
		Storage struct {
			OK     bool   `json:"ok"`
			Reason string `json:"reason"`
			Nodes  []struct {
				ID string `json:"id"`
				OK bool   `json:"ok"`
			} `json:"nodes"`
		} `json:"storage"`
	}
	c.do("GET", "/health", nil).expect(t, 200).decode(t, &h)
	if h.Storage.OK || h.Storage.Reason != "node n2: free space below reserve on /data/raft: 1 MiB < 2 MiB" ||
		len(h.Storage.Nodes) != 1 || h.Storage.Nodes[0].ID != "n2" || h.Storage.Nodes[0].OK {
		t.Fatalf("health storage %+v", h.Storage)
	}
	if got := metricValue(t, c, "queen_storage_nodes_below_reserve"); got != "1" {
		t.Fatalf("queen_storage_nodes_below_reserve %s, want 1", got)
	}

	c.header.Set("X-Queen-Cluster-Secret", testSecret)
	c.do("POST", "/internal/v1/cluster/storage", map[string]any{"id": "n2", "ok": true}).expect(t, http.StatusNoContent)
	c.header.Del("X-Queen-Cluster-Secret")
	c.pushOne("q", "", "", 1)
}

// The follower's side: it reports its own guard to the leader it relays to,
// by itself, and the leader follows its disk down and back up.
func TestServer_StorageReport_FollowerReportsItsDisk(t *testing.T) {
	t.Parallel()
	leader, _ := newDiskClient(t, memberBroker{servertest.NewLocalBroker(t)}, server.Options{ClusterSecret: testSecret})
	fb := followerBroker{memberBroker{servertest.NewLocalBroker(t)}, "n2", strings.TrimPrefix(leader.base, "http://")}
	follower, space := newDiskClient(t, fb, server.Options{ClusterSecret: testSecret})
	push := func(c *client) *response {
		return c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}})
	}
	space.SetFree(mib)
	waitFor(t, 10*time.Second, "the leader to refuse data for n2", func() bool { return push(leader).status == 507 })
	push(leader).expectInsufficientStorage(t, "n2")
	// The follower's own edge refuses too, before relaying anything.
	push(follower).expectInsufficientStorage(t, "n2")
	space.SetFree(1 << 30)
	waitFor(t, 10*time.Second, "the leader to take data again", func() bool { return push(leader).status == 201 })
}

// Health and metrics say what the guard sees, and count the 507s.
func TestServer_Storage_HealthAndMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, space := newDiskClient(t, newBroker(t), server.Options{SpoolDir: dir})
	var h struct {
		Storage struct {
			OK           bool   `json:"ok"`
			Reason       string `json:"reason"`
			ReserveBytes int64  `json:"reserveBytes"`
			Directories  []struct {
				Path      string `json:"path"`
				FreeBytes int64  `json:"freeBytes"`
			} `json:"directories"`
		} `json:"storage"`
	}
	c.do("GET", "/health", nil).expect(t, 200).decode(t, &h)
	if !h.Storage.OK || h.Storage.Reason != "" || h.Storage.ReserveBytes != 64*mib ||
		len(h.Storage.Directories) != 1 || h.Storage.Directories[0].Path != dir || h.Storage.Directories[0].FreeBytes != 1<<30 {
		t.Fatalf("health storage with room: %+v", h.Storage)
	}
	space.SetFree(40 * mib)
	// Below the reserve the node is still healthy: it serves reads, pops and acks.
	c.do("GET", "/health", nil).expect(t, 200).decode(t, &h)
	want := "free space below reserve on " + dir + ": 40 MiB < 64 MiB"
	if h.Storage.OK || h.Storage.Reason != want {
		t.Fatalf("health storage below the reserve: %+v, want reason %q", h.Storage, want)
	}
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}}).expectInsufficientStorage(t, "local")
	for name, want := range map[string]string{
		`queen_storage_free_bytes{dir="` + dir + `"}`:          "41943040",
		"queen_storage_reserve_bytes":                          "67108864",
		"queen_storage_below_reserve":                          "1",
		"queen_insufficient_storage_total":                     "1",
		`queen_http_requests_total{route="push",status="5xx"}`: "1",
	} {
		if got := metricValue(t, c, name); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
}

// metricValue reads one series' value from /metrics/prometheus.
func metricValue(t *testing.T, c *client, series string) string {
	t.Helper()
	text := string(c.do("GET", "/metrics/prometheus", nil).expect(t, 200).body)
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s in the exposition", series)
	return ""
}
