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

// rawPool holds scratch buffers for the raw frames.
var rawPool = sync.Pool{New: func() any { return new([]byte) }}

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
	switch {
	case len(frames) == 0:
		return dst, fmt.Errorf("%w: no frames", ErrInvalid)
	case base < 0:
		return dst, fmt.Errorf("%w: negative base %d", ErrInvalid, base)
	case base > math.MaxInt64-int64(len(frames)-1):
		return dst, fmt.Errorf("%w: base %d + %d frames overflows", ErrInvalid, base, len(frames))
	}
	var size uint64
	for i := range frames {
		size += frameLen(&frames[i])
	}
	if size > MaxRawLen {
		return dst, fmt.Errorf("%w: %d raw bytes exceed %d", ErrInvalid, size, MaxRawLen)
	}

	scratch := rawPool.Get().(*[]byte)
	raw := slices.Grow((*scratch)[:0], int(size))
	for i := range frames {
		raw = appendFrame(raw, &frames[i])
	}

	start := len(dst)
	dst = append(dst, magic...)
	dst = append(dst, version, byte(codec))
	dst = binary.BigEndian.AppendUint64(dst, uint64(base))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(frames))) // MaxRawLen/minFrameLen < MaxUint32
	dst = binary.BigEndian.AppendUint64(dst, uint64(createdAt))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(raw)))
	body := len(dst)
	if codec == CodecZstd {
		dst = encoder().EncodeAll(raw, dst)
		if fallback && len(dst)-body >= len(raw) {
			dst = dst[:body]
			dst[start+offCodec] = byte(CodecNone)
			codec = CodecNone
		}
	}
	if codec == CodecNone {
		dst = append(dst, raw...)
	}
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))

	if cap(raw) <= maxPooledRaw {
		*scratch = raw[:0]
		rawPool.Put(scratch)
	}
	return dst, nil
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
