package server_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// A request a follower relayed and then gave up on (its deadline has passed)
// is refused by the leader, so a network cut cannot get a write applied after
// its client was told it failed.
func TestForward_ExpiredRelayIsRefused(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.header = c.header.Clone()
	c.header.Set("X-Queen-Forwarded-By", "n2")
	c.header.Set("X-Queen-Forward-Deadline", strconv.FormatInt(time.Now().Add(-time.Second).UnixMicro(), 10))
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "late", "payload": 1}}}).
		expectError(t, http.StatusServiceUnavailable, "forward_expired")

	c.header.Del("X-Queen-Forward-Deadline")
	c.do("GET", "/api/v1/resources/queues/late", nil).expectError(t, http.StatusNotFound, "queue_not_found")

	// Within its deadline the relayed request is served.
	c.header.Set("X-Queen-Forward-Deadline", strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10))
	c.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "late", "payload": 1}}}).
		expect(t, http.StatusCreated)
}

// A follower relays a write before reading its body: a malformed push is
// answered by the leader (the same 400 the follower would give, counted as
// relayed), an ack batch is relayed too, and during push maintenance the
// follower spools pushes itself instead.
func TestForward_FollowerRelaysWritesUnread(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	leader := newClientOptions(t, lb, server.Options{Logger: quietLogger()})
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")},
		server.Options{Logger: quietLogger(), SpoolDir: t.TempDir()})

	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"payload": 1}}}).
		expectError(t, http.StatusBadRequest, "invalid_argument")
	if got := f.metric("queen_forwarded_requests_total"); got != 1 {
		t.Fatalf("follower relayed %v requests after a malformed push, want 1 (the leader answers it)", got)
	}
	f.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": []any{
		map[string]any{"transactionId": "none", "partitionId": "00000000-0000-0000-0000-000000000000", "status": "completed"}}}).
		expect(t, http.StatusOK)
	if got := f.metric("queen_forwarded_requests_total"); got != 2 {
		t.Fatalf("follower relayed %v requests after an ack batch, want 2", got)
	}

	f.do("POST", "/api/v1/system/maintenance", map[string]any{"enabled": true}).expect(t, 200)
	var res []map[string]any
	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "m", "payload": 1}}}).
		expect(t, http.StatusCreated).decode(t, &res)
	if len(res) != 1 || res[0]["status"] != "buffered" {
		t.Fatalf("push to a follower in push maintenance: %v, want it buffered there", res)
	}
	if got := f.metric("queen_forwarded_requests_total"); got != 2 {
		t.Fatalf("follower relayed %v requests after a push during maintenance, want still 2", got)
	}
}

// Each answered command's time is in queen_command_duration_seconds by
// command; a follower's relayed push is timed by the leader, not by it.
func TestMetrics_CommandDuration(t *testing.T) {
	t.Parallel()
	lb := servertest.NewLocalBroker(t)
	leader := newClientOptions(t, lb, server.Options{Logger: quietLogger()})
	f := newClientOptions(t, follower{LocalBroker: lb, leaderHTTP: strings.TrimPrefix(leader.base, "http://")},
		server.Options{Logger: quietLogger()})
	leader.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "t", "payload": 1}}}).expect(t, 201)
	f.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "t", "payload": 2}}}).expect(t, 201)
	leader.mustPop(popPath("t", "batch=2"))
	for name, want := range map[string]float64{
		`queen_command_duration_seconds_count{command="push"}`: 2,
		`queen_command_duration_seconds_count{command="pop"}`:  1,
	} {
		if got := leader.metric(name); got != want {
			t.Errorf("leader %s = %v, want %v", name, got, want)
		}
	}
	if strings.Contains(string(f.do("GET", "/metrics/prometheus", nil).expect(t, 200).body), `queen_command_duration_seconds_count{command="push"}`) {
		t.Error("the follower timed a push it relayed")
	}
}
