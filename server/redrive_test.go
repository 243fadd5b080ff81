package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

// docs/decisions.md B4: a bulk redrive replays the filtered rows oldest failure first, at most
// limit of them, each once; repeating it goes on with the rest.
func TestDLQ_BulkRedrive(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"retryLimit": 0})
	for _, txn := range []string{"t0", "t1", "t2"} {
		c.pushOne("q", "", txn, map[string]any{"id": txn})
		p := c.mustPop(popPath("q", "batch=1"))
		c.ack(p.Messages[0], "failed", "bad "+txn)
	}
	c.pushOne("other", "", "x", 1)
	px := c.mustPop(popPath("other", "batch=1"))
	c.ack(px.Messages[0], "dlq", "other queue")

	var got map[string]any
	c.do("POST", "/api/v1/dlq/replay?queue=q&limit=2", nil).expect(t, 200).decode(t, &got)
	if got["replayed"] != float64(2) || got["remaining"] != float64(1) || got["success"] != true {
		t.Fatalf("first redrive: %v", got)
	}
	left := c.dlq("queue=q")
	if left.Total != 1 || left.Messages[0].TransactionID != "t2" {
		t.Fatalf("oldest first: left %+v", left.Messages)
	}
	p := c.mustPop(popPath("q", "batch=10"))
	if len(p.Messages) != 2 {
		t.Fatalf("replayed messages poppable: %d", len(p.Messages))
	}
	c.do("POST", "/api/v1/dlq/replay?queue=q", nil).expect(t, 200).decode(t, &got)
	if got["replayed"] != float64(1) || got["remaining"] != float64(0) {
		t.Fatalf("second redrive: %v", got)
	}
	if other := c.dlq("queue=other"); other.Total != 1 {
		t.Fatalf("the filter left other queues alone: %+v", other)
	}
}

// docs/decisions.md B9: the DLQ page is served by the broker itself.
func TestDLQ_Page(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	r := c.do("GET", "/dlq", nil).expect(t, 200)
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Fatalf("content type %q", ct)
	}
	for _, want := range []string{"Dead-letter queue", "/api/v1/dlq?", "/retry", "Replay edited payload"} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("page lacks %q", want)
		}
	}
	if got := r.header.Get("X-Frame-Options"); got != "DENY" {
		t.Fatalf("X-Frame-Options %q, want DENY", got)
	}
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Fatalf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	// Under that policy only inline blocks whose hash it lists run: the page
	// must have exactly one script and one style, both listed, and no inline
	// event attributes or outside sources (they would be blocked).
	page := string(r.body)
	for _, tag := range []string{"script", "style"} {
		if n := strings.Count(page, "<"+tag); n != 1 {
			t.Fatalf("%d <%s> elements, want 1", n, tag)
		}
		_, rest, _ := strings.Cut(page, "<"+tag+">")
		body, _, _ := strings.Cut(rest, "</"+tag+">")
		sum := sha256.Sum256([]byte(body))
		if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, tag+"-src "+h) {
			t.Fatalf("policy %q does not allow the page's <%s> (%s)", csp, tag, h)
		}
	}
	if regexp.MustCompile(`(?i)\son[a-z]+\s*=\s*["']|\ssrc\s*=|<link`).MatchString(page) {
		t.Fatal("the page has an inline event attribute or an outside source, which the policy blocks")
	}
}
