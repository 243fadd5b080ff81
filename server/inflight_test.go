package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server"
)

// pushBody is a valid push of one item to queue "big" that is exactly n
// bytes long.
func pushBody(n int) []byte {
	head, tail := `{"items":[{"queue":"big","payload":"`, `"}]}`
	return []byte(head + strings.Repeat("x", n-len(head)-len(tail)) + tail)
}

// dialServer opens a raw connection to the server behind c.
func (c *client) dialServer() net.Conn {
	c.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { conn.Close() })
	return conn
}

// sendHead writes a push's request line and headers: with a
// Content-Length when size >= 0, else chunked.
func sendHead(t *testing.T, conn net.Conn, size int) {
	t.Helper()
	framing := "Transfer-Encoding: chunked"
	if size >= 0 {
		framing = "Content-Length: " + strconv.Itoa(size)
	}
	if _, err := fmt.Fprintf(conn, "POST /api/v1/push HTTP/1.1\r\nHost: queen\r\nContent-Type: application/json\r\n%s\r\n\r\n", framing); err != nil {
		t.Fatal(err)
	}
}

// readAnswer reads one response from conn, waiting up to 20 s.
func readAnswer(t *testing.T, conn net.Conn) (*http.Response, []byte) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer body: %v", err)
	}
	return resp, body
}

// metric reads one series of /metrics/prometheus.
func (c *client) metric(name string) float64 {
	c.t.Helper()
	for _, line := range strings.Split(string(c.do("GET", "/metrics/prometheus", nil).expect(c.t, 200).body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				c.t.Fatalf("metric %s: %q", name, line)
			}
			return f
		}
	}
	c.t.Fatalf("no metric %s", name)
	return 0
}

func (c *client) waitMetric(name string, want float64) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := c.metric(name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s = %v, want %v", name, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func expectOverloaded(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !bytes.Contains(body, []byte(`"code":"overloaded"`)) {
		t.Fatalf("answer %d (Retry-After %q) %s, want 503 overloaded with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

// prefetch is how much of a body fasthttp reads with the headers, before
// the handler runs.
const prefetch = 8 << 10

// TestServer_Overload_RefusedBeforeItsBodyIsRead: while one push holds the
// whole budget of bodies in flight, another is answered 503 overloaded with
// Retry-After when no more than fasthttp's first 8 KiB of its body were sent
// (the server does not wait for the rest), and so is a chunked one; the
// first push then completes, its bytes come back, and pushes go through
// again.
func TestServer_Overload_RefusedBeforeItsBodyIsRead(t *testing.T) {
	t.Parallel()
	const budget = 1 << 20
	c := newClientOptions(t, newBroker(t), server.Options{MaxBodyBytes: budget, MaxInflightBodyBytes: budget})
	big := pushBody(budget)
	holder := c.dialServer()
	sendHead(t, holder, len(big))
	if _, err := holder.Write(big[:2*prefetch]); err != nil {
		t.Fatal(err)
	}
	c.waitMetric("queen_http_inflight_body_bytes", budget)

	declared := c.dialServer()
	sendHead(t, declared, 512<<10)
	if _, err := declared.Write(pushBody(512 << 10)[:prefetch]); err != nil { // and nothing more
		t.Fatal(err)
	}
	resp, body := readAnswer(t, declared)
	expectOverloaded(t, resp, body)

	chunked := c.dialServer()
	sendHead(t, chunked, -1)
	if _, err := fmt.Fprintf(chunked, "10\r\n{\"items\":[{\"q\":1\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, body = readAnswer(t, chunked)
	expectOverloaded(t, resp, body)

	if _, err := holder.Write(big[2*prefetch:]); err != nil {
		t.Fatal(err)
	}
	if resp, body := readAnswer(t, holder); resp.StatusCode != 201 || !bytes.Contains(body, []byte(`"status":"queued"`)) {
		t.Fatalf("the push holding the budget: %d %s", resp.StatusCode, body)
	}
	c.waitMetric("queen_http_inflight_body_bytes", 0)
	c.pushOne("small", "", "after", 1)
	if got := c.metric("queen_http_overloaded_total"); got != 2 {
		t.Fatalf("queen_http_overloaded_total = %v, want 2", got)
	}
}

// TestServer_Overload_ClientSendingItsWholeBodyReadsThe503: a refused body
// too long for fasthttp to drop by itself is read and dropped after the
// answer instead of the connection being reset, so a client that sends its
// whole body before reading (as many do) still reads the 503.
func TestServer_Overload_ClientSendingItsWholeBodyReadsThe503(t *testing.T) {
	t.Parallel()
	const budget = 16 << 20
	c := newClientOptions(t, newBroker(t), server.Options{MaxBodyBytes: budget, MaxInflightBodyBytes: budget})
	holder := c.dialServer()
	sendHead(t, holder, budget)
	if _, err := holder.Write(pushBody(budget)[:2*prefetch]); err != nil {
		t.Fatal(err)
	}
	c.waitMetric("queen_http_inflight_body_bytes", budget)

	refused := c.dialServer()
	body := pushBody(12 << 20)
	sendHead(t, refused, len(body))
	refused.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := refused.Write(body); err != nil {
		t.Fatalf("sending the whole body of a refused push: %v", err)
	}
	resp, answer := readAnswer(t, refused)
	expectOverloaded(t, resp, answer)
	if !resp.Close {
		t.Fatal("the answer to a refused body does not close the connection")
	}
}

// TestServer_Push_ChunkedBodyBounded: a chunked body is held to
// MaxBodyBytes like a declared one.
func TestServer_Push_ChunkedBodyBounded(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	c := newClientOptions(t, newBroker(t), server.Options{MaxBodyBytes: limit, MaxInflightBodyBytes: 4 * limit})
	send := func(body []byte) (*http.Response, []byte) {
		conn := c.dialServer()
		sendHead(t, conn, -1)
		w := bufio.NewWriter(conn)
		for len(body) > 0 {
			n := min(len(body), 100<<10)
			fmt.Fprintf(w, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		fmt.Fprint(w, "0\r\n\r\n")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return readAnswer(t, conn)
	}
	if resp, body := send(pushBody(limit + limit/2)); resp.StatusCode != 413 || !bytes.Contains(body, []byte(`"code":"body_too_large"`)) {
		t.Fatalf("chunked body over the limit: %d %s", resp.StatusCode, body)
	}
	if resp, body := send(pushBody(300 << 10)); resp.StatusCode != 201 || !bytes.Contains(body, []byte(`"status":"queued"`)) {
		t.Fatalf("chunked body under the limit: %d %s", resp.StatusCode, body)
	}
}

// TestOptions_Validate_InflightBelowMaxBody: a cap on bodies in flight
// below the largest body accepted is refused.
func TestOptions_Validate_InflightBelowMaxBody(t *testing.T) {
	t.Parallel()
	for _, o := range []server.Options{
		{MaxBodyBytes: 2 << 20, MaxInflightBodyBytes: 1 << 20},
		{MaxInflightBodyBytes: -1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
	}
	o := server.DefaultOptions()
	if o.MaxInflightBodyBytes < 2*int64(o.MaxBodyBytes) || o.Validate() != nil {
		t.Fatalf("defaults: MaxInflightBodyBytes %d for MaxBodyBytes %d (%v)", o.MaxInflightBodyBytes, o.MaxBodyBytes, o.Validate())
	}
}

// tinyItems is a push body of about n bytes of the smallest items.
func tinyItems(n int) []byte {
	const item = `{"queue":"tiny"}`
	k := (n - len(`{"items":[]}`)) / (len(item) + 1)
	return []byte(`{"items":[` + strings.TrimSuffix(strings.Repeat(item+",", k), ",") + `]}`)
}

// TestServer_Push_ChargedWhatItCostsDecoded: a body is charged four times
// its length (what it costs once decoded, framed and logged), and a push
// its items on top once decoded. While one push holds half the budget, a
// push whose body fits but whose 16,000 items do not is answered 503
// overloaded (nothing proposed); alone, that push is charged the whole
// budget and goes through.
func TestServer_Push_ChargedWhatItCostsDecoded(t *testing.T) {
	t.Parallel()
	const budget = 4 << 20
	c := newClientOptions(t, newBroker(t), server.Options{MaxBodyBytes: 1 << 20, MaxInflightBodyBytes: budget})
	big := pushBody(512 << 10)
	holder := c.dialServer()
	sendHead(t, holder, len(big))
	if _, err := holder.Write(big[:2*prefetch]); err != nil {
		t.Fatal(err)
	}
	c.waitMetric("queen_http_inflight_body_bytes", 4*float64(len(big)))

	tiny := tinyItems(256 << 10)
	r := c.do("POST", "/api/v1/push", tiny)
	if r.status != 503 || !bytes.Contains(r.body, []byte(`"code":"overloaded"`)) {
		t.Fatalf("push of many items beside a holder of half the budget: %d %s, want 503 overloaded", r.status, r.body)
	}
	if _, err := holder.Write(big[2*prefetch:]); err != nil {
		t.Fatal(err)
	}
	if resp, body := readAnswer(t, holder); resp.StatusCode != 201 {
		t.Fatalf("the push holding half the budget: %d %s", resp.StatusCode, body)
	}
	c.waitMetric("queen_http_inflight_body_bytes", 0)
	if r := c.do("POST", "/api/v1/push", tiny); r.status != 201 {
		t.Fatalf("push of many items alone: %d %s, want 201", r.status, r.body)
	}
	c.waitMetric("queen_http_inflight_body_bytes", 0)
}
