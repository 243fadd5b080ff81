package server_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A request a follower relayed and then gave up on (its deadline has passed)
// is refused by the leader, so a network cut cannot get a write applied after
// its client was told it failed.
func TestForward_ExpiredRelayIsRefused(t *testing.T) {
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
