//go:build unix

package listener

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// PeerClosed reports whether the client has closed its end of c (or reset
// it), without consuming any byte it may have sent.
//
// fasthttp runs the handler on the connection's own goroutine and reads
// nothing while it runs, so it has no way to tell a handler that the client
// left (valyala/fasthttp#468, #874). A parked long-poll therefore peeks at the
// socket itself: a non-blocking MSG_PEEK read returns 0 bytes at EOF, an
// error such as ECONNRESET on a reset, EAGAIN while the client is still
// waiting, and data if it pipelined a request (still there: alive).
//
// Over TLS the peek looks at the socket under the TLS layer. A client that
// leaves sends a close_notify alert before its FIN, and under TLS 1.3 that
// alert is an opaque record like any request, so pending bytes do not prove
// the client is there: the socket is then asked whether the peer hung up
// (POLLRDHUP, where the platform has it).
func PeerClosed(c net.Conn) bool {
	overTLS := false
	if tc, ok := c.(*tls.Conn); ok {
		c, overTLS = tc.NetConn(), true
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == nil:
			closed = n == 0 || (overTLS && hungUp(fd))
		case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
		default:
			closed = true
		}
		return true
	})
	return closed || err != nil
}
