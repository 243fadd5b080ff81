package segment

import (
	"fmt"
	"hash/crc32"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Codec says how the body of a segment is stored.
type Codec uint8

// Part of the on-disk format — never change. Retired values stay reserved.
const (
	// CodecNone stores the raw frames as they are.
	CodecNone Codec = 0
	// CodecZstd stores the raw frames as one zstd frame.
	CodecZstd Codec = 1
)

// MaxRawLen bounds the raw frames of one segment (and so the memory one
// Decode can ask for). Part of the on-disk format — never change: readers
// reject larger segments.
const MaxRawLen = 256 << 20

// Part of the on-disk format — never change. See the package comment.
const (
	magic   = "QSEG"
	version = 1

	offVersion   = 4
	offCodec     = 5
	offBase      = 6
	offCount     = 14
	offCreatedAt = 18
	offRawLen    = 26
	headerLen    = 30
	crcLen       = 4

	flagTrace  = 1 << 0 // a 16-byte trace id follows the flags
	flagSub    = 1 << 1 // a uvarint-prefixed, non-empty producer sub follows
	flagSealed = 1 << 2 // the payload is an envelope the broker sealed; no bytes follow
	flagsKnown = flagTrace | flagSub | flagSealed

	minFrameLen = 1 + 16 + 1 + 1 // empty txn, message id, flags, empty payload
)

// maxZstdExpansion bounds what one body byte can decompress to: a zstd block
// takes at least 4 bytes (3-byte header, 1-byte RLE) and yields at most 128 KiB.
const maxZstdExpansion = 128 << 10 / 4

// castagnoli is the CRC-32C table for the trailing checksum.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("Codec(%d)", uint8(c))
}

// Frame is one message. Byte slices returned by Decode alias the decoded
// buffer owned by the Segment; they are capped at their length, so appending
// to one copies rather than overwriting the next frame. Decode returns nil for
// an empty TransactionID or Payload and for an absent ProducerSub.
type Frame struct {
	MessageID     [16]byte
	TransactionID []byte
	TraceID       [16]byte // meaningful only when HasTrace
	HasTrace      bool
	ProducerSub   []byte // nil when absent (encode: nil or empty means absent)
	Payload       []byte // raw JSON, never re-marshalled
	// Sealed records that the broker sealed Payload into an encryption
	// envelope (flag bit 2): only such payloads are opened on read. This
	// package only carries the bit; the broker's edge decides it.
	Sealed bool
}

// Header is the fixed-width front of a segment.
type Header struct {
	Version   uint8
	Codec     Codec
	Base      int64
	Count     uint32
	CreatedAt int64 // unix microseconds
	RawLen    uint32
}

// Last returns Base + Count - 1, the offset of the last frame.
func (h Header) Last() int64 { return h.Base + int64(h.Count) - 1 }

// Segment is a decoded segment. Frames alias one buffer owned by the Segment
// and never alias the bytes it was decoded from.
type Segment struct {
	Header Header
	Frames []Frame
}

// encoder compresses bodies. EncodeAll is safe for concurrent use. The zstd
// checksum is off because the segment CRC covers the body; single-segment mode
// makes every frame declare its content size, which Decode requires.
//
// The window option comes before the level on purpose: SpeedFastest alone
// cuts its input into 64 KiB blocks, so a push of 100 messages of 1 KiB (a
// body of ~105 KiB) became two blocks, each with its own entropy tables, and
// went through the encoder's history path, which copies the input once more.
// With a window set first the level keeps zstd's largest block, 128 KiB:
// such a body is one block, compressed without history, to the same size
// (4.83 to 1 on bench.Payloads) for 4% less CPU (thread CPU time, median of
// seven rounds). Any zstd decoder reads either; the format does not change
// (a body is one zstd frame, of any blocks).
//
// At most half the cores compress at once (EncodeAll waits for a free
// encoder): compression is the largest CPU cost of a push, and with every
// core compressing, the serial Raft and apply loops queued behind it. On two
// cores, one encoder gave 5-10% more peak push and halved p50 at half of
// peak (interleaved A/B, three runs each).
var encoder = sync.OnceValue(func() *zstd.Encoder {
	return newEncoder()
})

// smallEncoder compresses bodies shorter than smallBody without entropy
// coding of the literals. Zstd's cost has a fixed part per block (counting
// symbols, building and writing the Huffman and FSE tables) that dominates
// a small input: one message of 1 KiB took 6.8 µs of CPU to compress 1.85
// to 1, and 3.0 µs without literal entropy coding, for 1.39 to 1; one of
// 256 bytes 3.9 µs against 1.5 µs (1.58 against 1.37). A push of one
// message, what most clients send, then spends half as much on
// compression. Bodies of 4 KiB and more keep entropy coding: from ten
// messages on it costs only 10-15% more CPU and stores a quarter fewer bytes.
// The output is an ordinary zstd frame (raw literals), read by every
// decoder: no format change. Its encoders are a pool of their own, so a
// small body never waits behind a large one; the cap on cores compressing
// at once (see encoder) holds for each pool, and a small body takes a few
// microseconds.
var smallEncoder = sync.OnceValue(func() *zstd.Encoder {
	return newEncoder(zstd.WithNoEntropyCompression(true))
})

// smallBody is the raw length below which smallEncoder compresses a body.
const smallBody = 4 << 10

func newEncoder(opts ...zstd.EOption) *zstd.Encoder {
	e, err := zstd.NewWriter(nil, append([]zstd.EOption{
		zstd.WithWindowSize(4 << 20), // before the level: see encoder
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true),
		zstd.WithEncoderConcurrency(max(1, runtime.GOMAXPROCS(0)/2)),
	}, opts...)...)
	if err != nil {
		panic(err) // constant options
	}
	return e
}

// decoder decompresses bodies. DecodeAll is safe for concurrent use; with the
// cap limit it never writes past the rawLen-sized buffer it is given.
var decoder = sync.OnceValue(func() *zstd.Decoder {
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(MaxRawLen),
		zstd.WithDecodeAllCapLimit(true),
	)
	if err != nil {
		panic(err) // constant options
	}
	return d
})
