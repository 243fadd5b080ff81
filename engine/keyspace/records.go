package keyspace

import (
	"encoding/binary"
	"fmt"
)

// recordVersion is the version byte of every record: part of the on-disk
// format — never change; a new layout takes a new version and an upgrade step.
const recordVersion = 1

// Option is one stored queue option: its number and value.
type Option struct {
	Number uint8
	Value  int64
}

// QueueRecord is the value of a queue key.
type QueueRecord struct {
	ID        ID
	CreatedAt int64
	Namespace string
	Task      string
	Options   []Option
}

// PartitionRecord is the value of a partition key. Next is the offset the next
// pushed message gets (last offset + 1); Start is the oldest retained offset.
// OldestAt is the createdAt of the segment at Start (0 when none is
// retained) and PurgeFrom the createdAt of the oldest txn-expiry entry (0
// when none): they let the retention sweep skip partitions without reading.
type PartitionRecord struct {
	Queue       string
	Name        string
	Next        int64
	Start       int64
	CreatedAt   int64
	LastWriteAt int64
	OldestAt    int64
	PurgeFrom   int64
}

// TxnRecord is the value of a transaction-id index entry.
type TxnRecord struct {
	Offset    int64
	CreatedAt int64
	MessageID ID
}

// CursorRecord is the value of a cursor key: one (partition, group) row.
type CursorRecord struct {
	Committed       int64
	BatchEnd        int64
	Lease           ID
	LeaseExpiresAt  int64
	LeaseAcquiredAt int64
	RetryCount      uint32
	AttemptOffset   int64
	AttemptCount    uint32
	TotalConsumed   int64
	CreatedAt       int64
	LastConsumedAt  int64
	RetryAfter      int64
}

// SubRecord is the value of a subscription key.
type SubRecord struct {
	Mode      uint8
	Timestamp int64
	CreatedAt int64
}

// DeadLetterRecord is the value of a dead-letter row: a snapshot with no
// reference into segments, so retention never affects it.
type DeadLetterRecord struct {
	PartitionID   ID
	Queue         string
	Partition     string
	Group         string
	Offset        int64
	MessageID     ID
	TransactionID string
	HasTrace      bool
	TraceID       ID
	ProducerSub   string
	Payload       []byte
	Error         string
	RetryCount    uint32
	EnqueuedAt    int64
	Deliveries    uint32
}

type writer struct{ b []byte }

func (w *writer) i64(v int64)  { w.b = binary.BigEndian.AppendUint64(w.b, uint64(v)) }
func (w *writer) u32(v uint32) { w.b = binary.BigEndian.AppendUint32(w.b, v) }
func (w *writer) u8(v uint8)   { w.b = append(w.b, v) }
func (w *writer) id(v ID)      { w.b = append(w.b, v[:]...) }
func (w *writer) str(s string) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *writer) bytes(s []byte) {
	w.b = binary.AppendUvarint(w.b, uint64(len(s)))
	w.b = append(w.b, s...)
}
func (w *writer) boolean(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// reader decodes a record; the first failure sticks and later reads return
// zero values, so decoders check err once at the end.
type reader struct {
	b    []byte
	err  error
	what string
}

func newReader(b []byte, what string) *reader {
	r := &reader{b: b, what: what}
	if v := r.u8(); r.err == nil && v != recordVersion {
		r.fail("unknown version %d", v)
	}
	return r
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s record: %s", ErrCorrupt, r.what, fmt.Sprintf(format, args...))
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.fail("short")
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) i64() int64 {
	if v := r.take(8); v != nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) id() (id ID) {
	copy(id[:], r.take(16))
	return id
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("length %d past end", n)
		return nil
	}
	return r.take(int(n))
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) boolean() bool {
	switch v := r.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("bad bool %d", v)
		return false
	}
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

// Encode appends the record to dst.
func (q *QueueRecord) Encode(dst []byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.id(q.ID)
	w.i64(q.CreatedAt)
	w.str(q.Namespace)
	w.str(q.Task)
	w.b = binary.AppendUvarint(w.b, uint64(len(q.Options)))
	for _, o := range q.Options {
		w.u8(o.Number)
		w.b = binary.AppendVarint(w.b, o.Value)
	}
	return w.b
}

// DecodeQueue decodes a queue record.
func DecodeQueue(b []byte) (QueueRecord, error) {
	r := newReader(b, "queue")
	q := QueueRecord{ID: r.id(), CreatedAt: r.i64(), Namespace: r.str(), Task: r.str()}
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("option count %d", n)
	}
	if r.err == nil && n > 0 {
		q.Options = make([]Option, n)
		for i := range q.Options {
			q.Options[i] = Option{Number: r.u8(), Value: r.varint()}
		}
	}
	return q, r.done()
}

// Encode appends the record to dst.
func (p *PartitionRecord) Encode(dst []byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.str(p.Queue)
	w.str(p.Name)
	w.i64(p.Next)
	w.i64(p.Start)
	w.i64(p.CreatedAt)
	w.i64(p.LastWriteAt)
	w.i64(p.OldestAt)
	w.i64(p.PurgeFrom)
	return w.b
}

// DecodePartition decodes a partition record.
func DecodePartition(b []byte) (PartitionRecord, error) {
	r := newReader(b, "partition")
	p := PartitionRecord{Queue: r.str(), Name: r.str(), Next: r.i64(), Start: r.i64(), CreatedAt: r.i64(),
		LastWriteAt: r.i64(), OldestAt: r.i64(), PurgeFrom: r.i64()}
	return p, r.done()
}

// Encode appends the record to dst.
func (t *TxnRecord) Encode(dst []byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.i64(t.Offset)
	w.i64(t.CreatedAt)
	w.id(t.MessageID)
	return w.b
}

// DecodeTxn decodes a transaction-id index record.
func DecodeTxn(b []byte) (TxnRecord, error) {
	r := newReader(b, "txn")
	t := TxnRecord{Offset: r.i64(), CreatedAt: r.i64(), MessageID: r.id()}
	return t, r.done()
}

// Encode appends the record to dst.
func (c *CursorRecord) Encode(dst []byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.i64(c.Committed)
	w.i64(c.BatchEnd)
	w.id(c.Lease)
	w.i64(c.LeaseExpiresAt)
	w.i64(c.LeaseAcquiredAt)
	w.u32(c.RetryCount)
	w.i64(c.AttemptOffset)
	w.u32(c.AttemptCount)
	w.i64(c.TotalConsumed)
	w.i64(c.CreatedAt)
	w.i64(c.LastConsumedAt)
	w.i64(c.RetryAfter)
	return w.b
}

// DecodeCursor decodes a cursor record.
func DecodeCursor(b []byte) (CursorRecord, error) {
	r := newReader(b, "cursor")
	c := CursorRecord{
		Committed: r.i64(), BatchEnd: r.i64(), Lease: r.id(), LeaseExpiresAt: r.i64(),
		LeaseAcquiredAt: r.i64(), RetryCount: r.u32(), AttemptOffset: r.i64(), AttemptCount: r.u32(),
		TotalConsumed: r.i64(), CreatedAt: r.i64(), LastConsumedAt: r.i64(), RetryAfter: r.i64(),
	}
	return c, r.done()
}

// Encode appends the record to dst.
func (s *SubRecord) Encode(dst []byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.u8(s.Mode)
	w.i64(s.Timestamp)
	w.i64(s.CreatedAt)
	return w.b
}

// DecodeSub decodes a subscription record.
func DecodeSub(b []byte) (SubRecord, error) {
	r := newReader(b, "subscription")
	s := SubRecord{Mode: r.u8(), Timestamp: r.i64(), CreatedAt: r.i64()}
	return s, r.done()
}

// Encode appends the record to dst.
func (d *DeadLetterRecord) Encode(dst []byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.id(d.PartitionID)
	w.str(d.Queue)
	w.str(d.Partition)
	w.str(d.Group)
	w.i64(d.Offset)
	w.id(d.MessageID)
	w.str(d.TransactionID)
	w.boolean(d.HasTrace)
	w.id(d.TraceID)
	w.str(d.ProducerSub)
	w.bytes(d.Payload)
	w.str(d.Error)
	w.u32(d.RetryCount)
	w.i64(d.EnqueuedAt)
	w.u32(d.Deliveries)
	return w.b
}

// DecodeDeadLetter decodes a dead-letter record. Payload is a copy.
func DecodeDeadLetter(b []byte) (DeadLetterRecord, error) {
	r := newReader(b, "dead-letter")
	d := DeadLetterRecord{
		PartitionID: r.id(), Queue: r.str(), Partition: r.str(), Group: r.str(), Offset: r.i64(),
		MessageID: r.id(), TransactionID: r.str(), HasTrace: r.boolean(), TraceID: r.id(),
		ProducerSub: r.str(), Payload: append([]byte(nil), r.bytes()...), Error: r.str(),
		RetryCount: r.u32(), EnqueuedAt: r.i64(), Deliveries: r.u32(),
	}
	return d, r.done()
}

// EncodeTxnExpiry encodes the value of a txn-expiry entry: the transaction
// ids of one segment.
func EncodeTxnExpiry(dst []byte, txns [][]byte) []byte {
	w := writer{dst}
	w.u8(recordVersion)
	w.b = binary.AppendUvarint(w.b, uint64(len(txns)))
	for _, t := range txns {
		w.bytes(t)
	}
	return w.b
}

// DecodeTxnExpiry decodes a txn-expiry entry.
func DecodeTxnExpiry(b []byte) ([]string, error) {
	r := newReader(b, "txn-expiry")
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("count %d", n)
	}
	var out []string
	for i := uint64(0); r.err == nil && i < n; i++ {
		out = append(out, r.str())
	}
	return out, r.done()
}
