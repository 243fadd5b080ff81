package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// The server reads request bodies itself (fasthttp's StreamRequestBody):
// fasthttp hands over the headers and at most 8 KiB of body, and takeBody
// reads the rest into a buffer of the body's exact size once the budget
// allows it. So the bytes of bodies held at once are bounded
// (Options.MaxInflightBodyBytes), a request past the bound is refused
// before its body is read, and the buffer belongs to the request alone:
// fasthttp neither recycles it nor keeps it, so handlers decode it in place
// and hand slices of it to the broker without copying, and it is garbage
// once the request is answered.

// What a request costs once decoded, in bytes of memory at its peak,
// charged to the budget instead of its body's length alone (ARCHITECTURE.md
// "Memory"; measured with 60 MiB pushes, cmd/queen/memory_linux_test.go).
const (
	// bodyCost: bytes per byte of body. A push's body is held while its
	// payloads are framed and compressed (PushCmd.Prepare), encoded into
	// its Raft log entry, written in Pebble batches to the Raft log and to
	// the engine, and flushed by Pebble; each is about one more copy.
	bodyCost = 4
	// pushItemCost: bytes per pushed item on top of its bytes: the decoded
	// item, its prepared frame and index entries, its result, and about
	// 230 bytes of answer.
	pushItemCost = 1 << 10
)

// bodyBudget counts the memory requests cost at once (their charge)
// against a limit.
type bodyBudget struct {
	limit int64
	held  atomic.Int64
}

// charge is what a request that costs n bytes is charged: n, or the whole
// limit when n is more. Such a request waits for the budget to be empty
// and then runs alone, so that every body under Options.MaxBodyBytes can
// be served; memory is then bounded by the largest request, not the limit.
func (b *bodyBudget) charge(n int64) int64 { return min(n, b.limit) }

// grow raises a request's charge from held to what it costs, cost bytes
// (charge applies), and returns the new charge; false (charging nothing
// more) when the budget cannot hold it.
func (b *bodyBudget) grow(held, cost int64) (int64, bool) {
	more := b.charge(cost) - held
	if more <= 0 {
		return held, true
	}
	if !b.acquire(more) {
		return held, false
	}
	return held + more, true
}

// acquire reserves n bytes, or reports false (reserving nothing) when they
// would take the total past the limit.
func (b *bodyBudget) acquire(n int64) bool {
	for {
		held := b.held.Load()
		if held+n > b.limit {
			return false
		}
		if b.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// release returns n bytes.
func (b *bodyBudget) release(n int64) { b.held.Add(-n) }

// firstChunk is the first buffer a body of unknown length (chunked) is
// read into; it doubles as the body grows.
const firstChunk = 64 << 10

// takeBody reads the request's body under the budget and makes it the
// request's body, as a buffer of its own (ctx.PostBody returns it). It
// returns the bytes charged (bodyCost times the body's length, at most the
// limit), which the caller releases once the request is answered. A body
// over Options.MaxBodyBytes is errBodyTooLarge; one the budget cannot hold
// is errOverloaded, before any more of it is read when its length is
// declared.
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
		held := s.budget.charge(bodyCost * n)
		if !s.budget.acquire(held) {
			return 0, errOverloaded
		}
		req.SetBodyRaw(bytes.Clone(body))
		return held, nil
	}
	r := ctx.RequestBodyStream()
	size := req.Header.ContentLength()
	if size < 0 {
		return s.takeChunked(req, r)
	}
	n := int64(size)
	switch {
	case n == 0:
		req.ResetBody() // closes the empty stream: PostBody is then empty, not a read
		return 0, nil
	case n > int64(s.opts.MaxBodyBytes):
		return 0, errBodyTooLarge
	}
	held := s.budget.charge(bodyCost * n)
	if !s.budget.acquire(held) {
		return 0, errOverloaded
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		s.budget.release(held)
		return 0, fasthttpError(err)
	}
	req.SetBodyRaw(body)
	return held, nil
}

// takeChunked reads a body of undeclared length, reserving each larger
// buffer before it is made and the rest of its charge once it is read.
func (s *Server) takeChunked(req *fasthttp.Request, r io.Reader) (held int64, err error) {
	limit := int64(s.opts.MaxBodyBytes)
	var body []byte
	defer func() {
		if err != nil {
			s.budget.release(held)
			held = 0
		}
	}()
	for {
		if len(body) == cap(body) {
			// One byte past the limit tells a body that is too large.
			grow := min(max(int64(cap(body)), firstChunk), limit+1-int64(cap(body)))
			if !s.budget.acquire(grow) {
				return held, errOverloaded
			}
			held += grow
			next := make([]byte, len(body), int64(cap(body))+grow)
			copy(next, body)
			body = next
		}
		n, rerr := r.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if int64(len(body)) > limit {
			return held, errBodyTooLarge
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return held, fasthttpError(rerr)
		}
	}
	var ok bool
	if held, ok = s.budget.grow(held, bodyCost*int64(len(body))); !ok {
		return held, errOverloaded
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
