package intake

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/memory"
)

// Take reads the request's body under the budget b and makes it the
// request's body, as a buffer of its own (ctx.PostBody returns it). It
// returns the bytes charged (memory.BodyCost times the body's length, at
// most the budget's limit), which the caller releases once the request is
// answered. A body over maxBody is memory.ErrTooLarge; one the budget
// cannot hold is memory.ErrOverloaded, before any more of it is read when
// its length is declared. Any other error is the connection's.
func Take(ctx *fasthttp.RequestCtx, b *memory.Budget, maxBody int64) (int64, error) {
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
		case n > maxBody:
			return 0, memory.ErrTooLarge
		}
		held := b.Charge(memory.BodyCost * n)
		if !b.Acquire(held) {
			return 0, memory.ErrOverloaded
		}
		req.SetBodyRaw(bytes.Clone(body))
		return held, nil
	}
	size := req.Header.ContentLength()
	if size == 0 {
		req.ResetBody() // closes the empty stream: PostBody is then empty, not a read
		return 0, nil
	}
	body, held, err := b.ReadBody(ctx.RequestBodyStream(), int64(max(size, -1)), maxBody)
	if err != nil {
		return 0, err
	}
	req.SetBodyRaw(body)
	return held, nil
}

// drainFree is how much of a refused body fasthttp discards by itself to
// keep the connection (its maxUnreadStreamBodySize); past it, fasthttp
// closes the connection at once.
const drainFree = 256 << 10

// Timeouts bound Linger: the answer's write, and the drain.
type Timeouts struct {
	Read, Write time.Duration
	// MaxDrop is the most bytes of the rest of the body dropped.
	MaxDrop int64
}

// Linger ends a request whose body was refused unread (see the package
// doc): the answer already set on ctx is written with Connection: close,
// the write side is shut, and the rest of the body is read and dropped
// (through a small buffer: nothing is held) until it ends, t.Read passes,
// t.MaxDrop more were dropped or stop is closed; only then is the
// connection closed. A body short enough for fasthttp to drop by itself
// keeps its connection instead.
func Linger(ctx *fasthttp.RequestCtx, t Timeouts, stop <-chan struct{}) {
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
		c.SetWriteDeadline(time.Now().Add(t.Write))
		w := bufio.NewWriterSize(c, 4<<10)
		if ctx.Response.Write(w) != nil || w.Flush() != nil {
			return
		}
		if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
			if cw, ok := u.UnsafeConn().(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}
		c.SetReadDeadline(time.Now().Add(t.Read))
		// Shutdown cuts the drain short. The watcher ends before the
		// handler returns: fasthttp recycles c right after.
		done, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-stop:
				c.SetReadDeadline(time.Now())
			case <-done:
			}
		}()
		io.CopyN(io.Discard, body, t.MaxDrop)
		close(done)
		<-watched
	})
}
