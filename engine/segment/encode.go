package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync"
)

// maxPooledRaw is the largest scratch buffer kept for reuse.
const maxPooledRaw = 4 << 20

// rawPool holds scratch buffers for the raw frames, zstdPool for their
// compression.
var (
	rawPool  = sync.Pool{New: func() any { return new([]byte) }}
	zstdPool = sync.Pool{New: func() any { return new([]byte) }}
)

// Encode appends the encoded segment to dst and returns it. It compresses the
// frames with zstd unless that is not smaller than the raw frames, which it
// then stores as they are. Encode is safe for concurrent use. Any error wraps
// ErrInvalid, and dst is then returned unchanged.
func Encode(dst []byte, base int64, createdAt int64, frames []Frame) ([]byte, error) {
	return encode(dst, CodecZstd, true, base, createdAt, frames)
}

// EncodeCodec is Encode with a forced codec (for tests and benchmarks).
func EncodeCodec(dst []byte, codec Codec, base int64, createdAt int64, frames []Frame) ([]byte, error) {
	if codec != CodecNone && codec != CodecZstd {
		return dst, fmt.Errorf("%w: unknown codec %d", ErrInvalid, codec)
	}
	return encode(dst, codec, false, base, createdAt, frames)
}

// encode writes a segment with codec; fallback switches a zstd body that is
// not smaller than the raw frames to CodecNone.
func encode(dst []byte, codec Codec, fallback bool, base, createdAt int64, frames []Frame) ([]byte, error) {
	if err := checkBase(base, uint32(len(frames))); err != nil {
		return dst, err
	}
	// The body goes straight after room for the header: no second buffer.
	start := len(dst)
	out, body, err := encodeBody(append(dst, make([]byte, headerLen)...), codec, fallback, frames)
	if err != nil {
		return dst, err
	}
	putHeader(out[start:], body, base, createdAt)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out[start:], castagnoli)), nil
}

func checkBase(base int64, count uint32) error {
	switch {
	case count == 0:
		return fmt.Errorf("%w: no frames", ErrInvalid)
	case base < 0:
		return fmt.Errorf("%w: negative base %d", ErrInvalid, base)
	case base > math.MaxInt64-int64(count-1):
		return fmt.Errorf("%w: base %d + %d frames overflows", ErrInvalid, base, count)
	}
	return nil
}

// putHeader writes the header of body's segment into h[:headerLen].
func putHeader(h []byte, body Body, base, createdAt int64) {
	copy(h, magic)
	h[offVersion], h[offCodec] = version, byte(body.Codec)
	binary.BigEndian.PutUint64(h[offBase:], uint64(base))
	binary.BigEndian.PutUint32(h[offCount:], body.Count)
	binary.BigEndian.PutUint64(h[offCreatedAt:], uint64(createdAt))
	binary.BigEndian.PutUint32(h[offRawLen:], body.RawLen)
}

// Body is a segment without its header: the frames, encoded and possibly
// compressed. A proposer prepares it before the partition's next offset and
// the apply time are known; Assemble adds them. Encode(base, createdAt,
// frames) and EncodeBody(frames).Assemble(base, createdAt) give the same
// bytes.
type Body struct {
	Codec  Codec
	RawLen uint32 // length of the raw frames
	Count  uint32 // number of frames
	Data   []byte // the raw frames (CodecNone) or one zstd frame of them
}

// EncodeBody encodes frames into a Body, compressing with zstd unless that is
// not smaller. It is safe for concurrent use; the result's Data is appended
// to dst.
func EncodeBody(dst []byte, frames []Frame) (Body, error) {
	_, b, err := encodeBody(dst, CodecZstd, true, frames)
	return b, err
}

// encodeBody appends the body to dst and returns the grown dst and the body
// (whose Data is the appended tail).
func encodeBody(dst []byte, codec Codec, fallback bool, frames []Frame) ([]byte, Body, error) {
	if len(frames) == 0 {
		return dst, Body{}, fmt.Errorf("%w: no frames", ErrInvalid)
	}
	var size uint64
	for i := range frames {
		size += frameLen(&frames[i])
	}
	if size > MaxRawLen {
		return dst, Body{}, fmt.Errorf("%w: %d raw bytes exceed %d", ErrInvalid, size, MaxRawLen)
	}
	scratch := rawPool.Get().(*[]byte)
	raw := slices.Grow((*scratch)[:0], int(size))
	for i := range frames {
		raw = appendFrame(raw, &frames[i])
	}
	b := Body{Codec: codec, RawLen: uint32(len(raw)), Count: uint32(len(frames))}
	start := len(dst)
	data := raw
	var zbuf *[]byte
	if codec == CodecZstd {
		// Compress into a pooled buffer and append only the result: given
		// an empty dst, EncodeAll would make one as large as raw (a push of
		// 100 KiB kept 100 KiB for 20 KiB of zstd until the entry was
		// applied) and zero it.
		zbuf = zstdPool.Get().(*[]byte)
		enc := encoder
		if len(raw) < smallBody {
			enc = smallEncoder
		}
		z := enc().EncodeAll(raw, (*zbuf)[:0])
		if !fallback || len(z) < len(raw) {
			data = z
		} else {
			b.Codec = CodecNone
		}
		*zbuf = z
	}
	dst = append(dst, data...)
	b.Data = dst[start:]
	putPooled(&rawPool, scratch, raw)
	if zbuf != nil {
		putPooled(&zstdPool, zbuf, *zbuf)
	}
	return dst, b, nil
}

// putPooled returns a scratch buffer to its pool unless it grew too large
// to keep.
func putPooled(pool *sync.Pool, scratch *[]byte, buf []byte) {
	if cap(buf) <= maxPooledRaw {
		*scratch = buf[:0]
		pool.Put(scratch)
	}
}

// Assemble appends the segment made of the body, starting at offset base and
// created at createdAt (unix µs), to dst: header, body and CRC.
func (b Body) Assemble(dst []byte, base, createdAt int64) ([]byte, error) {
	if err := checkBase(base, b.Count); err != nil {
		return dst, err
	}
	switch {
	case b.Codec != CodecNone && b.Codec != CodecZstd:
		return dst, fmt.Errorf("%w: unknown codec %d", ErrInvalid, b.Codec)
	case b.Codec == CodecNone && len(b.Data) != int(b.RawLen):
		return dst, fmt.Errorf("%w: raw body of %d bytes, rawLen %d", ErrInvalid, len(b.Data), b.RawLen)
	}
	start := len(dst)
	dst = slices.Grow(dst, headerLen+len(b.Data)+crcLen)
	dst = dst[:start+headerLen]
	putHeader(dst[start:], b, base, createdAt)
	dst = append(dst, b.Data...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli)), nil
}

// frameLen returns the encoded length of f.
func frameLen(f *Frame) uint64 {
	n := uvarintLen(uint64(len(f.TransactionID))) + len(f.TransactionID) + 16 + 1
	if f.HasTrace {
		n += 16
	}
	if len(f.ProducerSub) > 0 {
		n += uvarintLen(uint64(len(f.ProducerSub))) + len(f.ProducerSub)
	}
	n += uvarintLen(uint64(len(f.Payload))) + len(f.Payload)
	return uint64(n)
}

// appendFrame appends the raw encoding of f to b.
func appendFrame(b []byte, f *Frame) []byte {
	b = binary.AppendUvarint(b, uint64(len(f.TransactionID)))
	b = append(b, f.TransactionID...)
	b = append(b, f.MessageID[:]...)
	var flags byte
	if f.HasTrace {
		flags |= flagTrace
	}
	if len(f.ProducerSub) > 0 {
		flags |= flagSub
	}
	if f.Sealed {
		flags |= flagSealed
	}
	b = append(b, flags)
	if f.HasTrace {
		b = append(b, f.TraceID[:]...)
	}
	if len(f.ProducerSub) > 0 {
		b = binary.AppendUvarint(b, uint64(len(f.ProducerSub)))
		b = append(b, f.ProducerSub...)
	}
	b = binary.AppendUvarint(b, uint64(len(f.Payload)))
	return append(b, f.Payload...)
}
