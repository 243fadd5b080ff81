package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine/segment"
)

// segmentInput hands out the bytes of a fuzz input; once they run out it gives
// zeros, so every input builds some set of frames.
type segmentInput []byte

func (in *segmentInput) byte() byte {
	if len(*in) == 0 {
		return 0
	}
	b := (*in)[0]
	*in = (*in)[1:]
	return b
}

// bytes returns up to n bytes, or nil for none (the form Decode returns).
func (in *segmentInput) bytes(n int) []byte {
	n = min(n, len(*in))
	if n == 0 {
		return nil
	}
	b := (*in)[:n:n]
	*in = (*in)[n:]
	return b
}

// segmentFrames builds between 1 and 64 frames from data. A control byte per frame
// picks the optional fields, the sealed bit and whether the payload is
// repeated (so that zstd has something to compress).
func segmentFrames(data []byte) []segment.Frame {
	in := segmentInput(data)
	var frames []segment.Frame
	for len(frames) == 0 || (len(in) > 0 && len(frames) < 64) {
		ctl := in.byte()
		var f segment.Frame
		copy(f.MessageID[:], in.bytes(16))
		f.TransactionID = in.bytes(int(in.byte() % 48))
		if ctl&1 != 0 {
			f.HasTrace = true
			copy(f.TraceID[:], in.bytes(16))
		}
		if ctl&2 != 0 {
			f.ProducerSub = in.bytes(1 + int(in.byte()%32))
		}
		f.Sealed = ctl&0x40 != 0
		f.Payload = in.bytes(int(binary.LittleEndian.Uint16([]byte{in.byte(), in.byte()}) % 4096))
		if ctl&4 != 0 && len(f.Payload) > 0 {
			f.Payload = bytes.Repeat(f.Payload, 2+int(ctl>>3)%8)
		}
		frames = append(frames, f)
	}
	return frames
}

// checkSegment checks seg against the header fields and frames it was
// encoded from.
func checkSegment(t *testing.T, seg *segment.Segment, codec segment.Codec, base, createdAt int64, want []segment.Frame) {
	t.Helper()
	h := seg.Header
	if h.Version != 1 || h.Codec != codec || h.Base != base || h.Count != uint32(len(want)) || h.CreatedAt != createdAt {
		t.Fatalf("header = %+v, want codec %v, base %d, count %d, createdAt %d", h, codec, base, len(want), createdAt)
	}
	if h.Last() != base+int64(len(want))-1 {
		t.Fatalf("Last() = %d, want %d", h.Last(), base+int64(len(want))-1)
	}
	if len(seg.Frames) != len(want) {
		t.Fatalf("%d frames, want %d", len(seg.Frames), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(seg.Frames[i], want[i]) {
			t.Fatalf("frame %d = %+v, want %+v", i, seg.Frames[i], want[i])
		}
	}
}

// FuzzSegmentRoundTrip checks decode(encode(frames)) == frames for frames,
// offsets and codecs built from the input, and that Encode refuses exactly
// the invalid bases.
func FuzzSegmentRoundTrip(f *testing.F) {
	f.Add(int64(0), int64(0), uint8(0), []byte{})
	f.Add(int64(1000), int64(1_754_000_000_000_000), uint8(1), []byte("\x07message-id-0001\x05txn-1trace-id-0000001\x04sub1\x10\x00{\"order\":12345}"))
	f.Add(int64(math.MaxInt64), int64(-1), uint8(2), bytes.Repeat([]byte("\x04abcdefgh"), 40))
	f.Add(int64(-1), int64(0), uint8(0), []byte("x"))
	f.Fuzz(func(t *testing.T, base, createdAt int64, mode uint8, data []byte) {
		frames := segmentFrames(data)
		var (
			enc []byte
			err error
		)
		switch mode % 3 {
		case 0:
			enc, err = segment.Encode(nil, base, createdAt, frames)
		case 1:
			enc, err = segment.EncodeCodec(nil, segment.CodecNone, base, createdAt, frames)
		case 2:
			enc, err = segment.EncodeCodec(nil, segment.CodecZstd, base, createdAt, frames)
		}
		valid := base >= 0 && base <= math.MaxInt64-int64(len(frames)-1)
		if !valid {
			if !errors.Is(err, segment.ErrInvalid) {
				t.Fatalf("Encode with base %d and %d frames = %v, want ErrInvalid", base, len(frames), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		h, err := segment.ReadHeader(enc)
		if err != nil {
			t.Fatalf("ReadHeader: %v", err)
		}
		codec := h.Codec
		switch {
		case mode%3 == 1 && codec != segment.CodecNone, mode%3 == 2 && codec != segment.CodecZstd:
			t.Fatalf("codec = %v, forced mode %d", codec, mode%3)
		case mode%3 == 0 && codec == segment.CodecZstd && len(enc)-34 >= int(h.RawLen):
			t.Fatalf("Encode chose zstd for a body of %d bytes over %d raw bytes", len(enc)-34, h.RawLen)
		}
		seg, err := segment.Decode(enc)
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if seg.Header != h {
			t.Fatalf("Decode header %+v, ReadHeader %+v", seg.Header, h)
		}
		checkSegment(t, seg, codec, base, createdAt, frames)
	})
}

// FuzzSegmentDecode checks that Decode of arbitrary bytes either fails with
// ErrCorrupt or returns a segment that survives re-encoding: the same frames,
// and for codec none the very same bytes (the raw encoding is canonical).
// With fixCRC the trailing CRC is recomputed first, so the fuzzer gets past
// it to the field, zstd and frame checks.
func FuzzSegmentDecode(f *testing.F) {
	for _, codec := range []segment.Codec{segment.CodecNone, segment.CodecZstd} {
		frames := []segment.Frame{
			{MessageID: [16]byte{1}, TransactionID: []byte("txn-1"), Payload: []byte(`{"orderId":1,"amount":9.5}`)},
			{MessageID: [16]byte{2}, TransactionID: []byte("txn-2"), TraceID: [16]byte{3}, HasTrace: true, ProducerSub: []byte("sub"), Payload: []byte(`{"orderId":2,"amount":9.5}`)},
			{MessageID: [16]byte{4}, TransactionID: []byte("txn-3"), Payload: []byte(`{"encrypted":"","iv":"","authTag":""}`), Sealed: true},
		}
		enc, err := segment.EncodeCodec(nil, codec, 10, 1_754_000_000_000_000, frames)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc, false)
		f.Add(enc, true)
		f.Add(enc[:len(enc)-1], true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte("QSEG"), true)
	f.Add(append([]byte("QSEG\x01\x00"), make([]byte, 60)...), true)
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, src []byte, fixCRC bool) {
		if fixCRC && len(src) >= 4 {
			src = bytes.Clone(src) // the fuzzing engine owns its input
			n := len(src) - 4
			binary.BigEndian.PutUint32(src[n:], crc32.Checksum(src[:n], castagnoli))
		}
		h, headerErr := segment.ReadHeader(src)
		seg, err := segment.Decode(src)
		if err != nil {
			if !errors.Is(err, segment.ErrCorrupt) {
				t.Fatalf("Decode error %v does not wrap ErrCorrupt", err)
			}
			if headerErr != nil && !errors.Is(headerErr, segment.ErrCorrupt) {
				t.Fatalf("ReadHeader error %v does not wrap ErrCorrupt", headerErr)
			}
			return
		}
		if headerErr != nil || h != seg.Header {
			t.Fatalf("Decode succeeded with header %+v; ReadHeader = %+v, %v", seg.Header, h, headerErr)
		}
		h = seg.Header
		enc, err := segment.EncodeCodec(nil, h.Codec, h.Base, h.CreatedAt, seg.Frames)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if h.Codec == segment.CodecNone && !bytes.Equal(enc, src) {
			t.Fatalf("codec none re-encodes differently\nsrc %x\nenc %x", src, enc)
		}
		again, err := segment.Decode(enc)
		if err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		checkSegment(t, again, h.Codec, h.Base, h.CreatedAt, seg.Frames)
		if again.Header.RawLen != h.RawLen {
			t.Fatalf("re-encoded rawLen %d, want %d", again.Header.RawLen, h.RawLen)
		}
	})
}
