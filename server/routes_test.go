package server_test

import (
	"net/url"
	"testing"
)

func TestRoutes_LiteralSegmentBeatsParameter(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.pushOne("q", "", "m", 1)
	c.mustPop(popPath("q", "batch=1&consumerGroup=lagging"))
	// /lagging is the lag report (an array), not the group called "lagging".
	var lag []any
	c.do("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil).expect(t, 200).decode(t, &lag)
	// A group called "lagging" is still reachable where the literal branch
	// has no route.
	c.do("DELETE", "/api/v1/consumer-groups/lagging/queues/q", nil).expect(t, 200)
}

func TestRoutes_PathSegmentsArePercentDecoded(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, tc := range []struct{ queue, partition string }{
		{"q/x", "ord:42"},
		{"q x", "a/b c"},
		{"plain", "ünï"},
	} {
		c.pushOne(tc.queue, tc.partition, "t", 1)
		raw := "/api/v1/pop/queue/" + url.PathEscape(tc.queue) + "/partition/" + url.PathEscape(tc.partition) + "?batch=1"
		p := c.mustPop(raw)
		if p.Messages[0].Queue != tc.queue || p.Messages[0].Partition != tc.partition {
			t.Fatalf("%s: got %s/%s", raw, p.Messages[0].Queue, p.Messages[0].Partition)
		}
	}
	// Unescaped ':' (JS and Python put names in raw) resolves the same way.
	c.pushOne("q2", "ord:42", "t", 1)
	if p := c.mustPop("/api/v1/pop/queue/q2/partition/ord:42?batch=1"); p.Messages[0].Partition != "ord:42" {
		t.Fatalf("raw ':' got %q", p.Messages[0].Partition)
	}
	c.do("GET", "/api/v1/resources/queues/"+url.PathEscape("q/x"), nil).expect(t, 200)
}

func TestRoutes_OptionsPreflightAndCORS(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for _, path := range []string{"/api/v1/push", "/anything/at/all"} {
		r := c.do("OPTIONS", path, nil).expect(t, 204)
		if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Methods") == "" {
			t.Fatalf("OPTIONS %s headers %v", path, r.header)
		}
	}
	for _, r := range []*response{
		c.do("GET", "/health", nil),
		c.do("GET", "/api/v1/nope", nil),
		c.do("POST", "/api/v1/push", `{`),
	} {
		if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Headers") != "Content-Type, Authorization" {
			t.Fatalf("reply %d without CORS headers: %v", r.status, r.header)
		}
	}
}

func TestRoutes_UnknownPathAndWrongMethod(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.do("GET", "/api/v1/queues/q/clear", nil).expectError(t, 404, "no_such_route")
	c.do("GET", "/api/v1/resources/partitions", nil).expectError(t, 404, "no_such_route")
	r := c.do("PUT", "/api/v1/configure", `{}`)
	r.expectError(t, 405, "method_not_allowed")
	if r.header.Get("Allow") != "POST, OPTIONS" {
		t.Fatalf("Allow %q", r.header.Get("Allow"))
	}
	// A trailing slash is ignored.
	c.do("GET", "/health/", nil).expect(t, 200)
}
