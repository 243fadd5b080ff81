package server_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// watchers reports the server's parked long-polls (its queen_pop_parked
// gauge), whatever the broker.
func watchers(t *testing.T, c *client) int {
	t.Helper()
	text := string(c.do("GET", "/metrics/prometheus", nil).expect(t, 200).body)
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, "queen_pop_parked "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("queen_pop_parked %q", v)
			}
			return n
		}
	}
	t.Fatal("no queen_pop_parked in the exposition")
	return 0
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// TestLongPoll_ClientDisconnectDoesNotClaimLease parks a long-poll, drops
// its connection, then pushes: the abandoned poll must end without taking a
// lease, so the next consumer gets the message at once.
func TestLongPoll_ClientDisconnectDoesNotClaimLease(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /api/v1/pop/queue/q?batch=1&wait=true&timeout=20000 HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the poll to park", func() bool { return watchers(t, c) == 1 })
	conn.Close()
	// The parked handler notices within one re-check interval (<= 1 s)...
	waitFor(t, 3*time.Second, "the abandoned poll to end", func() bool { return watchers(t, c) == 0 })
	// ...and a push afterwards goes to the next consumer, not to it.
	c.pushOne("q", "", "after", 1)
	p := c.mustPop(popPath("q", "batch=1"))
	if p.Messages[0].TransactionID != "after" {
		t.Fatalf("got %q", p.Messages[0].TransactionID)
	}
}

// TestLongPoll_DisconnectRacingAPushReleasesTheLease: the client goes away
// and a push lands before the parked handler's next re-check. Whichever the
// handler sees first, the message must be poppable right away by another
// consumer (an unseen pop's lease is released, not left to expire).
func TestLongPoll_DisconnectRacingAPushReleasesTheLease(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", map[string]any{"leaseTime": 300})
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /api/v1/pop/queue/q?batch=1&wait=true&timeout=20000 HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the poll to park", func() bool { return watchers(t, c) == 1 })
	conn.Close()
	c.pushOne("q", "", "raced", 1)
	waitFor(t, 3*time.Second, "the abandoned poll to end", func() bool { return watchers(t, c) == 0 })
	if p := c.mustPop(popPath("q", "batch=1")); p.Messages[0].TransactionID != "raced" {
		t.Fatalf("got %q", p.Messages[0].TransactionID)
	}
}

// TestLongPoll_ConnectedClientGetsTheMessage: the same parked poll, still
// connected, receives the push on its own connection.
func TestLongPoll_ConnectedClientGetsTheMessage(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("q", nil)
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "GET /api/v1/pop/queue/q?batch=1&wait=true&timeout=20000 HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "the poll to park", func() bool { return watchers(t, c) == 1 })
	c.pushOne("q", "", "m", 1)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// TestLongPoll_DiscoveryWakesOnAnyQueue: a namespace pop parks on every
// queue and takes a message pushed to a matching one.
func TestLongPoll_DiscoveryWakesOnAnyQueue(t *testing.T) {
	c := newClient(t)
	c.configure("billing.invoices", nil)
	go func() {
		time.Sleep(200 * time.Millisecond)
		c.pushOne("other.queue", "", "x", 1)
		c.pushOne("billing.invoices", "", "inv", 1)
	}()
	start := time.Now()
	p := c.mustPop("/api/v1/pop?namespace=billing&batch=1&wait=true&timeout=5000")
	if p.Messages[0].Queue != "billing.invoices" || time.Since(start) > 3*time.Second {
		t.Fatalf("got %+v after %v", p.Messages[0], time.Since(start))
	}
}

// TestLongPoll_ShutdownEndsParkedPoll: Shutdown wakes a parked long-poll,
// which answers 204 at once instead of holding shutdown for its timeout.
func TestLongPoll_ShutdownEndsParkedPoll(t *testing.T) {
	b := servertest.NewLocalBroker(t)
	s, err := server.New(b, server.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	status := make(chan int, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("http://" + ln.Addr().String() + "/api/v1/pop/queue/q?batch=1&wait=true&timeout=20000")
		if err != nil {
			status <- -1
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	waitFor(t, 2*time.Second, "the poll to park", func() bool { return b.Watchers() == 1 })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("shutdown took %v with a parked poll", took)
	}
	if got := <-status; got != 204 {
		t.Fatalf("parked poll answered %d, want 204", got)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
