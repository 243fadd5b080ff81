package keyspace

import (
	"math"

	"github.com/queenmq/queen/internal/wire"
)

// recordVersion is the version byte of every record: part of the on-disk
// format — never change; a new layout takes a new version and an upgrade step.
const recordVersion = 1

// Dead-letter records have a second version, which appends a flags byte
// (doc.go, "Values"). Part of the on-disk format — never change; a retired
// flag bit is never reused.
const (
	deadLetterFlagsVersion = 2
	deadLetterSealed       = 1 << 0 // the payload is an envelope the broker sealed
)

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
	// Sealed records that the broker sealed Payload into an encryption
	// envelope (the frame's sealed bit, copied when the row is filed).
	// Stored as version 2; a version-1 row is not Sealed.
	Sealed bool
}

// newRecordReader starts decoding a record and checks its version byte.
func newRecordReader(b []byte, what string) *wire.Reader {
	r, _ := newRecordReaderUpTo(b, what, recordVersion)
	return r
}

// newRecordReaderUpTo starts decoding a record whose versions run from 1 to
// newest, and returns the version read.
func newRecordReaderUpTo(b []byte, what string, newest uint8) (*wire.Reader, uint8) {
	r := wire.NewReader(b, ErrCorrupt, what+" record")
	v := r.U8()
	if r.Err() == nil && (v < recordVersion || v > newest) {
		r.Fail("unknown version %d", v)
	}
	return r, v
}

// Encode appends the record to dst.
func (q *QueueRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.ID(q.ID)
	w.I64(q.CreatedAt)
	w.Str(q.Namespace)
	w.Str(q.Task)
	w.Uvarint(uint64(len(q.Options)))
	for _, o := range q.Options {
		w.U8(o.Number)
		w.Varint(o.Value)
	}
	return w.B
}

// DecodeQueue decodes a queue record.
func DecodeQueue(b []byte) (QueueRecord, error) {
	r := newRecordReader(b, "queue")
	q := QueueRecord{ID: r.ID(), CreatedAt: r.I64(), Namespace: r.Str(), Task: r.Str()}
	n := r.Uvarint()
	if n > uint64(r.Len()) {
		r.Fail("option count %d", n)
	}
	if r.Err() == nil && n > 0 {
		q.Options = make([]Option, n)
		for i := range q.Options {
			q.Options[i] = Option{Number: r.U8(), Value: r.Varint()}
		}
	}
	return q, r.Done()
}

// Encode appends the record to dst.
func (p *PartitionRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.Str(p.Queue)
	w.Str(p.Name)
	w.I64(p.Next)
	w.I64(p.Start)
	w.I64(p.CreatedAt)
	w.I64(p.LastWriteAt)
	w.I64(p.OldestAt)
	w.I64(p.PurgeFrom)
	return w.B
}

// DecodePartition decodes a partition record.
func DecodePartition(b []byte) (PartitionRecord, error) {
	r := newRecordReader(b, "partition")
	p := PartitionRecord{Queue: r.Str(), Name: r.Str(), Next: r.I64(), Start: r.I64(), CreatedAt: r.I64(),
		LastWriteAt: r.I64(), OldestAt: r.I64(), PurgeFrom: r.I64()}
	return p, r.Done()
}

// Encode appends the record to dst.
func (t *TxnRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.I64(t.Offset)
	w.I64(t.CreatedAt)
	w.ID(t.MessageID)
	return w.B
}

// DecodeTxn decodes a transaction-id index record.
func DecodeTxn(b []byte) (TxnRecord, error) {
	r := newRecordReader(b, "txn")
	t := TxnRecord{Offset: r.I64(), CreatedAt: r.I64(), MessageID: r.ID()}
	return t, r.Done()
}

// Encode appends the record to dst.
func (c *CursorRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.I64(c.Committed)
	w.I64(c.BatchEnd)
	w.ID(c.Lease)
	w.I64(c.LeaseExpiresAt)
	w.I64(c.LeaseAcquiredAt)
	w.U32(c.RetryCount)
	w.I64(c.AttemptOffset)
	w.U32(c.AttemptCount)
	w.I64(c.TotalConsumed)
	w.I64(c.CreatedAt)
	w.I64(c.LastConsumedAt)
	w.I64(c.RetryAfter)
	return w.B
}

// DecodeCursor decodes a cursor record.
func DecodeCursor(b []byte) (CursorRecord, error) {
	r := newRecordReader(b, "cursor")
	c := CursorRecord{
		Committed: r.I64(), BatchEnd: r.I64(), Lease: r.ID(), LeaseExpiresAt: r.I64(),
		LeaseAcquiredAt: r.I64(), RetryCount: r.U32(), AttemptOffset: r.I64(), AttemptCount: r.U32(),
		TotalConsumed: r.I64(), CreatedAt: r.I64(), LastConsumedAt: r.I64(), RetryAfter: r.I64(),
	}
	return c, r.Done()
}

// Encode appends the record to dst.
func (s *SubRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.U8(s.Mode)
	w.I64(s.Timestamp)
	w.I64(s.CreatedAt)
	return w.B
}

// DecodeSub decodes a subscription record.
func DecodeSub(b []byte) (SubRecord, error) {
	r := newRecordReader(b, "subscription")
	s := SubRecord{Mode: r.U8(), Timestamp: r.I64(), CreatedAt: r.I64()}
	return s, r.Done()
}

// Encode appends the record to dst: version 1 when it has no flag set (the
// bytes every earlier binary wrote and reads), else version 2.
func (d *DeadLetterRecord) Encode(dst []byte) []byte {
	var flags uint8
	if d.Sealed {
		flags |= deadLetterSealed
	}
	w := wire.Writer{B: dst}
	if flags == 0 {
		w.U8(recordVersion)
	} else {
		w.U8(deadLetterFlagsVersion)
	}
	w.ID(d.PartitionID)
	w.Str(d.Queue)
	w.Str(d.Partition)
	w.Str(d.Group)
	w.I64(d.Offset)
	w.ID(d.MessageID)
	w.Str(d.TransactionID)
	w.Bool(d.HasTrace)
	w.ID(d.TraceID)
	w.Str(d.ProducerSub)
	w.Bytes(d.Payload)
	w.Str(d.Error)
	w.U32(d.RetryCount)
	w.I64(d.EnqueuedAt)
	w.U32(d.Deliveries)
	if flags != 0 {
		w.U8(flags)
	}
	return w.B
}

// DecodeDeadLetter decodes a dead-letter record of version 1 or 2. Payload
// is a copy.
func DecodeDeadLetter(b []byte) (DeadLetterRecord, error) {
	r, v := newRecordReaderUpTo(b, "dead-letter", deadLetterFlagsVersion)
	d := DeadLetterRecord{
		PartitionID: r.ID(), Queue: r.Str(), Partition: r.Str(), Group: r.Str(), Offset: r.I64(),
		MessageID: r.ID(), TransactionID: r.Str(), HasTrace: r.Bool(), TraceID: r.ID(),
		ProducerSub: r.Str(), Payload: append([]byte(nil), r.Bytes()...), Error: r.Str(),
		RetryCount: r.U32(), EnqueuedAt: r.I64(), Deliveries: r.U32(),
	}
	if v == deadLetterFlagsVersion {
		switch flags := r.U8(); {
		case r.Err() != nil:
		case flags&^deadLetterSealed != 0:
			r.Fail("unknown flags %#x", flags&^deadLetterSealed)
		case flags == 0:
			r.Fail("version 2 without flags") // such a row is written as version 1
		default:
			d.Sealed = flags&deadLetterSealed != 0
		}
	}
	return d, r.Done()
}

// EncodeTxnExpiry encodes the value of a txn-expiry entry: the transaction
// ids of one segment.
func EncodeTxnExpiry(dst []byte, txns []string) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.Uvarint(uint64(len(txns)))
	for _, t := range txns {
		w.Str(t)
	}
	return w.B
}

// DecodeTxnExpiry decodes a txn-expiry entry.
func DecodeTxnExpiry(b []byte) ([]string, error) {
	r := newRecordReader(b, "txn-expiry")
	n := r.Uvarint()
	if n > uint64(r.Len()) {
		r.Fail("count %d", n)
	}
	var out []string
	for i := uint64(0); r.Err() == nil && i < n; i++ {
		out = append(out, r.Str())
	}
	return out, r.Done()
}

// StreamQueryRecord is a streaming query's registry entry (key
// StreamQuery(name)).
type StreamQueryRecord struct {
	ID          ID
	SourceQueue string
	HasSink     bool
	SinkQueue   string
	ConfigHash  string
	CreatedAt   int64
	UpdatedAt   int64
}

// Encode appends the record to dst.
func (q *StreamQueryRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.ID(q.ID)
	w.Str(q.SourceQueue)
	w.Bool(q.HasSink)
	w.Str(q.SinkQueue)
	w.Str(q.ConfigHash)
	w.I64(q.CreatedAt)
	w.I64(q.UpdatedAt)
	return w.B
}

// DecodeStreamQuery decodes a streaming query record.
func DecodeStreamQuery(b []byte) (StreamQueryRecord, error) {
	r := newRecordReader(b, "stream query")
	q := StreamQueryRecord{ID: r.ID(), SourceQueue: r.Str(), HasSink: r.Bool(), SinkQueue: r.Str(),
		ConfigHash: r.Str(), CreatedAt: r.I64(), UpdatedAt: r.I64()}
	return q, r.Done()
}

// StreamStateRecord is one state row's value (key StreamState). WindowEnd
// is the value's numeric windowEnd, kept so that replacing or deleting the
// row finds its ripeness index entry without parsing the value again.
type StreamStateRecord struct {
	UpdatedAt    int64
	HasWindowEnd bool
	WindowEnd    float64
	Value        []byte // the JSON as sent
}

// Encode appends the record to dst.
func (s *StreamStateRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.I64(s.UpdatedAt)
	w.Bool(s.HasWindowEnd)
	w.I64(int64(math.Float64bits(s.WindowEnd)))
	w.Bytes(s.Value)
	return w.B
}

// DecodeStreamState decodes a state row. Value aliases b.
func DecodeStreamState(b []byte) (StreamStateRecord, error) {
	r := newRecordReader(b, "stream state")
	s := StreamStateRecord{UpdatedAt: r.I64(), HasWindowEnd: r.Bool(), WindowEnd: math.Float64frombits(uint64(r.I64())), Value: r.Bytes()}
	return s, r.Done()
}

// StreamCycleMemo is one cycle a shard committed recently: the digest of
// its request, when, and its encoded answer (docs/decisions.md B10).
type StreamCycleMemo struct {
	Digest [32]byte
	At     int64
	Result []byte
}

// EncodeStreamShard encodes a shard's recent cycles, oldest first.
func EncodeStreamShard(dst []byte, memos []StreamCycleMemo) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.Uvarint(uint64(len(memos)))
	for i := range memos {
		w.B = append(w.B, memos[i].Digest[:]...)
		w.I64(memos[i].At)
		w.Bytes(memos[i].Result)
	}
	return w.B
}

// DecodeStreamShard decodes a shard's recent cycles. Results alias b.
func DecodeStreamShard(b []byte) ([]StreamCycleMemo, error) {
	r := newRecordReader(b, "stream shard")
	memos := make([]StreamCycleMemo, r.Count(41))
	for i := range memos {
		a, c := r.ID(), r.ID()
		copy(memos[i].Digest[:16], a[:])
		copy(memos[i].Digest[16:], c[:])
		memos[i].At = r.I64()
		memos[i].Result = r.Bytes()
	}
	return memos, r.Done()
}

// TraceRecord is one trace of a message (key Trace).
type TraceRecord struct {
	CreatedAt     int64
	TransactionID string
	Group         string
	EventType     string
	WorkerID      string
	Data          []byte // JSON as sent
	Names         []string
}

// Encode appends the record to dst.
func (t *TraceRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.I64(t.CreatedAt)
	w.Str(t.TransactionID)
	w.Str(t.Group)
	w.Str(t.EventType)
	w.Str(t.WorkerID)
	w.Bytes(t.Data)
	w.Uvarint(uint64(len(t.Names)))
	for _, n := range t.Names {
		w.Str(n)
	}
	return w.B
}

// DecodeTrace decodes a trace record. Data aliases b.
func DecodeTrace(b []byte) (TraceRecord, error) {
	r := newRecordReader(b, "trace")
	t := TraceRecord{CreatedAt: r.I64(), TransactionID: r.Str(), Group: r.Str(), EventType: r.Str(), WorkerID: r.Str(), Data: r.Bytes()}
	if n := r.Count(1); n > 0 {
		t.Names = make([]string, n)
		for i := range t.Names {
			t.Names[i] = r.Str()
		}
	}
	return t, r.Done()
}

// OutboxRecord is the value of an outbox row: one push a transaction
// committed for a queue of another Raft group, its transaction id fixed so
// that a redelivery is a duplicate in the target queue.
type OutboxRecord struct {
	CreatedAt     int64 // the committing command's time
	Tx            ID    // the transaction's id (its TxResult.ID)
	Queue         string
	Partition     string
	TransactionID string
	HasTrace      bool
	TraceID       ID
	ProducerSub   string
	Payload       []byte
	Sealed        bool
}

// Outbox record flags. Part of the on-disk format — never change or reuse.
const (
	outboxTrace  = 1 << 0
	outboxSealed = 1 << 1
	outboxKnown  = outboxTrace | outboxSealed
)

// Encode appends the record to dst.
func (o *OutboxRecord) Encode(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(recordVersion)
	w.I64(o.CreatedAt)
	w.ID(o.Tx)
	w.Str(o.Queue)
	w.Str(o.Partition)
	w.Str(o.TransactionID)
	var flags uint8
	if o.HasTrace {
		flags |= outboxTrace
	}
	if o.Sealed {
		flags |= outboxSealed
	}
	w.U8(flags)
	w.ID(o.TraceID)
	w.Str(o.ProducerSub)
	w.Bytes(o.Payload)
	return w.B
}

// DecodeOutbox decodes an outbox record. Payload aliases b.
func DecodeOutbox(b []byte) (OutboxRecord, error) {
	r := newRecordReader(b, "outbox")
	o := OutboxRecord{CreatedAt: r.I64(), Tx: r.ID(), Queue: r.Str(), Partition: r.Str(), TransactionID: r.Str()}
	flags := r.U8()
	if flags&^outboxKnown != 0 {
		r.Fail("flags %#x", flags)
	}
	o.HasTrace, o.Sealed = flags&outboxTrace != 0, flags&outboxSealed != 0
	o.TraceID, o.ProducerSub, o.Payload = r.ID(), r.Str(), r.Bytes()
	return o, r.Done()
}
