package server_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// By default any origin may call the API, as with Queen (docs/api.md §1.3).
func TestCORS_DefaultAllowsAnyOrigin(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.header = c.header.Clone()
	c.header.Set("Origin", "https://evil.example")
	c.header.Set("Access-Control-Request-Method", "DELETE")
	r := c.do("OPTIONS", "/api/v1/resources/queues/a", nil).expect(t, http.StatusNoContent)
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Fatalf("Access-Control-Allow-Origin %q, want *", got)
	}
}

// With --cors-origins, listed origins and the broker's own page are served,
// any other Origin is refused before a handler runs, preflight or not, and
// clients that send no Origin (SDKs, curl) are unaffected.
func TestCORS_OriginsList(t *testing.T) {
	t.Parallel()
	c := newClientOptions(t, newBroker(t), server.Options{CORSOrigins: []string{"https://app.example", "http://localhost:3000"}})
	from := func(origin, method, path string, body any) *response {
		t.Helper()
		cc := *c
		cc.header = c.header.Clone()
		if origin != "" {
			cc.header.Set("Origin", origin)
		}
		return cc.do(method, path, body)
	}
	push := map[string]any{"items": []any{map[string]any{"queue": "cors", "payload": 1}}}

	r := from("https://app.example", "OPTIONS", "/api/v1/resources/queues/a", nil).expect(t, http.StatusNoContent)
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "https://app.example" {
		t.Fatalf("listed origin: Access-Control-Allow-Origin %q", got)
	}
	if got := r.header.Get("Vary"); got != "Origin" {
		t.Fatalf("listed origin: Vary %q, want Origin", got)
	}
	r = from("https://evil.example", "OPTIONS", "/api/v1/resources/queues/a", nil)
	r.expectError(t, http.StatusForbidden, "origin_not_allowed")
	if got := r.header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Fatalf("refused origin still got Access-Control-Allow-Origin %q", got)
	}
	// A "simple" cross-site POST (no preflight) is refused too, and changes
	// nothing.
	from("https://evil.example", "POST", "/api/v1/push", push).expectError(t, http.StatusForbidden, "origin_not_allowed")
	from("", "GET", "/api/v1/resources/queues/cors", nil).expectError(t, http.StatusNotFound, "queue_not_found")

	from("http://localhost:3000", "POST", "/api/v1/push", push).expect(t, http.StatusCreated)
	from("", "POST", "/api/v1/push", push).expect(t, http.StatusCreated)
	// The DLQ page calls the API from the broker's own origin.
	own := "http://" + c.base[len("http://"):]
	from(own, "GET", "/api/v1/resources/queues/cors", nil).expect(t, http.StatusOK)
}

func TestServer_New_BadCORSOrigin(t *testing.T) {
	t.Parallel()
	for _, origin := range []string{"evil.example", "ftp://x.example", "https://x.example/path", "https://"} {
		_, err := server.New(servertest.NewLocalBroker(t), server.Options{CORSOrigins: []string{origin}})
		if !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("origin %q: err %v, want ErrInvalid", origin, err)
		}
	}
}
