package keyspace

import (
	"encoding/binary"
	"fmt"

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
