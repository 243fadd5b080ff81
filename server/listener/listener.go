package listener

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// DefaultMaxConns is the server's MaxConns default: half the descriptors the
// process may hold (fds, RLIMIT_NOFILE's soft limit, which the Go runtime
// raised to the hard limit at start; 8,192 when unknown). The other half is
// the node's own: each Raft group has two Pebble stores, each holding its
// sstables, blob files, WAL and manifest open (up to 1,000 tables apiece by
// Pebble's default), the Raft transport keeps three pooled connections per
// peer and group plus its handshakes in progress, and snapshots, the spool
// and the outgoing relays open more. A store that cannot open a file
// fails, which stops the node: the clients' connections must run out
// first. With 1,024 descriptors that is 512 connections.
func DefaultMaxConns(fds uint64) int {
	if fds == 0 {
		fds = 16 << 10
	}
	return max(int(min(fds, 1<<24)/2), 1)
}

// DefaultMaxConnsPerIP is the server's MaxConnsPerIP default: half of
// maxConns, so that no one client address can take every place and lock
// the others (and /health's probes) out. Behind a proxy every client has
// the proxy's address: raise it to MaxConns there.
func DefaultMaxConnsPerIP(maxConns int) int { return max(maxConns/2, 1) }

// Accept back-off bounds (net/http's).
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
	// refusedWarnEvery is how often refusals are logged at warning level.
	refusedWarnEvery = 10 * time.Second
)

// Limiter counts the HTTP connections open, per client IP and in all,
// across every listener the server serves.
type Limiter struct {
	max, maxPerIP int
	log           *slog.Logger

	mu    sync.Mutex
	open  int
	perIP map[netip.Addr]int

	acceptErrors   *metrics.Counter
	refusedMax     *metrics.Counter
	refusedPerIP   *metrics.Counter
	lastRefusedLog atomic.Int64 // unix nanoseconds of the last warning
}

// NewLimiter returns a limiter of max connections in all and maxPerIP from
// one client IP, which logs to log and counts in ms
// (queen_http_conns_open, queen_http_accept_errors_total,
// queen_http_conns_refused_total{reason}).
func NewLimiter(max, maxPerIP int, log *slog.Logger, ms *metrics.Set) *Limiter {
	l := &Limiter{max: max, maxPerIP: maxPerIP, log: log, perIP: map[netip.Addr]int{},
		acceptErrors: ms.GetOrCreateCounter(`queen_http_accept_errors_total`),
		refusedMax:   ms.GetOrCreateCounter(`queen_http_conns_refused_total{reason="max_conns"}`),
		refusedPerIP: ms.GetOrCreateCounter(`queen_http_conns_refused_total{reason="max_conns_per_ip"}`),
	}
	ms.GetOrCreateGauge(`queen_http_conns_open`, func() float64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return float64(l.open)
	})
	return l
}

// Open is the number of connections open.
func (l *Limiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Listen wraps ln: its connections are admitted under the caps, and its
// accept errors that pass are retried.
func (l *Limiter) Listen(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, limits: l, closed: make(chan struct{})}
}

// admit takes a place for a connection from ip (invalid: not an IP
// connection, counted in all only), or names the cap that refuses it.
func (l *Limiter) admit(ip netip.Addr) (refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.max {
		return "max_conns"
	}
	if ip.IsValid() {
		if l.perIP[ip] >= l.maxPerIP {
			return "max_conns_per_ip"
		}
		l.perIP[ip]++
	}
	l.open++
	return ""
}

// release gives back the place admit took.
func (l *Limiter) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if ip.IsValid() {
		if l.perIP[ip]--; l.perIP[ip] <= 0 {
			delete(l.perIP, ip)
		}
	}
}

// refused counts a refusal and logs it, at warning level at most once
// every refusedWarnEvery.
func (l *Limiter) refused(reason string, remote net.Addr) {
	if reason == "max_conns" {
		l.refusedMax.Inc()
	} else {
		l.refusedPerIP.Inc()
	}
	now := time.Now().UnixNano()
	last := l.lastRefusedLog.Load()
	level := slog.LevelDebug
	if now-last >= int64(refusedWarnEvery) && l.lastRefusedLog.CompareAndSwap(last, now) {
		level = slog.LevelWarn
	}
	l.log.Log(context.Background(), level, "http: refused a connection", "reason", reason, "remote", remote.String(),
		"max_conns", l.max, "max_conns_per_ip", l.maxPerIP)
}

// limitListener is one listener under a Limiter.
type limitListener struct {
	net.Listener
	limits    *Limiter
	closed    chan struct{}
	closeOnce sync.Once
}

// Accept returns the next connection within the caps. It retries the
// accept errors a node outlives (retryable) and returns any other.
func (ln *limitListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := ln.Listener.Accept()
		if err != nil {
			if !retryable(err) {
				return nil, err
			}
			ln.limits.acceptErrors.Inc()
			delay = min(max(2*delay, acceptDelayMin), acceptDelayMax)
			ln.limits.log.Warn("http: accept", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
				continue
			case <-ln.closed:
				return nil, net.ErrClosed
			}
		}
		delay = 0
		ip := remoteIP(c)
		if reason := ln.limits.admit(ip); reason != "" {
			if tc, ok := c.(*net.TCPConn); ok {
				// A reset: the client learns at once, and no TIME_WAIT
				// stays behind on this side.
				tc.SetLinger(0)
			}
			// Counted before the close: a client that sees its
			// connection closed finds the refusal counted.
			ln.limits.refused(reason, c.RemoteAddr())
			c.Close()
			continue
		}
		return &limitConn{Conn: c, release: func() { ln.limits.release(ip) }}, nil
	}
}

// Close closes the listener and ends a back-off in progress.
func (ln *limitListener) Close() error {
	ln.closeOnce.Do(func() { close(ln.closed) })
	return ln.Listener.Close()
}

// retryable reports whether an accept error passes: the process or the
// system is out of descriptors or buffers for now, or the error says it is
// temporary. A closed listener, or anything else, is not.
func retryable(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var te interface{ Temporary() bool }
	return errors.As(err, &te) && te.Temporary()
}

// remoteIP is c's client IP, or the zero Addr when c is not over IP.
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// limitConn gives its place back when closed. It passes on CloseWrite and
// SyscallConn, which the server uses on the plain TCP connection
// (the server's lingerUnread, and PeerClosed).
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
