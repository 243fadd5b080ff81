package memory_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/queenmq/queen/server/memory"
)

// TestBudget_ReadBody: a body is read into a buffer of its own and charged
// BodyCost times its length (at most the limit); a body too large or one
// the budget cannot hold is refused, a declared one before it is read; and
// a refused or failed read leaves nothing charged.
func TestBudget_ReadBody(t *testing.T) {
	const maxBody = 1 << 20
	body := bytes.Repeat([]byte("x"), 100<<10)
	for _, c := range []struct {
		name     string
		size     int64 // -1: chunked
		limit    int64
		r        io.Reader
		want     error
		wantHeld int64
		unread   bool // a refused declared body is not read
	}{
		{"declared", int64(len(body)), 1 << 30, bytes.NewReader(body), nil, memory.BodyCost * int64(len(body)), false},
		{"chunked", -1, 1 << 30, iotest.HalfReader(bytes.NewReader(body)), nil, memory.BodyCost * int64(len(body)), false},
		{"over the limit runs alone", int64(len(body)), 200 << 10, bytes.NewReader(body), nil, 200 << 10, false},
		{"declared too large", maxBody + 1, 1 << 30, strings.NewReader("never read"), memory.ErrTooLarge, 0, true},
		{"chunked too large", -1, 1 << 30, bytes.NewReader(make([]byte, maxBody+1)), memory.ErrTooLarge, 0, false},
		{"declared overloaded", 1000, 1 << 20, strings.NewReader("never read"), memory.ErrOverloaded, 0, true},
		{"chunked overloaded", -1, 1 << 20, bytes.NewReader(body), memory.ErrOverloaded, 0, false},
		{"read error", int64(len(body)), 1 << 30, iotest.TimeoutReader(iotest.OneByteReader(bytes.NewReader(body))), iotest.ErrTimeout, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := memory.NewBudget(c.limit)
			var busy int64 // another request's charge
			if c.want == memory.ErrOverloaded {
				busy = c.limit - 100
				if !b.Acquire(busy) {
					t.Fatal("Acquire refused on an empty budget")
				}
			}
			r := &countingReader{r: c.r}
			got, held, err := b.ReadBody(r, c.size, maxBody)
			if !errors.Is(err, c.want) {
				t.Fatalf("ReadBody: %v, want %v", err, c.want)
			}
			if held != c.wantHeld || b.Held()-busy != c.wantHeld {
				t.Fatalf("charged %d, budget holds %d, want %d", held, b.Held(), c.wantHeld)
			}
			if c.want == nil && !bytes.Equal(got, body) {
				t.Fatalf("read %d bytes, not the body", len(got))
			}
			if c.unread && r.n != 0 {
				t.Fatalf("read %d bytes of a body refused before reading", r.n)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
