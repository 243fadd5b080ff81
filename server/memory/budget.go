package memory

import (
	"io"
	"sync/atomic"
)

// What a request costs once decoded, in bytes of memory at its peak,
// charged to the budget instead of its body's length alone (ARCHITECTURE.md
// "Memory"; measured with 60 MiB pushes, cmd/queen/memory_linux_test.go).
const (
	// BodyCost: bytes per byte of body. A push's body is held while its
	// payloads are framed and compressed (PushCmd.Prepare), encoded into
	// its Raft log entry, written in Pebble batches to the Raft log and to
	// the engine, and flushed by Pebble; each is about one more copy.
	BodyCost = 4
	// PushItemCost: bytes per pushed item on top of its bytes: the decoded
	// item, its prepared frame and index entries, its result, and about
	// 230 bytes of answer.
	PushItemCost = 1 << 10
)

// Budget counts the memory requests cost at once (their charge)
// against a limit.
type Budget struct {
	limit int64
	held  atomic.Int64
}

// NewBudget returns a budget of limit bytes, none held.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Held is the bytes charged now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Charge is what a request that costs n bytes is charged: n, or the whole
// limit when n is more. Such a request waits for the budget to be empty
// and then runs alone, so that every body under the server's MaxBodyBytes can
// be served; memory is then bounded by the largest request, not the limit.
func (b *Budget) Charge(n int64) int64 { return min(n, b.limit) }

// Grow raises a request's charge from held to what it costs, cost bytes
// (Charge applies), and returns the new charge; false (charging nothing
// more) when the budget cannot hold it.
func (b *Budget) Grow(held, cost int64) (int64, bool) {
	more := b.Charge(cost) - held
	if more <= 0 {
		return held, true
	}
	if !b.Acquire(more) {
		return held, false
	}
	return held + more, true
}

// Acquire reserves n bytes, or reports false (reserving nothing) when they
// would take the total past the limit.
func (b *Budget) Acquire(n int64) bool {
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

// Release returns n bytes.
func (b *Budget) Release(n int64) { b.held.Add(-n) }

// firstChunk is the first buffer a body of unknown length (chunked) is
// read into; it doubles as the body grows.
const firstChunk = 64 << 10

// ReadBody reads a body of size bytes (-1: undeclared, chunked) from r
// under the budget, into a buffer of its own, and returns it with the bytes
// charged (BodyCost times its length, at most the limit), which the caller
// releases once the request is answered. A body over maxBody bytes is
// ErrTooLarge; one the budget cannot hold is ErrOverloaded, before any of
// it is read when its size is declared. Read errors are returned as they
// came. On error nothing stays charged.
func (b *Budget) ReadBody(r io.Reader, size, maxBody int64) ([]byte, int64, error) {
	if size < 0 {
		return b.readChunked(r, maxBody)
	}
	if size > maxBody {
		return nil, 0, ErrTooLarge
	}
	held := b.Charge(BodyCost * size)
	if !b.Acquire(held) {
		return nil, 0, ErrOverloaded
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		b.Release(held)
		return nil, 0, err
	}
	return body, held, nil
}

// readChunked reads a body of undeclared length, reserving each larger
// buffer before it is made and the rest of its charge once it is read.
func (b *Budget) readChunked(r io.Reader, limit int64) (body []byte, held int64, err error) {
	defer func() {
		if err != nil {
			b.Release(held)
			body, held = nil, 0
		}
	}()
	for {
		if len(body) == cap(body) {
			// One byte past the limit tells a body that is too large.
			grow := min(max(int64(cap(body)), firstChunk), limit+1-int64(cap(body)))
			if !b.Acquire(grow) {
				return body, held, ErrOverloaded
			}
			held += grow
			next := make([]byte, len(body), int64(cap(body))+grow)
			copy(next, body)
			body = next
		}
		n, rerr := r.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if int64(len(body)) > limit {
			return body, held, ErrTooLarge
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return body, held, rerr
		}
	}
	var ok bool
	if held, ok = b.Grow(held, BodyCost*int64(len(body))); !ok {
		return body, held, ErrOverloaded
	}
	return body, held, nil
}
