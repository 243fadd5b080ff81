package logstore

import (
	"bytes"
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
	familyGroup  byte = 0x03 // another group's keys: familyGroup | group u32 BE | a key above

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

// keyspace is one Raft group's keys. Group 1's are the families above, as
// they were before there were groups; any other group g puts familyGroup |
// g u32 BE in front of the same families.
type keyspace struct {
	prefix []byte
	// lower and upper bound the group's log family: every log key k has
	// lower <= k < upper.
	lower, upper []byte
}

func newKeyspace(group uint32) keyspace {
	var prefix []byte
	if group != 1 {
		prefix = binary.BigEndian.AppendUint32([]byte{familyGroup}, group)
	}
	return keyspace{prefix: prefix,
		lower: append(append([]byte(nil), prefix...), familyLog),
		upper: append(append([]byte(nil), prefix...), familyLog+1)}
}

// logKeyLen is the length of the group's log keys.
func (ks keyspace) logKeyLen() int { return len(ks.prefix) + logKeyLen }

// putLogKey writes the key of the entry at index into dst[:ks.logKeyLen()].
func (ks keyspace) putLogKey(dst []byte, index uint64) {
	n := copy(dst, ks.prefix)
	dst[n] = familyLog
	binary.BigEndian.PutUint64(dst[n+1:n+logKeyLen], index)
}

func (ks keyspace) logKey(index uint64) []byte {
	k := make([]byte, ks.logKeyLen())
	ks.putLogKey(k, index)
	return k
}

// logEnd returns the exclusive upper key of the range ending at max inclusive.
func (ks keyspace) logEnd(max uint64) []byte {
	if max == math.MaxUint64 {
		return ks.upper
	}
	return ks.logKey(max + 1)
}

// parseLogKey returns the index a log key of the group encodes.
func (ks keyspace) parseLogKey(k []byte) (uint64, error) {
	if len(k) != ks.logKeyLen() || !bytes.HasPrefix(k, ks.lower) {
		return 0, fmt.Errorf("%w: log key %x", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[len(ks.lower):]), nil
}

func (ks keyspace) stableKey(key []byte) []byte {
	k := make([]byte, 0, len(ks.prefix)+1+len(key))
	k = append(append(k, ks.prefix...), familyStable)
	return append(k, key...)
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
