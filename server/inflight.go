package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/memory"
)

// The server reads request bodies itself (fasthttp's StreamRequestBody):
// fasthttp hands over the headers and at most 8 KiB of body, and takeBody
// reads the rest into a buffer of the body's exact size once the budget
// allows it. So the bytes of bodies held at once are bounded
// (Options.MaxInflightBodyBytes, package memory), a request past the bound
// is refused before its body is read, and the buffer belongs to the request
// alone: fasthttp neither recycles it nor keeps it, so handlers decode it in
// place and hand slices of it to the broker without copying, and it is
// garbage once the request is answered.

// takeBody reads the request's body under the budget and makes it the
// request's body, as a buffer of its own (ctx.PostBody returns it). It
// returns the bytes charged (memory.BodyCost times the body's length, at
// most the limit), which the caller releases once the request is answered.
// A body over Options.MaxBodyBytes is errBodyTooLarge; one the budget
// cannot hold is errOverloaded, before any more of it is read when its
// length is declared.
func (s *Server) takeBody(ctx *fasthttp.RequestCtx) (int64, error) {
	req := &ctx.Request
	if !req.IsBodyStream() {
		// Read by fasthttp already: a request built in-process (tests,
		// benchmarks), or one without a body. Copy it, so that nothing
		// handed on aliases fasthttp's recycled buffer.
		body := req.Body()
		n := int64(len(body))
		switch {
		case n == 0:
			return 0, nil
		case n > int64(s.opts.MaxBodyBytes):
			return 0, errBodyTooLarge
		}
		held := s.budget.Charge(memory.BodyCost * n)
		if !s.budget.Acquire(held) {
			return 0, errOverloaded
		}
		req.SetBodyRaw(bytes.Clone(body))
		return held, nil
	}
	size := req.Header.ContentLength()
	if size == 0 {
		req.ResetBody() // closes the empty stream: PostBody is then empty, not a read
		return 0, nil
	}
	body, held, err := s.budget.ReadBody(ctx.RequestBodyStream(), int64(max(size, -1)), int64(s.opts.MaxBodyBytes))
	switch {
	case errors.Is(err, memory.ErrTooLarge):
		return 0, errBodyTooLarge
	case errors.Is(err, memory.ErrOverloaded):
		return 0, errOverloaded
	case err != nil:
		return 0, fasthttpError(err)
	}
	req.SetBodyRaw(body)
	return held, nil
}

// drainFree is how much of a refused body fasthttp discards by itself to
// keep the connection (its maxUnreadStreamBodySize); past it, fasthttp
// closes the connection at once.
const drainFree = 256 << 10

// lingerUnread ends a request whose body was refused unread (overloaded,
// too large) the way HTTP servers close a connection with a body still
// coming: the answer is written with Connection: close, the connection's
// write side is shut, so the client reads the answer and then EOF, and the
// rest of the body is read and dropped (through a small buffer: nothing is
// held) until it ends, Options.ReadTimeout passes, MaxBodyBytes more were
// dropped or Shutdown begins; only then is the connection closed. Closing
// at once would reset it under a client still sending, and a client that
// reads its answer only after sending its whole body would see a reset,
// never the 503. A body short enough for fasthttp to drop by itself keeps
// its connection instead.
func (s *Server) lingerUnread(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	if !req.IsBodyStream() {
		return
	}
	if size := req.Header.ContentLength(); size >= 0 && size <= drainFree {
		return
	}
	body := ctx.RequestBodyStream()
	// fasthttp closes a Connection: close connection before it runs a
	// hijack handler, so the handler writes the answer itself.
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		ctx.Response.Header.SetConnectionClose()
		c.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		w := bufio.NewWriterSize(c, 4<<10)
		if ctx.Response.Write(w) != nil || w.Flush() != nil {
			return
		}
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			if cw, ok := u.UnsafeConn().(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}
		c.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout))
		// Shutdown cuts the drain short. The watcher ends before the
		// handler returns: fasthttp recycles c right after.
		done, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-s.stop:
				c.SetReadDeadline(time.Now())
			case <-done:
			}
		}()
		io.CopyN(io.Discard, body, int64(s.opts.MaxBodyBytes))
		close(done)
		<-watched
	})
}
