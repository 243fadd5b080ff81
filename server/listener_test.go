package server_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// startCounted serves a local broker with opts and returns the host:port
// and the metric set the server counts in.
func startCounted(t *testing.T, opts server.Options) (string, *metrics.Set) {
	t.Helper()
	opts.Metrics = metrics.NewSet()
	opts.Logger = slog.New(slog.DiscardHandler)
	url := servertest.StartOptions(t, servertest.NewLocalBroker(t), opts)
	return strings.TrimPrefix(url, "http://"), opts.Metrics
}

// dialFrom opens a connection to addr from the loopback address src, so
// that one test can be several clients. It skips the test where src is not
// a local address (127.0.0.2 and up are on Linux, not on every system). A
// connection refused at once may fail its dial already (a reset): the
// error is then health's.
func dialFrom(t *testing.T, src, addr string) dialed {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("dial from %s: %v (not a local address here)", src, err)
	}
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return dialed{c, err}
}

type dialed struct {
	net.Conn
	err error
}

// health asks GET /health on c and returns the status, or the error of a
// connection the server closed.
func health(c dialed) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("GET /health HTTP/1.1\r\nHost: queen\r\n\r\n")); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// series reads one series of ms (0 when absent).
func series(t *testing.T, ms *metrics.Set, name string) float64 {
	t.Helper()
	var b bytes.Buffer
	ms.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Past MaxConnsPerIP a client's next connection is closed at once, and
// past MaxConns anyone's is; each is counted by its reason. A place given
// back admits the next connection.
func TestServer_MaxConns(t *testing.T) {
	t.Parallel()
	addr, ms := startCounted(t, server.Options{MaxConns: 4, MaxConnsPerIP: 2})
	held := func(src string) dialed {
		t.Helper()
		c := dialFrom(t, src, addr)
		if status, err := health(c); err != nil || status != 200 {
			t.Fatalf("connection from %s: %d, %v; want 200", src, status, err)
		}
		return c
	}
	refused := func(src, reason string, want float64) {
		t.Helper()
		if status, err := health(dialFrom(t, src, addr)); err == nil {
			t.Fatalf("connection from %s past the cap answered %d, want it closed", src, status)
		}
		name := fmt.Sprintf(`queen_http_conns_refused_total{reason=%q}`, reason)
		if got := series(t, ms, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	held("127.0.0.2")
	held("127.0.0.2")
	refused("127.0.0.2", "max_conns_per_ip", 1)
	b := held("127.0.0.3")
	held("127.0.0.3")
	refused("127.0.0.1", "max_conns", 1)
	if got := series(t, ms, "queen_http_conns_open"); got != 4 {
		t.Errorf("queen_http_conns_open = %v, want 4", got)
	}
	b.Close()
	waitUntil(t, "a closed connection gives its place back", func() bool { return series(t, ms, "queen_http_conns_open") == 3 })
	held("127.0.0.1")
}

// Connections that send nothing end at ReadTimeout and idle keep-alive
// ones at IdleTimeout, which gives their places back: a flood of idle
// connections holds the server only for that long.
func TestServer_IdleConnsTimeOut(t *testing.T) {
	t.Parallel()
	addr, ms := startCounted(t, server.Options{MaxConns: 2, MaxConnsPerIP: 2,
		ReadTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	silent := dialFrom(t, "127.0.0.1", addr)
	idle := dialFrom(t, "127.0.0.1", addr)
	if status, err := health(idle); err != nil || status != 200 {
		t.Fatalf("first request: %d, %v", status, err)
	}
	if _, err := health(dialFrom(t, "127.0.0.1", addr)); err == nil {
		t.Fatal("a third connection was served, want it closed: the cap is 2")
	}
	if silent.err != nil {
		t.Fatal(silent.err)
	}
	for name, c := range map[string]dialed{"silent": silent, "idle keep-alive": idle} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The server may answer 408 before it closes: read to the end.
		if _, err := io.Copy(io.Discard, c); isTimeout(err) {
			t.Errorf("%s connection: still open after 10 s; want it closed by the server", name)
		}
	}
	waitUntil(t, "timed-out connections give their places back", func() bool { return series(t, ms, "queen_http_conns_open") == 0 })
	if status, err := health(dialFrom(t, "127.0.0.1", addr)); err != nil || status != 200 {
		t.Errorf("after the timeouts: %d, %v; want 200", status, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
