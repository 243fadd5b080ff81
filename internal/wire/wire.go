// Package wire holds the byte primitives the project's binary formats are
// made of, and the one mark every decoding failure carries.
//
// The stored records (engine/keyspace), the replicated commands
// (raft/command), the segments (engine/segment) and the Raft log
// (raft/logstore) each document their own layout; what they share is here:
// how an integer, an id, a string or a boolean is written, and ErrCorrupt.
// It imports nothing of the project, so every format may use it.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ID is 16 raw bytes: a UUID (queue, partition, lease, message and
// dead-letter row ids).
type ID [16]byte

// ErrCorrupt is the mark of data that cannot be decoded, whichever format
// it was in: every package's own ErrCorrupt (Corrupt) matches it, so
// errors.Is(err, wire.ErrCorrupt) (engine.ErrCorrupt is the same value)
// tells corruption from every other failure, wherever it was found.
var ErrCorrupt = errors.New("corrupt")

// Corrupt returns a package's corruption sentinel: its message is
// "<pkg>: corrupt" and errors.Is matches both it and ErrCorrupt.
func Corrupt(pkg string) error { return &corruptError{msg: pkg + ": corrupt"} }

type corruptError struct{ msg string }

func (e *corruptError) Error() string        { return e.msg }
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

// Writer appends the primitives every stored record (engine/keyspace) and
// every replicated command (raft/command) is made of: big-endian
// fixed-width integers, 16-byte ids, uvarint-length-prefixed strings and
// byte strings, zigzag varints, one byte per boolean.
type Writer struct{ B []byte }

// I64 appends v as 8 bytes big-endian.
func (w *Writer) I64(v int64) { w.B = binary.BigEndian.AppendUint64(w.B, uint64(v)) }

// U32 appends v as 4 bytes big-endian.
func (w *Writer) U32(v uint32) { w.B = binary.BigEndian.AppendUint32(w.B, v) }

// U8 appends one byte.
func (w *Writer) U8(v uint8) { w.B = append(w.B, v) }

// ID appends 16 raw bytes.
func (w *Writer) ID(v ID) { w.B = append(w.B, v[:]...) }

// Uvarint appends an unsigned varint.
func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }

// Varint appends a zigzag varint.
func (w *Writer) Varint(v int64) { w.B = binary.AppendVarint(w.B, v) }

// Str appends a length-prefixed string.
func (w *Writer) Str(s string) { w.Uvarint(uint64(len(s))); w.B = append(w.B, s...) }

// Bytes appends a length-prefixed byte string.
func (w *Writer) Bytes(s []byte) { w.Uvarint(uint64(len(s))); w.B = append(w.B, s...) }

// Bool appends 1 or 0.
func (w *Writer) Bool(v bool) {
	if v {
		w.U8(1)
	} else {
		w.U8(0)
	}
}

// Reader decodes what a Writer wrote. The first failure sticks and later
// reads return zero values, so a decoder checks Done once at the end. Every
// failure wraps the sentinel given to NewReader.
type Reader struct {
	b       []byte
	err     error
	corrupt error
	what    string
}

// NewReader reads b; failures wrap corrupt and name what.
func NewReader(b []byte, corrupt error, what string) *Reader {
	return &Reader{b: b, corrupt: corrupt, what: what}
}

// Err returns the first failure.
func (r *Reader) Err() error { return r.err }

// Len returns the bytes left.
func (r *Reader) Len() int { return len(r.b) }

// Fail records a failure unless one is recorded already.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", r.corrupt, r.what, fmt.Sprintf(format, args...))
	}
}

func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.Fail("short")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// I64 reads 8 bytes big-endian.
func (r *Reader) I64() int64 {
	if v := r.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// U32 reads 4 bytes big-endian.
func (r *Reader) U32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

// ID reads 16 raw bytes.
func (r *Reader) ID() (id ID) {
	copy(id[:], r.take(16))
	return id
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a zigzag varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Count reads an element count and rejects one that cannot fit in the rest
// of the input at minSize bytes per element.
func (r *Reader) Count(minSize int) int {
	n := r.Uvarint()
	if n > uint64(len(r.b)/minSize) {
		r.Fail("count %d too large", n)
		return 0
	}
	return int(n)
}

// Bytes reads a length-prefixed byte string; it aliases the input.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if n > uint64(len(r.b)) {
		r.Fail("length %d past end", n)
		return nil
	}
	return r.take(int(n))
}

// Str reads a length-prefixed string.
func (r *Reader) Str() string { return string(r.Bytes()) }

// Bool reads a byte that must be 0 or 1.
func (r *Reader) Bool() bool {
	switch v := r.U8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.Fail("bad bool %d", v)
		return false
	}
}

// Done fails on trailing bytes and returns the first failure.
func (r *Reader) Done() error {
	if r.err == nil && len(r.b) != 0 {
		r.Fail("%d trailing bytes", len(r.b))
	}
	return r.err
}
