package logstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Keyspace and value format; see the package doc for the layout.
// Part of the on-disk format — never change.
const (
	familyLog    byte = 0x01 // log entry: familyLog | index u64 BE
	familyStable byte = 0x02 // stable key: familyStable | key bytes

	logKeyLen = 1 + 8

	formatV1 byte = 1 // log value version byte

	offVersion    = 0
	offType       = 1
	offIndex      = 2
	offTerm       = 10
	offSeconds    = 18
	offNanos      = 26
	offDataLen    = 30
	offExtLen     = 34
	headerLen     = 38
	checksumLen   = 4
	valueOverhead = headerLen + checksumLen

	uint64ValueLen = 8 // SetUint64 value: u64 BE
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Bounds of the log family: every log key k has logLower <= k < logUpper.
var (
	logLower = []byte{familyLog}
	logUpper = []byte{familyLog + 1}
)

// putLogKey writes the key of the entry at index into dst[:logKeyLen].
func putLogKey(dst []byte, index uint64) {
	dst[0] = familyLog
	binary.BigEndian.PutUint64(dst[1:logKeyLen], index)
}

func logKey(index uint64) []byte {
	k := make([]byte, logKeyLen)
	putLogKey(k, index)
	return k
}

// logEnd returns the exclusive upper key of the range ending at max inclusive.
func logEnd(max uint64) []byte {
	if max == math.MaxUint64 {
		return logUpper
	}
	return logKey(max + 1)
}

// parseLogKey returns the index a log key encodes.
func parseLogKey(k []byte) (uint64, error) {
	if len(k) != logKeyLen || k[0] != familyLog {
		return 0, fmt.Errorf("%w: log key %x", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

func stableKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = familyStable
	copy(k[1:], key)
	return k
}

// encodedLen returns the size of l's encoded value, or ErrTooLarge.
func encodedLen(l *hraft.Log) (int, error) {
	if uint64(len(l.Data)) > math.MaxUint32 || uint64(len(l.Extensions)) > math.MaxUint32 {
		return 0, fmt.Errorf("encode log %d: %w", l.Index, ErrTooLarge)
	}
	return valueOverhead + len(l.Data) + len(l.Extensions), nil
}

// encodeLog writes l into dst, which must be exactly encodedLen(l) bytes.
func encodeLog(dst []byte, l *hraft.Log) {
	dst[offVersion] = formatV1
	dst[offType] = byte(l.Type)
	binary.BigEndian.PutUint64(dst[offIndex:], l.Index)
	binary.BigEndian.PutUint64(dst[offTerm:], l.Term)
	binary.BigEndian.PutUint64(dst[offSeconds:], uint64(l.AppendedAt.Unix()))
	binary.BigEndian.PutUint32(dst[offNanos:], uint32(l.AppendedAt.Nanosecond()))
	binary.BigEndian.PutUint32(dst[offDataLen:], uint32(len(l.Data)))
	binary.BigEndian.PutUint32(dst[offExtLen:], uint32(len(l.Extensions)))
	n := headerLen
	n += copy(dst[n:], l.Data)
	n += copy(dst[n:], l.Extensions)
	binary.BigEndian.PutUint32(dst[n:], crc32.Checksum(dst[:n], castagnoli))
}

// decodeLog decodes v into l. Data and Extensions are copied into one new
// allocation, so l does not alias v; each is nil when empty. Every failure
// wraps ErrCorrupt.
func decodeLog(v []byte, l *hraft.Log) error {
	if len(v) < valueOverhead {
		return fmt.Errorf("%w: log value of %d bytes is shorter than %d", ErrCorrupt, len(v), valueOverhead)
	}
	body := v[:len(v)-checksumLen]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(v[len(body):]); got != want {
		return fmt.Errorf("%w: log value checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	if v[offVersion] != formatV1 {
		return fmt.Errorf("%w: log value version %d", ErrCorrupt, v[offVersion])
	}
	dataLen := uint64(binary.BigEndian.Uint32(v[offDataLen:]))
	extLen := uint64(binary.BigEndian.Uint32(v[offExtLen:]))
	if headerLen+dataLen+extLen != uint64(len(body)) {
		return fmt.Errorf("%w: log value lengths %d+%d do not match %d payload bytes", ErrCorrupt, dataLen, extLen, len(body)-headerLen)
	}
	nanos := binary.BigEndian.Uint32(v[offNanos:])
	if nanos >= uint32(time.Second) {
		return fmt.Errorf("%w: log value nanoseconds %d", ErrCorrupt, nanos)
	}
	var data, ext []byte
	if payload := body[headerLen:]; len(payload) > 0 {
		buf := make([]byte, len(payload))
		copy(buf, payload)
		if dataLen > 0 {
			data = buf[:dataLen:dataLen]
		}
		if extLen > 0 {
			ext = buf[dataLen:]
		}
	}
	*l = hraft.Log{
		Index:      binary.BigEndian.Uint64(v[offIndex:]),
		Term:       binary.BigEndian.Uint64(v[offTerm:]),
		Type:       hraft.LogType(v[offType]),
		Data:       data,
		Extensions: ext,
		AppendedAt: time.Unix(int64(binary.BigEndian.Uint64(v[offSeconds:])), int64(nanos)).UTC(),
	}
	return nil
}
