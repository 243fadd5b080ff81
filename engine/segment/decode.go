package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"

	"github.com/klauspost/compress/zstd"
)

// ReadHeader validates magic, version, codec, lengths and the CRC, and returns
// the header without decompressing the body. Any error wraps ErrCorrupt.
func ReadHeader(src []byte) (Header, error) {
	h, _, err := readHeader(src)
	return h, err
}

// Decode decodes and validates src. The Frames of the result alias one buffer
// owned by the Segment and never alias src, so src may be reused after Decode
// returns. Any error wraps ErrCorrupt.
func Decode(src []byte) (*Segment, error) {
	h, body, err := readHeader(src)
	if err != nil {
		return nil, err
	}
	var raw []byte
	switch h.Codec {
	case CodecNone:
		raw = make([]byte, len(body))
		copy(raw, body)
	case CodecZstd:
		raw, err = decoder().DecodeAll(body, make([]byte, 0, h.RawLen))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrCorrupt, err)
		}
		if len(raw) != int(h.RawLen) {
			return nil, fmt.Errorf("%w: rawLen mismatch: zstd body holds %d bytes, header says %d", ErrCorrupt, len(raw), h.RawLen)
		}
	}
	frames, err := parseFrames(raw, h.Count)
	if err != nil {
		return nil, err
	}
	return &Segment{Header: h, Frames: frames}, nil
}

// readHeader returns the validated header and the body of src.
func readHeader(src []byte) (Header, []byte, error) {
	if len(src) < headerLen+crcLen {
		return Header{}, nil, fmt.Errorf("%w: truncated header: %d bytes", ErrCorrupt, len(src))
	}
	if string(src[:offVersion]) != magic {
		return Header{}, nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, src[:offVersion])
	}
	if v := src[offVersion]; v != version {
		return Header{}, nil, fmt.Errorf("%w: unknown version %d", ErrCorrupt, v)
	}
	end := len(src) - crcLen
	if got, want := crc32.Checksum(src[:end], castagnoli), binary.BigEndian.Uint32(src[end:]); got != want {
		return Header{}, nil, fmt.Errorf("%w: crc mismatch: computed %08x, stored %08x", ErrCorrupt, got, want)
	}
	h := Header{
		Version:   src[offVersion],
		Codec:     Codec(src[offCodec]),
		Base:      int64(binary.BigEndian.Uint64(src[offBase:])),
		Count:     binary.BigEndian.Uint32(src[offCount:]),
		CreatedAt: int64(binary.BigEndian.Uint64(src[offCreatedAt:])),
		RawLen:    binary.BigEndian.Uint32(src[offRawLen:]),
	}
	body := src[headerLen:end]
	switch {
	case h.Codec != CodecNone && h.Codec != CodecZstd:
		return Header{}, nil, fmt.Errorf("%w: unknown codec %d", ErrCorrupt, h.Codec)
	case h.Base < 0:
		return Header{}, nil, fmt.Errorf("%w: negative base %d", ErrCorrupt, h.Base)
	case h.Count == 0:
		return Header{}, nil, fmt.Errorf("%w: zero count", ErrCorrupt)
	case h.Base > math.MaxInt64-int64(h.Count-1):
		return Header{}, nil, fmt.Errorf("%w: base %d + count %d overflows", ErrCorrupt, h.Base, h.Count)
	case h.RawLen > MaxRawLen:
		return Header{}, nil, fmt.Errorf("%w: rawLen %d exceeds %d", ErrCorrupt, h.RawLen, MaxRawLen)
	case uint64(h.Count)*minFrameLen > uint64(h.RawLen):
		return Header{}, nil, fmt.Errorf("%w: count %d too large for rawLen %d", ErrCorrupt, h.Count, h.RawLen)
	case h.Codec == CodecNone && len(body) != int(h.RawLen):
		return Header{}, nil, fmt.Errorf("%w: rawLen mismatch: body is %d bytes, header says %d", ErrCorrupt, len(body), h.RawLen)
	case h.Codec == CodecZstd && uint64(h.RawLen) > uint64(len(body))*maxZstdExpansion:
		return Header{}, nil, fmt.Errorf("%w: rawLen mismatch: %d zstd bytes cannot hold %d", ErrCorrupt, len(body), h.RawLen)
	}
	if h.Codec == CodecZstd {
		var zh zstd.Header
		if err := zh.Decode(body); err != nil {
			return Header{}, nil, fmt.Errorf("%w: zstd header: %w", ErrCorrupt, err)
		}
		if zh.Skippable || zh.DictionaryID != 0 || !zh.HasFCS || zh.FrameContentSize != uint64(h.RawLen) {
			return Header{}, nil, fmt.Errorf("%w: rawLen mismatch: zstd header does not declare %d bytes", ErrCorrupt, h.RawLen)
		}
	}
	return h, body, nil
}

// parseFrames splits raw into count frames whose slices alias raw.
func parseFrames(raw []byte, count uint32) ([]Frame, error) {
	frames := make([]Frame, count)
	r := reader{buf: raw}
	for i := range frames {
		if r.off == len(raw) {
			return nil, fmt.Errorf("%w: count mismatch: %d frames, header says %d", ErrCorrupt, i, count)
		}
		if err := r.frame(&frames[i]); err != nil {
			return nil, fmt.Errorf("%w: frame %d: %v", ErrCorrupt, i, err)
		}
	}
	if r.off != len(raw) {
		return nil, fmt.Errorf("%w: trailing bytes: %d after %d frames", ErrCorrupt, len(raw)-r.off, count)
	}
	return frames, nil
}

// reader walks the raw frames.
type reader struct {
	buf []byte
	off int
}

// frame reads one frame into f.
func (r *reader) frame(f *Frame) error {
	var err error
	if f.TransactionID, err = r.bytes("transaction id"); err != nil {
		return err
	}
	id, err := r.take(16, "message id")
	if err != nil {
		return err
	}
	f.MessageID = [16]byte(id)
	flags, err := r.take(1, "flags")
	if err != nil {
		return err
	}
	if extra := flags[0] &^ flagsKnown; extra != 0 {
		return fmt.Errorf("unknown flags %#x", extra)
	}
	f.Sealed = flags[0]&flagSealed != 0
	if flags[0]&flagTrace != 0 {
		trace, err := r.take(16, "trace id")
		if err != nil {
			return err
		}
		f.TraceID, f.HasTrace = [16]byte(trace), true
	}
	if flags[0]&flagSub != 0 {
		if f.ProducerSub, err = r.bytes("producer sub"); err != nil {
			return err
		}
		if f.ProducerSub == nil {
			return fmt.Errorf("empty producer sub")
		}
	}
	f.Payload, err = r.bytes("payload")
	return err
}

// bytes reads a uvarint length and that many bytes; nil when the length is 0.
func (r *reader) bytes(field string) ([]byte, error) {
	n, w := binary.Uvarint(r.buf[r.off:])
	if w <= 0 || w != uvarintLen(n) {
		return nil, fmt.Errorf("bad %s length", field)
	}
	r.off += w
	if n > uint64(len(r.buf)-r.off) {
		return nil, fmt.Errorf("%s length %d runs past the end", field, n)
	}
	if n == 0 {
		return nil, nil
	}
	return r.take(int(n), field)
}

// take reads n bytes, capped so that appending to them cannot overwrite the
// bytes after them.
func (r *reader) take(n int, field string) ([]byte, error) {
	if n > len(r.buf)-r.off {
		return nil, fmt.Errorf("%s runs past the end", field)
	}
	b := r.buf[r.off : r.off+n : r.off+n]
	r.off += n
	return b, nil
}

// uvarintLen returns the length of the shortest uvarint encoding of v.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }
