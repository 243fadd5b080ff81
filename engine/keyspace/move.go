package keyspace

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/queenmq/queen/internal/wire"
)

// Moving a queue between stores (doc.go, "Moving a queue"): the import
// mark that hides a queue while its keys arrive, and the parsers the export
// and the import need.

// importMarkName prefixes the meta names of import marks: "import/" and the
// queue name. Part of the on-disk format — never change.
const importMarkName = "import/"

// ImportMark returns the meta key of the import mark of queue.
func ImportMark(queue string) []byte { return Meta(importMarkName + queue) }

// ImportMarkPrefix returns the prefix of every import mark.
func ImportMarkPrefix() []byte { return Meta(importMarkName) }

// ParseImportMark returns the queue an import mark key names.
func ParseImportMark(k []byte) (string, error) {
	name, ok := strings.CutPrefix(string(k), string(ImportMarkPrefix()))
	if !ok || name == "" {
		return "", fmt.Errorf("%w: import mark key %x", ErrCorrupt, k)
	}
	return name, nil
}

// ImportRecord is the value of an import mark: which import is under way
// and the chunk it takes next.
type ImportRecord struct {
	ID    ID     // the imported queue record's id
	Epoch uint64 // the move's epoch, as its commands carry it
	Next  uint32 // the sequence number of the next chunk
}

// Encode appends the record to dst.
func (r *ImportRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.ID(r.ID)
	w.I64(int64(r.Epoch))
	w.U32(r.Next)
	return w.B
}

// DecodeImport decodes an import record.
func DecodeImport(b []byte) (ImportRecord, error) {
	r := newRecordReader(b, "import")
	rec := ImportRecord{ID: r.ID(), Epoch: uint64(r.I64()), Next: r.U32()}
	return rec, r.Done()
}

// PartitionPrefix returns the prefix of every key of the per-partition
// family f (segment, txn, cursor, txn-expiry, trace) that belongs to
// partition id.
func PartitionPrefix(f Family, id ID) []byte { return append([]byte{byte(f)}, id[:]...) }

// ParsePartitionKey returns the partition id of a key of a per-partition
// family.
func ParsePartitionKey(k []byte) (ID, error) {
	var id ID
	if len(k) < 1+16 {
		return id, fmt.Errorf("%w: short key %x", ErrCorrupt, k)
	}
	copy(id[:], k[1:17])
	return id, nil
}

// ParseDLQQueue returns the queue, group and row key of a (queue, group)
// index key.
func ParseDLQQueue(k []byte) (queue, group string, row RowKey, err error) {
	bad := fmt.Errorf("%w: dlq queue index key %x", ErrCorrupt, k)
	if len(k) < 1+2 || Family(k[0]) != FamilyDLQQueue {
		return "", "", row, bad
	}
	n := int(binary.BigEndian.Uint16(k[1:3]))
	if len(k) < 3+n+2 {
		return "", "", row, bad
	}
	queue = string(k[3 : 3+n])
	m := int(binary.BigEndian.Uint16(k[3+n : 5+n]))
	if len(k) != 5+n+m+RowKeyLen {
		return "", "", row, bad
	}
	group = string(k[5+n : 5+n+m])
	copy(row[:], k[5+n+m:])
	return queue, group, row, nil
}
