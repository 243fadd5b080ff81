package keyspace

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/queenmq/queen/internal/wire"
)

// Family is the first byte of every key.
type Family byte

// Key families: part of the on-disk format — never change or reuse a value.
const (
	FamilyMeta      Family = 0x01
	FamilyQueue     Family = 0x02
	FamilyPartition Family = 0x03
	FamilySegment   Family = 0x04
	FamilyTxn       Family = 0x05
	FamilyCursor    Family = 0x06
	FamilySub       Family = 0x07
	FamilyDLQ       Family = 0x08
	FamilyDLQAddr   Family = 0x09
	FamilyDLQQueue  Family = 0x0A
	FamilyTxnExpiry Family = 0x0B
	// Streams (docs/api.md §14.2): queries, their state, its ripeness index
	// and each shard's recent cycles.
	FamilyStreamQuery   Family = 0x0C
	FamilyStreamQueryID Family = 0x0D
	FamilyStreamState   Family = 0x0E
	FamilyStreamRipe    Family = 0x0F
	FamilyStreamShard   Family = 0x10
	// Traces (docs/api.md §13): records per message, and an index by name.
	FamilyTrace     Family = 0x11
	FamilyTraceName Family = 0x12
	// The outbox (ARCHITECTURE.md, "Scale-out"): a transaction's pushes to
	// queues of other Raft groups, until they are delivered there.
	FamilyOutbox Family = 0x13
)

// FormatVersion is the store format this code writes (meta key "version").
const FormatVersion = 1

// Meta key names.
const (
	MetaApplied = "applied"
	MetaVersion = "version"
)

// ID is a 16-byte UUID: queue, partition, lease, message and DLQ row ids.
type ID = wire.ID

// RowKeyLen is the length of a DLQ row key: failedAt u64 and the row id.
const RowKeyLen = 8 + 16

// RowKey identifies a dead-letter row: the key of its 0x08 entry without the
// family byte.
type RowKey [RowKeyLen]byte

// MakeRowKey builds the row key of a dead-letter row.
func MakeRowKey(failedAt int64, id ID) RowKey {
	var k RowKey
	binary.BigEndian.PutUint64(k[:8], uint64(failedAt))
	copy(k[8:], id[:])
	return k
}

// FailedAt returns the failure time encoded in the row key.
func (k RowKey) FailedAt() int64 { return int64(binary.BigEndian.Uint64(k[:8])) }

// ID returns the row id encoded in the row key.
func (k RowKey) ID() ID {
	var id ID
	copy(id[:], k[8:])
	return id
}

func appendStr16(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// Meta returns the key of a meta value.
func Meta(name string) []byte { return append([]byte{byte(FamilyMeta)}, name...) }

// Queue returns the key of a queue record.
func Queue(name string) []byte { return append([]byte{byte(FamilyQueue)}, name...) }

// Partition returns the key of a partition record.
func Partition(id ID) []byte { return append([]byte{byte(FamilyPartition)}, id[:]...) }

// Segment returns the key of the segment starting at base in partition id.
func Segment(id ID, base int64) []byte {
	k := make([]byte, 0, 1+16+8)
	k = append(k, byte(FamilySegment))
	k = append(k, id[:]...)
	return binary.BigEndian.AppendUint64(k, uint64(base))
}

// SegmentSpan returns the key range [lo, hi) of partition id's segments whose
// base offset lies in [from, to).
func SegmentSpan(id ID, from, to int64) (lo, hi []byte) {
	return Segment(id, from), Segment(id, to)
}

// SegmentPrefix returns the prefix of all of partition id's segments.
func SegmentPrefix(id ID) []byte { return append([]byte{byte(FamilySegment)}, id[:]...) }

// ParseSegment returns the base offset of a segment key.
func ParseSegment(key []byte) (ID, int64, error) {
	if len(key) != 1+16+8 || Family(key[0]) != FamilySegment {
		return ID{}, 0, fmt.Errorf("%w: segment key %x", ErrCorrupt, key)
	}
	var id ID
	copy(id[:], key[1:17])
	return id, int64(binary.BigEndian.Uint64(key[17:])), nil
}

// Txn returns the key of a transaction-id index entry.
func Txn(id ID, txn string) []byte { return AppendTxn(make([]byte, 0, 1+16+len(txn)), id, txn) }

// AppendTxn appends the txn key of (id, txn) to dst.
func AppendTxn(dst []byte, id ID, txn string) []byte {
	dst = append(dst, byte(FamilyTxn))
	dst = append(dst, id[:]...)
	return append(dst, txn...)
}

// ParseTxn returns the partition id and transaction id of a txn key.
func ParseTxn(key []byte) (ID, string, error) {
	if len(key) < 1+16 || Family(key[0]) != FamilyTxn {
		return ID{}, "", fmt.Errorf("%w: txn key %x", ErrCorrupt, key)
	}
	var id ID
	copy(id[:], key[1:17])
	return id, string(key[17:]), nil
}

// TxnExpiry returns the key of the txn-expiry entry of the segment at base,
// created at createdAt: the purge of the transaction-id index walks these in
// time order.
func TxnExpiry(id ID, createdAt, base int64) []byte {
	k := make([]byte, 0, 1+16+16)
	k = append(k, byte(FamilyTxnExpiry))
	k = append(k, id[:]...)
	k = binary.BigEndian.AppendUint64(k, uint64(createdAt))
	return binary.BigEndian.AppendUint64(k, uint64(base))
}

// TxnExpiryPrefix returns the prefix of a partition's txn-expiry entries.
func TxnExpiryPrefix(id ID) []byte { return append([]byte{byte(FamilyTxnExpiry)}, id[:]...) }

// ParseTxnExpiry returns the createdAt and base of a txn-expiry key.
func ParseTxnExpiry(key []byte) (createdAt, base int64, err error) {
	if len(key) != 1+16+16 || Family(key[0]) != FamilyTxnExpiry {
		return 0, 0, fmt.Errorf("%w: txn-expiry key %x", ErrCorrupt, key)
	}
	return int64(binary.BigEndian.Uint64(key[17:25])), int64(binary.BigEndian.Uint64(key[25:])), nil
}

// Cursor returns the key of the cursor row of group on partition id.
func Cursor(id ID, group string) []byte {
	k := make([]byte, 0, 1+16+len(group))
	k = append(k, byte(FamilyCursor))
	k = append(k, id[:]...)
	return append(k, group...)
}

// ParseCursor returns the partition id and group of a cursor key.
func ParseCursor(key []byte) (ID, string, error) {
	if len(key) < 1+16 || Family(key[0]) != FamilyCursor {
		return ID{}, "", fmt.Errorf("%w: cursor key %x", ErrCorrupt, key)
	}
	var id ID
	copy(id[:], key[1:17])
	return id, string(key[17:]), nil
}

// Sub returns the key of group's subscription record on queue.
func Sub(queue, group string) []byte {
	k := make([]byte, 0, 3+len(queue)+len(group))
	k = append(k, byte(FamilySub))
	k = appendStr16(k, queue)
	return append(k, group...)
}

// ParseSub returns the queue and group of a subscription key.
func ParseSub(key []byte) (queue, group string, err error) {
	if len(key) < 3 || Family(key[0]) != FamilySub {
		return "", "", fmt.Errorf("%w: sub key %x", ErrCorrupt, key)
	}
	n := int(binary.BigEndian.Uint16(key[1:3]))
	if len(key) < 3+n {
		return "", "", fmt.Errorf("%w: sub key %x", ErrCorrupt, key)
	}
	return string(key[3 : 3+n]), string(key[3+n:]), nil
}

// DLQ returns the key of a dead-letter row.
func DLQ(row RowKey) []byte { return append([]byte{byte(FamilyDLQ)}, row[:]...) }

// ParseDLQ returns the row key of a 0x08 key.
func ParseDLQ(key []byte) (RowKey, error) {
	var k RowKey
	if len(key) != 1+RowKeyLen || Family(key[0]) != FamilyDLQ {
		return k, fmt.Errorf("%w: dlq key %x", ErrCorrupt, key)
	}
	copy(k[:], key[1:])
	return k, nil
}

// DLQAddrPrefix returns the prefix of the address index entries of the
// dead-letter rows of (partition id, txn).
func DLQAddrPrefix(id ID, txn string) []byte {
	k := make([]byte, 0, 1+16+2+len(txn)+RowKeyLen)
	k = append(k, byte(FamilyDLQAddr))
	k = append(k, id[:]...)
	return appendStr16(k, txn)
}

// DLQAddr returns the address index key of a dead-letter row.
func DLQAddr(id ID, txn string, row RowKey) []byte {
	return append(DLQAddrPrefix(id, txn), row[:]...)
}

// DLQQueuePrefix returns the prefix of the (queue, group) index entries; an
// empty group with groupSet false gives the prefix of every group of queue.
func DLQQueuePrefix(queue, group string, groupSet bool) []byte {
	k := make([]byte, 0, 1+4+len(queue)+len(group)+RowKeyLen)
	k = append(k, byte(FamilyDLQQueue))
	k = appendStr16(k, queue)
	if groupSet {
		k = appendStr16(k, group)
	}
	return k
}

// DLQQueue returns the (queue, group) index key of a dead-letter row.
func DLQQueue(queue, group string, row RowKey) []byte {
	return append(DLQQueuePrefix(queue, group, true), row[:]...)
}

// RowKeyOfIndex returns the row key at the end of a DLQ index key.
func RowKeyOfIndex(key []byte) (RowKey, error) {
	var k RowKey
	if len(key) < 1+RowKeyLen {
		return k, fmt.Errorf("%w: dlq index key %x", ErrCorrupt, key)
	}
	copy(k[:], key[len(key)-RowKeyLen:])
	return k, nil
}

// StreamQuery is a streaming query's registry key, by its name.
func StreamQuery(name string) []byte { return append([]byte{byte(FamilyStreamQuery)}, name...) }

// StreamQueryID is the index from a query's id to its name.
func StreamQueryID(id ID) []byte { return append([]byte{byte(FamilyStreamQueryID)}, id[:]...) }

// StreamShardPrefix is the prefix of every key of family f (state, ripe,
// shard) that belongs to query q and, when p is not nil, to its source
// partition *p.
func StreamShardPrefix(f Family, q ID, p *ID) []byte {
	k := make([]byte, 0, 1+32)
	k = append(k, byte(f))
	k = append(k, q[:]...)
	if p != nil {
		k = append(k, p[:]...)
	}
	return k
}

// StreamState is the key of one state row: query, source partition, key.
func StreamState(q, p ID, key string) []byte {
	return append(StreamShardPrefix(FamilyStreamState, q, &p), key...)
}

// StreamStateKey returns the state key of a StreamState key.
func StreamStateKey(k []byte) (string, error) {
	if len(k) < 33 || Family(k[0]) != FamilyStreamState {
		return "", fmt.Errorf("%w: stream state key %x", ErrCorrupt, k)
	}
	return string(k[33:]), nil
}

// StreamRipe is the ripeness index entry of a state row whose value holds a
// numeric windowEnd: query, partition, windowEnd (OrderedFloat), key.
func StreamRipe(q, p ID, windowEnd float64, key string) []byte {
	k := StreamShardPrefix(FamilyStreamRipe, q, &p)
	k = binary.BigEndian.AppendUint64(k, OrderedFloat(windowEnd))
	return append(k, key...)
}

// ParseStreamRipe returns the windowEnd bits and state key of a ripeness
// index key.
func ParseStreamRipe(k []byte) (uint64, string, error) {
	if len(k) < 41 || Family(k[0]) != FamilyStreamRipe {
		return 0, "", fmt.Errorf("%w: stream ripe key %x", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[33:41]), string(k[41:]), nil
}

// OrderedFloat maps a float64 onto a uint64 whose big-endian bytes sort as
// the numbers do (negatives below positives, -0 next to 0; no NaN is ever
// stored).
func OrderedFloat(f float64) uint64 {
	b := math.Float64bits(f)
	if b>>63 == 1 {
		return ^b
	}
	return b | 1<<63
}

// StreamShard is the key of a shard's recent-cycles record (docs/decisions.md B10).
func StreamShard(q, p ID) []byte { return StreamShardPrefix(FamilyStreamShard, q, &p) }

// Trace is the key of one trace record: the traced message's partition and
// offset, then the trace id (time-ordered: records of a message sort
// oldest first).
func Trace(part ID, offset int64, id ID) []byte {
	k := TracePrefix(part, offset)
	return append(k, id[:]...)
}

// TracePrefix is the prefix of the trace records of one message.
func TracePrefix(part ID, offset int64) []byte {
	k := make([]byte, 0, 1+16+8+16)
	k = append(k, byte(FamilyTrace))
	k = append(k, part[:]...)
	return binary.BigEndian.AppendUint64(k, uint64(offset))
}

// TraceSpan is the key range of the trace records of the messages at
// offsets [from, to) of a partition.
func TraceSpan(part ID, from, to int64) (lo, hi []byte) {
	return TracePrefix(part, from), TracePrefix(part, to)
}

// ParseTrace returns the partition, offset and trace id of a Trace key.
func ParseTrace(k []byte) (ID, int64, ID, error) {
	var part, id ID
	if len(k) != 1+16+8+16 || Family(k[0]) != FamilyTrace {
		return part, 0, id, fmt.Errorf("%w: trace key %x", ErrCorrupt, k)
	}
	copy(part[:], k[1:17])
	copy(id[:], k[25:41])
	return part, int64(binary.BigEndian.Uint64(k[17:25])), id, nil
}

// TraceName is the name index entry of a trace record: name, createdAt,
// trace id. Its value is the record's partition id and offset.
func TraceName(name string, createdAt int64, id ID) []byte {
	k := TraceNamePrefix(name)
	k = binary.BigEndian.AppendUint64(k, uint64(createdAt))
	return append(k, id[:]...)
}

// TraceNamePrefix is the prefix of the index entries of one name.
func TraceNamePrefix(name string) []byte {
	return appendStr16([]byte{byte(FamilyTraceName)}, name)
}

// ParseTraceName returns the name, createdAt and trace id of an index key.
func ParseTraceName(k []byte) (string, int64, ID, error) {
	var id ID
	if len(k) < 3 || Family(k[0]) != FamilyTraceName {
		return "", 0, id, fmt.Errorf("%w: trace name key %x", ErrCorrupt, k)
	}
	n := int(binary.BigEndian.Uint16(k[1:3]))
	if len(k) != 3+n+8+16 {
		return "", 0, id, fmt.Errorf("%w: trace name key %x", ErrCorrupt, k)
	}
	copy(id[:], k[3+n+8:])
	return string(k[3 : 3+n]), int64(binary.BigEndian.Uint64(k[3+n : 3+n+8])), id, nil
}

// Outbox is the key of an outbox row: its id, a UUIDv7 minted from the
// committing command's seed, so rows sort by commit time.
func Outbox(id ID) []byte { return append([]byte{byte(FamilyOutbox)}, id[:]...) }

// ParseOutbox returns the row id of an Outbox key.
func ParseOutbox(k []byte) (ID, error) {
	var id ID
	if len(k) != 1+16 || Family(k[0]) != FamilyOutbox {
		return id, fmt.Errorf("%w: outbox key %x", ErrCorrupt, k)
	}
	copy(id[:], k[1:])
	return id, nil
}

// FamilyPrefix returns the one-byte prefix of a family.
func FamilyPrefix(f Family) []byte { return []byte{byte(f)} }

// PrefixEnd returns the smallest key greater than every key with prefix p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
