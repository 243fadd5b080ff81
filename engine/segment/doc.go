// Package segment encodes and decodes segments: the immutable, checksummed,
// optionally zstd-compressed values that hold one push batch of one partition.
//
// A segment holds Count consecutive messages (frames) with the offsets Base,
// Base+1, …, Base+Count-1, all created at the same instant. The engine stores
// each segment as one Pebble value under a key built by engine/keyspace; this
// package knows only the value bytes. A segment is written once and never
// changed, so every byte of it is covered by one CRC.
//
// # Layout
//
// Fixed-width integers are big-endian. Lengths inside the frames are uvarints
// (encoding/binary) in their shortest form.
//
//	+-------+-----+-------+--------+--------+-------------+--------+---------+--------+
//	| magic | ver | codec | base   | count  | createdAt   | rawLen | body    | crc    |
//	| "QSEG"| u8  | u8    | i64 BE | u32 BE | i64 BE (µs) | u32 BE | N bytes | u32 BE |
//	+-------+-----+-------+--------+--------+-------------+--------+---------+--------+
//	 0       4     5       6        14       18            26       30        30+N
//
//	field      width  meaning
//	magic      4      "QSEG" (0x51 0x53 0x45 0x47)
//	ver        1      format version, 1
//	codec      1      0 = none: body is the raw frames
//	                  1 = zstd: body is one zstd frame that declares its content
//	                      size (rawLen) and decompresses to exactly rawLen bytes
//	base       8      offset of the first frame, >= 0
//	count      4      number of frames, >= 1; base+count-1 fits in an int64
//	createdAt  8      unix microseconds, shared by every frame
//	rawLen     4      length of the raw frames, <= MaxRawLen (256 MiB)
//	body       N      N = total length - 34; with codec none, N == rawLen
//	crc        4      CRC-32C (Castagnoli) of every byte before it: header and body
//
// The raw frames are count frames back to back, with nothing after the last:
//
//	+------------+-----+-----------+-------+-----------+---------------------+----------------+---------+
//	| uvarint    | txn | messageID | flags | [traceID] | [uvarint len | sub] | uvarint        | payload |
//	| len(txn)   |     | 16 B      | u8    | [16 B]    |                     | len(payload)   |         |
//	+------------+-----+-----------+-------+-----------+---------------------+----------------+---------+
//
// Flag bit 0 says a trace id follows; bit 1 says a producer sub follows, which
// is then never empty; bit 2 (sealed) says the broker sealed the payload: it
// is an encryption envelope the broker's edge made, and only such payloads
// are decrypted on read (package server, "Encryption at rest"). Bit 2 adds no
// bytes. The other five bits are zero. The payload is the producer's JSON,
// stored as received, or its envelope when sealed. A frame is at least 19
// bytes (empty transaction id and payload, no optional fields), so
// count*19 <= rawLen.
//
// # Checks
//
// ReadHeader checks, in this order: the length (at least 34 bytes), the magic,
// the version, the CRC, then the fields: a known codec, base >= 0, count >= 1,
// no overflow of the last offset, rawLen <= MaxRawLen, count*19 <= rawLen,
// N == rawLen for codec none, and for codec zstd a zstd frame header with no
// dictionary that declares a content size equal to rawLen. Decode then
// decompresses into a buffer of exactly rawLen bytes (the zstd decoder may not
// write past it, nor hold more than MaxRawLen) and parses the frames:
// lengths in shortest form and within the buffer, no unknown flag bits (bits
// 3 to 7), no empty producer sub, exactly count frames and no trailing bytes. Any failure
// wraps ErrCorrupt. (Like any zstd decoder, Decode also accepts skippable or
// empty zstd frames after the first; the encoder never writes them.) These
// rules make the raw frames canonical: a segment that
// decodes with codec none re-encodes to the same bytes. Zstd output is not
// canonical (it depends on the compressor), so only the raw frames are.
// How the encoder compresses is not part of the format either: it may split
// the frame into any number of blocks, and it stores the literals of small
// bodies without entropy coding (segment.go, encoder and smallEncoder);
// every zstd decoder reads all of them.
//
// The CRC protects against bit rot, not against an adversary. A segment with a
// forged CRC still cannot make Decode allocate more than rawLen bytes of data
// (bounded by MaxRawLen and by what the body could possibly expand to), plus
// one Frame per 19 of those bytes.
//
// # Versions
//
// The magic and version are checked before the CRC, so a later version may
// change everything after the version byte, checksum included. Decode reads
// exactly the versions it knows (today only 1) and reports any other as
// corrupt. Segments reach other nodes inside snapshots, so a binary must never
// write a version that a node of the cluster cannot read: a new version is
// written only after the engine's store format version (keyspace) has been
// raised, which happens once every node runs a binary that reads it. Readers
// keep decoding every older version; each keeps its golden files in
// testdata/golden as upgrade fixtures. Codec numbers, like versions, are never
// reused once retired.
//
// # Flag bits
//
// Version 1 grows by flag bits. A v1 reader rejects a frame with a flag bit
// it does not know, so a bit that adds no bytes can join v1 without a new
// version: a binary that predates the bit reports such a frame as corrupt,
// loudly, and can never misread it, while every frame without the bit stays
// byte-identical and readable by every v1 binary. Bit 2 (sealed) joined v1
// this way instead of as version 2. A version 2 would be rejected by the
// same older binaries just as loudly, so it would buy no safety; but it
// would make every segment written after the upgrade unreadable to them,
// those of unencrypted queues too, where the bit is never set, and it would
// have to wait for the store format gate above. With the bit in v1, a
// cluster that never seals a payload (no key, or no queue with
// encryptionEnabled) writes exactly the bytes it wrote before and can still
// roll back. The price is the one a version bump would have had: during a
// rolling upgrade, a node on an older binary stores the sealed frames it is
// sent (every replica holds the same bytes) but fails with ErrCorrupt when
// it reads them (pop, message detail, dead-lettering, check), until it runs
// a binary that knows bit 2. Upgrade every node before pushing to encrypted
// queues. Each bit is listed above with what it means; a retired bit, like a
// retired version, is never reused. The golden files of sealed frames are
// named like the others (sealed-v1-*.seg).
package segment
