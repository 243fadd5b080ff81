package engine

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/keyspace"
)

// ID is a 16-byte UUID: queue, partition, message, lease and DLQ row ids.
type ID = keyspace.ID

// Offset is a position in a partition's log.
type Offset = cursor.Offset

// QueueMode is the consumer group name of competing consumers sharing one
// cursor (docs/semantics.md §1.4).
const QueueMode = "__QUEUE_MODE__"

// DefaultPartition is the partition used when a push names none.
const DefaultPartition = "Default"

// Stamp is what the proposing node fixes for a command so that every replica
// applies it identically: the time and the seed every minted id derives from.
// Applying a command never reads a clock or a random source.
type Stamp struct {
	// Time is the proposer's clock, unix microseconds.
	Time int64
	// Seed is a fresh UUIDv7; ids minted while applying the command are the
	// seed and its successors in the random bits (see minter).
	Seed ID
}

// minter hands out the ids a command needs, derived from its stamp's seed:
// the n-th id is the seed with n added to its low 62 random bits, so ids stay
// valid UUIDv7s (version and variant bits untouched) and unique as long as
// seeds are.
type minter struct {
	seed ID
	n    uint64
}

func (m *minter) next() ID {
	id := m.seed
	const mask = 1<<62 - 1
	v := binary.BigEndian.Uint64(id[8:])
	v = v&^mask | (v+m.n)&mask
	binary.BigEndian.PutUint64(id[8:], v)
	m.n++
	return id
}

// preparedIDBase is where a prepared push starts minting its message ids
// from the seed its command is then stamped with (PushCmd.Prepare), so that
// they never meet the ids the apply mints from the same seed (queue and
// partition ids, counted from 0): a command mints far fewer than 2^40.
const preparedIDBase = 1 << 40

// rngSeed derives the two PCG seeds of a command's random choices.
func (m *minter) rngSeed() (uint64, uint64) {
	return binary.BigEndian.Uint64(m.seed[:8]), binary.BigEndian.Uint64(m.seed[8:])
}

// FormatID writes id in the canonical 8-4-4-4-12 form.
func FormatID(id ID) string {
	var b [36]byte
	AppendID(b[:0], id)
	return string(b[:])
}

// AppendID appends the canonical form of id to dst.
func AppendID(dst []byte, id ID) []byte {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return append(dst, b[:]...)
}

// ParseID parses a UUID in canonical form (case-insensitive).
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("%w: not a UUID: %q", ErrInvalid, s)
	}
	j := 0
	for i := 0; i < 36; {
		if s[i] == '-' {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return ID{}, fmt.Errorf("%w: not a UUID: %q", ErrInvalid, s)
		}
		id[j] = hi<<4 | lo
		j++
		i += 2
	}
	return id, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Micros converts a time to the engine's unix microseconds.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// Time converts the engine's unix microseconds to a UTC time.
func Time(us int64) time.Time { return time.UnixMicro(us).UTC() }

const secondUS = int64(time.Second / time.Microsecond)
