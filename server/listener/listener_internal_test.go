package listener

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// erringListener's Accept returns its errors in turn, then a connection.
type erringListener struct {
	errs   []error
	conn   net.Conn
	closed chan struct{}
}

func (l *erringListener) Accept() (net.Conn, error) {
	if len(l.errs) > 0 {
		err := l.errs[0]
		l.errs = l.errs[1:]
		return nil, err
	}
	if l.conn != nil {
		c := l.conn
		l.conn = nil
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *erringListener) Close() error   { close(l.closed); return nil }
func (l *erringListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// Out of descriptors, accept fails: the listener backs off and retries, and
// counts each failure, instead of handing fasthttp an error that ends
// Serve.
func TestLimitListener_Accept_RetriesOutOfDescriptors(t *testing.T) {
	ms := metrics.NewSet()
	limits := NewLimiter(10, 10, slog.New(slog.DiscardHandler), ms)
	client, server := net.Pipe()
	defer client.Close()
	inner := &erringListener{errs: []error{acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE), acceptErr(syscall.EMFILE)},
		conn: server, closed: make(chan struct{})}
	ln := limits.Listen(inner)
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept: %v, want the connection after the errors", err)
	}
	if got, want := limits.acceptErrors.Get(), uint64(3); got != want {
		t.Errorf("queen_http_accept_errors_total = %d, want %d", got, want)
	}
	if got := limits.Open(); got != 1 {
		t.Errorf("open = %d, want 1", got)
	}
	c.Close()
	c.Close() // a second Close gives nothing back twice
	if got := limits.Open(); got != 0 {
		t.Errorf("open after Close = %d, want 0", got)
	}
}

// Any other accept error is returned: Serve stops and the node exits
// non-zero. Close during a back-off returns at once.
func TestLimitListener_Accept_ReturnsOtherErrors(t *testing.T) {
	limits := NewLimiter(10, 10, slog.New(slog.DiscardHandler), metrics.NewSet())
	bad := acceptErr(syscall.EBADF)
	ln := limits.Listen(&erringListener{errs: []error{bad}, closed: make(chan struct{})})
	if _, err := ln.Accept(); !errors.Is(err, syscall.EBADF) {
		t.Errorf("Accept = %v, want EBADF", err)
	}

	many := make([]error, 100) // 100 back-offs: longer than the test waits
	for i := range many {
		many[i] = acceptErr(syscall.EMFILE)
	}
	ln = limits.Listen(&erringListener{errs: many, closed: make(chan struct{})})
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond) // into the back-off; no outcome depends on it
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still backing off 10 s after Close")
	}
}

func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{acceptErr(syscall.EMFILE), true},
		{acceptErr(syscall.ENFILE), true},
		{acceptErr(syscall.ENOBUFS), true},
		{acceptErr(syscall.ENOMEM), true},
		{acceptErr(syscall.ECONNABORTED), true},
		{acceptErr(syscall.EBADF), false},
		{acceptErr(syscall.EINVAL), false},
		{fmt.Errorf("accept: %w", net.ErrClosed), false},
		{errors.New("something else"), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestDefaultMaxConns(t *testing.T) {
	for _, c := range []struct {
		fds         uint64
		want, perIP int
	}{
		{1024, 512, 256},
		{20000, 10000, 5000},
		{0, 8192, 4096},               // unknown
		{1<<64 - 1, 1 << 23, 1 << 22}, // RLIM_INFINITY
		{1, 1, 1},
	} {
		got := DefaultMaxConns(c.fds)
		if got != c.want {
			t.Errorf("DefaultMaxConns(%d) = %d, want %d", c.fds, got, c.want)
		}
		if p := DefaultMaxConnsPerIP(got); p != c.perIP {
			t.Errorf("DefaultMaxConnsPerIP(%d) = %d, want %d", got, p, c.perIP)
		}
	}
}
