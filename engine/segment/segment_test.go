package segment_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/queenmq/queen/engine/segment"
)

var (
	rewrite = flag.Bool("rewrite", false, "rewrite testdata/golden from the current encoder")
	seed    = flag.Uint64("seed", 0, "seed for randomized tests (0 picks one)")
)

// raceEnabled is set by race_test.go under the race detector.
var raceEnabled bool

// codecs lists every body encoding; each suite runs over all of them.
var codecs = []segment.Codec{segment.CodecNone, segment.CodecZstd}

// id returns a 16-byte id made from s.
func id(s string) [16]byte {
	var b [16]byte
	copy(b[:], s)
	return b
}

// order returns a small, compressible JSON payload.
func order(i int) []byte {
	return fmt.Appendf(nil, `{"orderId":"ord-%06d","customer":"cust-%03d","amount":%d.%02d,"currency":"EUR","status":"paid"}`,
		i, i%97, 10+i%500, i%100)
}

// orders returns n frames with every optional field used by some of them.
func orders(n int) []segment.Frame {
	frames := make([]segment.Frame, n)
	for i := range frames {
		frames[i] = segment.Frame{
			MessageID:     id(fmt.Sprintf("msg-%012d", i)),
			TransactionID: fmt.Appendf(nil, "txn-%d", i),
			Payload:       order(i),
		}
		if i%3 == 0 {
			frames[i].TraceID, frames[i].HasTrace = id(fmt.Sprintf("trace-%010d", i)), true
		}
		if i%4 == 0 {
			frames[i].ProducerSub = fmt.Appendf(nil, "producer-%d", i%5)
		}
	}
	return frames
}

// encoding is one way to write a segment: Encode, or EncodeCodec with a codec.
type encoding struct {
	name  string
	codec *segment.Codec // nil for Encode
}

func encodings() []encoding {
	encs := []encoding{{name: "auto"}}
	for _, c := range codecs {
		encs = append(encs, encoding{name: c.String(), codec: &c})
	}
	return encs
}

func (e encoding) encode(dst []byte, base, createdAt int64, frames []segment.Frame) ([]byte, error) {
	if e.codec == nil {
		return segment.Encode(dst, base, createdAt, frames)
	}
	return segment.EncodeCodec(dst, *e.codec, base, createdAt, frames)
}

// checkRoundTrip decodes enc and checks it against what was encoded.
func checkRoundTrip(t *testing.T, enc []byte, base, createdAt int64, want []segment.Frame) *segment.Segment {
	t.Helper()
	seg, err := segment.Decode(enc)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	h := seg.Header
	if h.Version != 1 || h.Base != base || h.Count != uint32(len(want)) || h.CreatedAt != createdAt {
		t.Fatalf("header = %+v, want version 1, base %d, count %d, createdAt %d", h, base, len(want), createdAt)
	}
	if got, want := h.Last(), base+int64(len(want))-1; got != want {
		t.Fatalf("Last() = %d, want %d", got, want)
	}
	if h.Codec == segment.CodecNone && int(h.RawLen) != len(enc)-34 {
		t.Fatalf("RawLen = %d with codec none, want body length %d", h.RawLen, len(enc)-34)
	}
	if got, err := segment.ReadHeader(enc); err != nil || got != h {
		t.Fatalf("ReadHeader = %+v, %v, want %+v", got, err, h)
	}
	if len(seg.Frames) != len(want) {
		t.Fatalf("got %d frames, want %d", len(seg.Frames), len(want))
	}
	for i := range want {
		if got := seg.Frames[i]; !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("frame %d = %+v, want %+v", i, got, want[i])
		}
	}
	return seg
}

func TestSegment_Encode_RoundTrip(t *testing.T) {
	big := bytes.Repeat(order(7), 1<<20/len(order(7)))
	noise := make([]byte, 300<<10)
	rand.NewChaCha8([32]byte{1}).Read(noise)
	binaryTxn := make([]byte, 256)
	for i := range binaryTxn {
		binaryTxn[i] = byte(i)
	}
	tests := []struct {
		name      string
		base      int64
		createdAt int64
		frames    []segment.Frame
		want      []segment.Frame // nil: frames
	}{
		{name: "zero frame", frames: []segment.Frame{{}}},
		{name: "one frame", base: 42, createdAt: 1_700_000_000_000_000, frames: orders(2)[1:]},
		{name: "trace id", base: 1, frames: []segment.Frame{{MessageID: id("m"), TraceID: id("t"), HasTrace: true, Payload: []byte(`{}`)}}},
		{name: "producer sub", frames: []segment.Frame{{MessageID: id("m"), ProducerSub: []byte("sub|123"), Payload: []byte(`1`)}}},
		{name: "trace id and producer sub", frames: orders(1)},
		{name: "sealed", frames: []segment.Frame{{MessageID: id("m"), Payload: []byte(`{"encrypted":"","iv":"","authTag":""}`), Sealed: true}}},
		{name: "sealed with every field", frames: []segment.Frame{{MessageID: id("m"), TransactionID: []byte("t"), TraceID: id("t"), HasTrace: true,
			ProducerSub: []byte("sub"), Payload: []byte(`{}`), Sealed: true}, {Payload: []byte(`1`)}, {Sealed: true}}},
		{
			name:   "empty producer sub is absent",
			frames: []segment.Frame{{ProducerSub: []byte{}, TransactionID: []byte{}, Payload: []byte{}}},
			want:   []segment.Frame{{}},
		},
		{
			name:   "trace id ignored without HasTrace",
			frames: []segment.Frame{{TraceID: id("t"), Payload: []byte(`null`)}},
			want:   []segment.Frame{{Payload: []byte(`null`)}},
		},
		{name: "binary txn", frames: []segment.Frame{{TransactionID: binaryTxn, Payload: []byte(`"x"`)}}},
		{name: "utf-8 txn", frames: []segment.Frame{{TransactionID: []byte("txn-日本語-🚀"), ProducerSub: []byte("ünïcode"), Payload: []byte(`{"k":"✓"}`)}}},
		{name: "many frames", base: 1 << 40, createdAt: -5, frames: orders(5000)},
		{name: "large payload", frames: []segment.Frame{{MessageID: id("big"), Payload: big}, {Payload: []byte(`1`)}}},
		{name: "incompressible payload", frames: []segment.Frame{{Payload: noise}}},
		{name: "last offset is max int64", base: math.MaxInt64 - 2, frames: orders(3)},
		{name: "min createdAt", createdAt: math.MinInt64, frames: orders(2)},
	}
	for _, e := range encodings() {
		for _, tt := range tests {
			t.Run(e.name+"/"+tt.name, func(t *testing.T) {
				want := tt.want
				if want == nil {
					want = tt.frames
				}
				prefix := []byte("prefix")
				enc, err := e.encode(bytes.Clone(prefix), tt.base, tt.createdAt, tt.frames)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				if !bytes.HasPrefix(enc, prefix) {
					t.Fatalf("encode did not append to dst")
				}
				seg := checkRoundTrip(t, enc[len(prefix):], tt.base, tt.createdAt, want)
				if e.codec != nil && seg.Header.Codec != *e.codec {
					t.Fatalf("codec = %v, want %v", seg.Header.Codec, *e.codec)
				}
			})
		}
	}
}

func TestSegment_Encode_RoundTripRandom(t *testing.T) {
	s := *seed
	if s == 0 {
		s = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], s)
	src := rand.NewChaCha8(key)
	rng := rand.New(src)
	field := func(limit int) []byte {
		n := rng.IntN(limit + 1)
		if n == 0 {
			return nil
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(4)) + 'a' // compressible some of the time
			if rng.IntN(8) == 0 {
				b[i] = byte(rng.Uint32())
			}
		}
		return b
	}
	for iter := range 200 {
		frames := make([]segment.Frame, 1+rng.IntN(50))
		for i := range frames {
			f := &frames[i]
			src.Read(f.MessageID[:])
			f.TransactionID = field(40)
			if f.HasTrace = rng.IntN(2) == 0; f.HasTrace {
				src.Read(f.TraceID[:])
			}
			f.ProducerSub = field(20)
			f.Payload = field(3000)
			f.Sealed = rng.IntN(2) == 0
		}
		base, createdAt := rng.Int64N(1<<62), rng.Int64()
		for _, e := range encodings() {
			enc, err := e.encode(nil, base, createdAt, frames)
			if err != nil {
				t.Fatalf("iteration %d, %s: encode: %v", iter, e.name, err)
			}
			checkRoundTrip(t, enc, base, createdAt, frames)
		}
	}
}

func TestSegment_Encode_ChoosesCodec(t *testing.T) {
	noise := make([]byte, 64)
	rand.NewChaCha8([32]byte{2}).Read(noise)
	tests := []struct {
		name   string
		frames []segment.Frame
		want   segment.Codec
	}{
		{name: "compressible", frames: orders(50), want: segment.CodecZstd},
		{name: "incompressible", frames: []segment.Frame{{Payload: noise}}, want: segment.CodecNone},
		{name: "tiny", frames: []segment.Frame{{MessageID: id("0123456789abcdef"), Payload: []byte(`{}`)}}, want: segment.CodecNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := segment.Encode(nil, 0, 0, tt.frames)
			if err != nil {
				t.Fatal(err)
			}
			h, err := segment.ReadHeader(enc)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Codec; got != tt.want {
				t.Fatalf("codec = %v, want %v", got, tt.want)
			}
			if h.Codec == segment.CodecZstd && len(enc)-34 >= int(h.RawLen) {
				t.Fatalf("zstd body of %d bytes is not smaller than %d raw bytes", len(enc)-34, h.RawLen)
			}
		})
	}
}

func TestSegment_Encode_Invalid(t *testing.T) {
	tests := []struct {
		name   string
		codec  segment.Codec
		base   int64
		frames []segment.Frame
		want   string
	}{
		{name: "no frames", frames: nil, want: "no frames"},
		{name: "empty frames", frames: []segment.Frame{}, want: "no frames"},
		{name: "negative base", base: -1, frames: orders(1), want: "negative base"},
		{name: "base overflow", base: math.MaxInt64 - 1, frames: orders(3), want: "overflows"},
		{name: "unknown codec", codec: 2, frames: orders(1), want: "unknown codec"},
		{name: "raw too large", frames: slices.Repeat([]segment.Frame{{Payload: make([]byte, 1<<20)}}, 256), want: "exceed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := segment.EncodeCodec(dst, tt.codec, tt.base, 0, tt.frames)
			if !errors.Is(err, segment.ErrInvalid) || errors.Is(err, segment.ErrCorrupt) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.want)
			}
			if string(got) != "keep" {
				t.Fatalf("dst = %q after error, want it unchanged", got)
			}
		})
	}
}

// build assembles a segment by hand, following the package comment, so the
// tests check the documented layout rather than the encoder.
func build(codec segment.Codec, base int64, count uint32, createdAt int64, rawLen uint32, body []byte) []byte {
	b := []byte("QSEG")
	b = append(b, 1, byte(codec))
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	b = binary.BigEndian.AppendUint32(b, count)
	b = binary.BigEndian.AppendUint64(b, uint64(createdAt))
	b = binary.BigEndian.AppendUint32(b, rawLen)
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// raw builds one frame's raw bytes from its parts.
func raw(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSegment_Decode_HandBuilt(t *testing.T) {
	msg, trace := id("message-id-00001"), id("trace-id-0000001")
	frames := raw(
		[]byte{3}, []byte("txn"), msg[:], []byte{0}, []byte{2}, []byte("{}"),
		[]byte{0}, msg[:], []byte{3}, trace[:], []byte{4}, []byte("subj"), []byte{0},
	)
	src := build(segment.CodecNone, 7, 2, 1234, uint32(len(frames)), frames)
	want := []segment.Frame{
		{MessageID: msg, TransactionID: []byte("txn"), Payload: []byte("{}")},
		{MessageID: msg, TraceID: trace, HasTrace: true, ProducerSub: []byte("subj")},
	}
	checkRoundTrip(t, src, 7, 1234, want)
	got, err := segment.EncodeCodec(nil, segment.CodecNone, 7, 1234, want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("Encode = %x\nwant     %x", got, src)
	}
}

// TestSegment_Decode_SealedFlag checks flag bit 2 on hand-built frames: it
// sets Sealed, adds no bytes, combines with the other bits, and re-encodes
// to the same bytes.
func TestSegment_Decode_SealedFlag(t *testing.T) {
	msg, trace := id("message-id-00001"), id("trace-id-0000001")
	frames := raw(
		[]byte{0}, msg[:], []byte{4}, []byte{2}, []byte("{}"),
		[]byte{1}, []byte("t"), msg[:], []byte{7}, trace[:], []byte{3}, []byte("sub"), []byte{1}, []byte("1"),
		[]byte{0}, msg[:], []byte{0}, []byte{1}, []byte("2"),
	)
	src := build(segment.CodecNone, 0, 3, 99, uint32(len(frames)), frames)
	want := []segment.Frame{
		{MessageID: msg, Payload: []byte("{}"), Sealed: true},
		{MessageID: msg, TransactionID: []byte("t"), TraceID: trace, HasTrace: true, ProducerSub: []byte("sub"), Payload: []byte("1"), Sealed: true},
		{MessageID: msg, Payload: []byte("2")},
	}
	checkRoundTrip(t, src, 0, 99, want)
	got, err := segment.EncodeCodec(nil, segment.CodecNone, 0, 99, want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatalf("Encode = %x\nwant     %x", got, src)
	}
}

func TestSegment_Decode_Corrupt(t *testing.T) {
	none, err := segment.EncodeCodec(nil, segment.CodecNone, 5, 100, orders(2))
	if err != nil {
		t.Fatal(err)
	}
	zstd, err := segment.EncodeCodec(nil, segment.CodecZstd, 5, 100, orders(40))
	if err != nil {
		t.Fatal(err)
	}
	// edit returns a copy of src changed by fn, with the CRC fixed up, so that
	// a check after the CRC is what fails.
	edit := func(src []byte, fn func(b []byte) []byte) []byte {
		b := fn(bytes.Clone(src[:len(src)-4]))
		return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	}
	setU32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
	}
	setU64 := func(off int, v uint64) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint64(b[off:], v); return b }
	}
	msg := id("m")
	frame := func(txnLen []byte, rest ...[]byte) []byte { return raw(append([][]byte{txnLen}, rest...)...) }
	oneFrame := func(body []byte) []byte { return build(segment.CodecNone, 0, 1, 0, uint32(len(body)), body) }

	tests := []struct {
		name   string
		src    []byte
		want   string
		header bool // ReadHeader fails too, not only Decode
	}{
		{name: "empty", src: nil, want: "truncated header", header: true},
		{name: "truncated header", src: none[:29], want: "truncated header", header: true},
		{name: "bad magic", src: append([]byte("QSEH"), none[4:]...), want: "bad magic", header: true},
		{name: "unknown version", src: edit(none, func(b []byte) []byte { b[4] = 2; return b }), want: "unknown version 2", header: true},
		{name: "crc mismatch", src: append(bytes.Clone(none[:40]), append([]byte{none[40] ^ 1}, none[41:]...)...), want: "crc mismatch", header: true},
		{name: "crc mismatch truncated body", src: none[:len(none)-1], want: "crc mismatch", header: true},
		{name: "crc mismatch trailing bytes", src: append(bytes.Clone(none), 0), want: "crc mismatch", header: true},
		{name: "unknown codec", src: edit(none, func(b []byte) []byte { b[5] = 2; return b }), want: "unknown codec 2", header: true},
		{name: "negative base", src: edit(none, setU64(6, math.MaxUint64)), want: "negative base", header: true},
		{name: "zero count", src: edit(none, setU32(14, 0)), want: "zero count", header: true},
		{name: "base overflow", src: edit(none, setU64(6, math.MaxInt64)), want: "overflows", header: true},
		{name: "rawLen too large", src: edit(zstd, setU32(26, segment.MaxRawLen+1)), want: "exceeds", header: true},
		{name: "count too large for rawLen", src: edit(none, setU32(14, 1<<20)), want: "too large for rawLen", header: true},
		{name: "rawLen mismatch none", src: edit(none, setU32(26, uint32(len(none)-34-1))), want: "rawLen mismatch", header: true},
		{name: "rawLen mismatch zstd header", src: edit(zstd, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[26:], binary.BigEndian.Uint32(b[26:])+1)
			return b
		}), want: "rawLen mismatch", header: true},
		{name: "rawLen mismatch zstd expansion", src: build(segment.CodecZstd, 0, 1, 0, 1<<20, []byte{0x28, 0xb5, 0x2f, 0xfd}), want: "cannot hold", header: true},
		{name: "zstd bad frame magic", src: build(segment.CodecZstd, 0, 1, 0, 19, []byte("not a zstd frame")), want: "zstd header", header: true},
		{name: "zstd truncated body", src: edit(zstd, func(b []byte) []byte { return b[:len(b)-1] }), want: "zstd"},
		{name: "count mismatch", src: edit(none, setU32(14, 3)), want: "count mismatch: 2 frames, header says 3"},
		{name: "trailing bytes", src: edit(none, setU32(14, 1)), want: "trailing bytes"},
		{name: "oversized txn length", src: oneFrame(frame([]byte{0xe8, 0x07}, make([]byte, 18))), want: "transaction id length 1000 runs past the end"},
		{name: "oversized payload length", src: oneFrame(frame([]byte{0}, msg[:], []byte{0}, binary.AppendUvarint(nil, 1<<40), []byte("{}"))), want: "payload length 1099511627776 runs past the end"},
		{name: "oversized sub length", src: oneFrame(frame([]byte{0}, msg[:], []byte{2}, []byte{9}, []byte("sub"))), want: "producer sub length 9 runs past the end"},
		{name: "varint overflow", src: oneFrame(frame(bytes.Repeat([]byte{0xff}, 11), make([]byte, 8))), want: "bad transaction id length"},
		{name: "non-minimal varint", src: oneFrame(frame([]byte{0x80, 0x00}, msg[:], []byte{0}, []byte{0})), want: "bad transaction id length"},
		{name: "truncated message id", src: oneFrame(frame([]byte{10}, make([]byte, 10), make([]byte, 8))), want: "message id runs past the end"},
		{name: "truncated trace id", src: oneFrame(frame([]byte{0}, msg[:], []byte{1}, make([]byte, 4))), want: "trace id runs past the end"},
		{name: "missing payload length", src: oneFrame(frame([]byte{2}, []byte("tx"), msg[:])), want: "flags runs past the end"},
		{name: "unknown flags", src: oneFrame(frame([]byte{0}, msg[:], []byte{8}, []byte{1}, []byte("1"))), want: "unknown flags 0x8"},
		{name: "unknown flags beside known ones", src: oneFrame(frame([]byte{0}, msg[:], []byte{0x84}, []byte{1}, []byte("1"))), want: "unknown flags 0x80"},
		{name: "empty producer sub", src: oneFrame(frame([]byte{0}, msg[:], []byte{2}, []byte{0}, []byte{1}, []byte("1"))), want: "empty producer sub"},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "-"), func(t *testing.T) {
			seg, err := segment.Decode(tt.src)
			if !errors.Is(err, segment.ErrCorrupt) {
				t.Fatalf("Decode = %v, %v; want ErrCorrupt", seg, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode error %q does not mention %q", err, tt.want)
			}
			_, err = segment.ReadHeader(tt.src)
			if got := err != nil; got != tt.header {
				t.Fatalf("ReadHeader error = %v, want an error: %v", err, tt.header)
			}
			if err != nil && !errors.Is(err, segment.ErrCorrupt) {
				t.Fatalf("ReadHeader error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

// golden lists the segments kept in testdata/golden as format fixtures.
var golden = []struct {
	name      string
	base      int64
	createdAt int64
	frames    []segment.Frame
}{
	{name: "one-frame", base: 0, createdAt: 1_700_000_000_000_000, frames: []segment.Frame{{
		MessageID: id("0123456789abcdef"), TransactionID: []byte("txn-1"), Payload: []byte(`{"hello":"world"}`),
	}}},
	{name: "all-fields", base: 1 << 33, createdAt: 1_754_000_000_123_456, frames: []segment.Frame{
		{MessageID: id("message-0000001"), TransactionID: []byte{0, 1, 0xfe, 0xff}, TraceID: id("trace-000000001"), HasTrace: true, ProducerSub: []byte("auth0|ü"), Payload: []byte(`[1,2,3]`)},
		{MessageID: id("message-0000002"), TransactionID: []byte("txn-日本"), Payload: []byte(`"s"`)},
		{MessageID: id("message-0000003")},
	}},
	{name: "orders", base: 1000, createdAt: 1_754_000_000_000_000, frames: orders(30)},
	// Flag bit 2, added to v1: sealed frames beside plain ones.
	{name: "sealed", base: 7, createdAt: 1_780_000_000_000_000, frames: []segment.Frame{
		{MessageID: id("message-0000001"), TransactionID: []byte("txn-1"), Sealed: true,
			Payload: []byte(`{"encrypted":"nToTXyGucPYGR73rP0vy8lLCNmT3lXhO9FJTtk/OTG2+GWWC","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"dOCuKXxGKbI+HLmUmIFikQ=="}`)},
		{MessageID: id("message-0000002"), TransactionID: []byte("txn-2"), TraceID: id("trace-000000002"), HasTrace: true, ProducerSub: []byte("auth0|u2"), Sealed: true,
			Payload: []byte(`{"encrypted":"","iv":"AAAAAAAAAAAAAAAAAAAAAA==","authTag":"AAAAAAAAAAAAAAAAAAAAAA=="}`)},
		{MessageID: id("message-0000003"), TransactionID: []byte("txn-3"),
			Payload: []byte(`{"encrypted":"nToTXyGucPYGR73rP0vy8lLCNmT3lXhO9FJTtk/OTG2+GWWC","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"dOCuKXxGKbI+HLmUmIFikQ=="}`)},
	}},
}

// TestSegment_Decode_Golden pins the format: the golden files must decode to their
// frames, and encoding those frames must give the same bytes. Zstd output is
// a property of the compressor, not of the format, so for zstd only the
// header is compared byte for byte. Rewrite with -rewrite after a deliberate
// format change; the files of an older version then stay as upgrade fixtures.
func TestSegment_Decode_Golden(t *testing.T) {
	for _, g := range golden {
		for _, codec := range codecs {
			name := fmt.Sprintf("%s-v1-%s.seg", g.name, codec)
			t.Run(name, func(t *testing.T) {
				path := filepath.Join("testdata", "golden", name)
				enc, err := segment.EncodeCodec(nil, codec, g.base, g.createdAt, g.frames)
				if err != nil {
					t.Fatal(err)
				}
				if *rewrite {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, enc, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run with -rewrite to create it)", err)
				}
				seg := checkRoundTrip(t, want, g.base, g.createdAt, g.frames)
				if seg.Header.Codec != codec {
					t.Fatalf("codec = %v, want %v", seg.Header.Codec, codec)
				}
				got := enc
				if codec == segment.CodecZstd {
					got, want = got[:30], want[:30]
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("encoding changed (rerun with -rewrite only if deliberate)\ngot  %x\nwant %x", got, want)
				}
			})
		}
	}
}

func TestSegment_Decode_DoesNotAliasSource(t *testing.T) {
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			frames := orders(10)
			src, err := segment.EncodeCodec(nil, codec, 0, 0, frames)
			if err != nil {
				t.Fatal(err)
			}
			seg, err := segment.Decode(src)
			if err != nil {
				t.Fatal(err)
			}
			for i := range src {
				src[i] = 0xff
			}
			if !reflect.DeepEqual(seg.Frames, frames) {
				t.Fatalf("frames changed when src was overwritten")
			}
		})
	}
}

func TestSegment_Decode_FramesAreCapped(t *testing.T) {
	src, err := segment.Encode(nil, 0, 0, orders(2))
	if err != nil {
		t.Fatal(err)
	}
	seg, err := segment.Decode(src)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(seg.Frames[0].Payload, "overwrite"...)
	if got, want := seg.Frames[1].TransactionID, []byte("txn-1"); !bytes.Equal(got, want) {
		t.Fatalf("frame 1 transaction id = %q after appending to frame 0, want %q", got, want)
	}
}

func TestSegment_Decode_Allocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			src, err := segment.EncodeCodec(nil, codec, 0, 0, orders(100))
			if err != nil {
				t.Fatal(err)
			}
			// The Segment, its Frames and one buffer for the raw frames.
			got := testing.AllocsPerRun(50, func() {
				if _, err := segment.Decode(src); err != nil {
					t.Fatal(err)
				}
			})
			if got > 3 {
				t.Fatalf("Decode allocates %v times, want at most 3", got)
			}
		})
	}
}

func TestSegment_Encode_Allocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	for _, codec := range codecs {
		t.Run(codec.String(), func(t *testing.T) {
			frames := orders(100)
			dst := make([]byte, 0, 1<<20)
			got := testing.AllocsPerRun(50, func() {
				var err error
				if dst, err = segment.EncodeCodec(dst[:0], codec, 0, 0, frames); err != nil {
					t.Fatal(err)
				}
			})
			if got != 0 {
				t.Fatalf("Encode into a large enough dst allocates %v times, want 0", got)
			}
		})
	}
}

func TestSegment_Encode_Concurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				frames := orders(1 + (g*20+i)%50)
				enc, err := segment.Encode(nil, int64(g), int64(i), frames)
				if err != nil {
					t.Error(err)
					return
				}
				seg, err := segment.Decode(enc)
				if err != nil {
					t.Error(err)
					return
				}
				if !reflect.DeepEqual(seg.Frames, frames) {
					t.Errorf("goroutine %d, iteration %d: frames differ after round trip", g, i)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestSegment_Header_Last(t *testing.T) {
	tests := []struct {
		h    segment.Header
		want int64
	}{
		{segment.Header{Base: 0, Count: 1}, 0},
		{segment.Header{Base: 10, Count: 5}, 14},
		{segment.Header{Base: math.MaxInt64, Count: 1}, math.MaxInt64},
		{segment.Header{Base: 1, Count: math.MaxUint32}, math.MaxUint32},
	}
	for _, tt := range tests {
		if got := tt.h.Last(); got != tt.want {
			t.Errorf("%+v.Last() = %d, want %d", tt.h, got, tt.want)
		}
	}
}

// TestSegment_Encode_OneZstdBlock checks that a body of up to 128 KiB (zstd's
// largest block) is compressed as one block: SpeedFastest alone cuts at
// 64 KiB, which costs a second set of entropy tables and a copy of the
// input into the encoder's history (see the encoder's comment). Small
// bodies (no literal entropy coding) and bodies past 128 KiB still round
// trip.
func TestSegment_Encode_OneZstdBlock(t *testing.T) {
	for _, tt := range []struct {
		n         int
		oneBlock  bool
		minRawLen int
	}{
		{n: 2, oneBlock: true},
		{n: 700, oneBlock: true, minRawLen: 64 << 10},
		{n: 1500, oneBlock: false, minRawLen: 128 << 10},
	} {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			frames := orders(tt.n)
			enc, err := segment.Encode(nil, 0, 0, frames)
			if err != nil {
				t.Fatal(err)
			}
			h, err := segment.ReadHeader(enc)
			if err != nil {
				t.Fatal(err)
			}
			if h.Codec != segment.CodecZstd || int(h.RawLen) < tt.minRawLen {
				t.Fatalf("codec %v, rawLen %d: want zstd of at least %d bytes", h.Codec, h.RawLen, tt.minRawLen)
			}
			body := enc[30 : len(enc)-4]
			// Frame header: magic, descriptor (single segment, no
			// dictionary), then the content size, 1, 2, 4 or 8 bytes.
			fhd := body[4]
			if fhd&0x20 == 0 || fhd&0x03 != 0 {
				t.Fatalf("frame descriptor %08b: want single segment, no dictionary", fhd)
			}
			fcs := [4]int{1, 2, 4, 8}[fhd>>6]
			bh := body[5+fcs:]
			block := int(bh[0]) | int(bh[1])<<8 | int(bh[2])<<16
			last, size := block&1 == 1, block>>3
			if got := last && 3+size == len(bh); got != tt.oneBlock {
				t.Fatalf("first block last=%v, %d of %d bytes: one block = %v, want %v", last, 3+size, len(bh), got, tt.oneBlock)
			}
			checkRoundTrip(t, enc, 0, 0, frames)
		})
	}
}
