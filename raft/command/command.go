package command

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/internal/wire"
)

// Type identifies a command: part of the on-disk format — never change or
// reuse a value.
type Type uint8

// Command types.
const (
	TypeConfigure      Type = 1
	TypeDeleteQueue    Type = 2
	TypePush           Type = 3
	TypePop            Type = 4
	TypeAck            Type = 5
	TypeExtendLease    Type = 6
	TypeTransaction    Type = 7
	TypeReplay         Type = 8
	TypeDeleteDLQ      Type = 9
	TypeMoveToDLQ      Type = 10
	TypeSeek           Type = 11
	TypeDeleteGroup    Type = 12
	TypeUpdateSub      Type = 13
	TypeAnnounce       Type = 14
	TypeSweep          Type = 15
	TypePushPrepared   Type = 16
	TypeMaintenance    Type = 17
	TypeStreamRegister Type = 18
	TypeStreamDelete   Type = 19
	TypeStreamCycle    Type = 20
	TypeTrace          Type = 21
	TypeGroups         Type = 22
	TypePlaceQueue     Type = 23
	TypeLookupQueue    Type = 24
	TypeLookupPart     Type = 25
	TypeLookupLease    Type = 26
	TypeOutboxTx       Type = 27
	TypeOutboxDelete   Type = 28
	TypeImportQueue    Type = 29
	TypeDropQueue      Type = 30
	TypeFreezeQueue    Type = 31
	TypeBeginMove      Type = 32
	TypeEndMove        Type = 33
	TypeAbortMove      Type = 34
	TypeReplicas       Type = 35
	TypeGroupLayout    Type = 36
	TypeReplicaStep    Type = 37
	TypeGroupLoad      Type = 38
	TypeNodeLeaving    Type = 39

	// TypeLast is the highest type number in use: a new type raises it.
	TypeLast = TypeNodeLeaving
)

const (
	magic   = 0x51
	version = 1
)

// Stamped is one command of an entry with the leader's stamp.
type Stamped struct {
	Stamp engine.Stamp
	Cmd   engine.Command
	// Raw, when set in place of Cmd, is the command as another node
	// encoded it (type | time | seed | body, Single): AppendEntry copies
	// it with Stamp.Time written over its time, and its own seed.
	Raw []byte
}

// codecs is the command table: one row per command type, naming its Go
// type, how its body is written and read (the layouts are in doc.go), and
// how its result crosses nodes when another node relays it to its group's
// leader (results.go; notRelayed: only the node that proposes it answers
// it). A command's stamp is written by AppendEntry, not here.
var codecs = []codec{
	row(TypeConfigure, appendConfigure, readConfigure, notRelayed),
	row(TypeDeleteQueue, func(w *wire.Writer, c engine.DeleteQueueCmd) { w.Str(c.Queue) },
		func(r *wire.Reader) engine.DeleteQueueCmd { return engine.DeleteQueueCmd{Queue: r.Str()} }, notRelayed),
	row(TypePush, appendPush, readPush, answersPush),
	row(TypePop, appendPop, readPop, notRelayed),
	row(TypeAck, appendAck, readAck, answersAck),
	row(TypeExtendLease, func(w *wire.Writer, c engine.ExtendLeaseCmd) { w.ID(c.Lease); w.Varint(c.Seconds) },
		func(r *wire.Reader) engine.ExtendLeaseCmd {
			return engine.ExtendLeaseCmd{Lease: r.ID(), Seconds: r.Varint()}
		}, notRelayed),
	row(TypeTransaction, appendTransaction, readTransaction, answersTx),
	row(TypeReplay, appendReplay, readReplay, answersReplay),
	row(TypeDeleteDLQ, func(w *wire.Writer, c engine.DeleteDLQCmd) {
		w.ID(c.PartitionID)
		w.Str(c.TransactionID)
		w.Str(c.Group)
	},
		func(r *wire.Reader) engine.DeleteDLQCmd {
			return engine.DeleteDLQCmd{PartitionID: r.ID(), TransactionID: r.Str(), Group: r.Str()}
		}, notRelayed),
	row(TypeMoveToDLQ, func(w *wire.Writer, c engine.MoveToDLQCmd) {
		w.ID(c.PartitionID)
		w.Str(c.TransactionID)
		w.Str(c.Group)
		w.Str(c.Error)
	}, func(r *wire.Reader) engine.MoveToDLQCmd {
		return engine.MoveToDLQCmd{PartitionID: r.ID(), TransactionID: r.Str(), Group: r.Str(), Error: r.Str()}
	}, notRelayed),
	row(TypeSeek, func(w *wire.Writer, c engine.SeekCmd) {
		w.Str(c.Group)
		w.Str(c.Queue)
		w.Str(c.Partition)
		w.Bool(c.ToEnd)
		w.I64(c.Timestamp)
	}, func(r *wire.Reader) engine.SeekCmd {
		return engine.SeekCmd{Group: r.Str(), Queue: r.Str(), Partition: r.Str(), ToEnd: r.Bool(), Timestamp: r.I64()}
	}, notRelayed),
	row(TypeDeleteGroup, func(w *wire.Writer, c engine.DeleteGroupCmd) {
		w.Str(c.Group)
		w.Str(c.Queue)
		w.Bool(c.DeleteMetadata)
	},
		func(r *wire.Reader) engine.DeleteGroupCmd {
			return engine.DeleteGroupCmd{Group: r.Str(), Queue: r.Str(), DeleteMetadata: r.Bool()}
		}, answersGroupDeleted),
	row(TypeUpdateSub, func(w *wire.Writer, c engine.UpdateSubscriptionCmd) { w.Str(c.Group); w.I64(c.Timestamp) },
		func(r *wire.Reader) engine.UpdateSubscriptionCmd {
			return engine.UpdateSubscriptionCmd{Group: r.Str(), Timestamp: r.I64()}
		}, answersCount),
	row(TypeAnnounce, func(w *wire.Writer, c Announce) { w.Str(c.NodeID); w.Str(c.HTTP) },
		func(r *wire.Reader) Announce { return Announce{NodeID: r.Str(), HTTP: r.Str()} }, answersNothing),
	row(TypeSweep, func(*wire.Writer, engine.SweepCmd) {}, func(*wire.Reader) engine.SweepCmd { return engine.SweepCmd{} }, notRelayed),
	row(TypePushPrepared, appendPrepared, readPrepared, answersPush),
	row(TypeMaintenance, func(w *wire.Writer, c Maintenance) { w.Bool(c.Pop); w.Bool(c.Enabled) },
		func(r *wire.Reader) Maintenance { return Maintenance{Pop: r.Bool(), Enabled: r.Bool()} }, notRelayed),
	row(TypeStreamRegister, appendStreamRegister, readStreamRegister, notRelayed),
	row(TypeStreamDelete, func(w *wire.Writer, c engine.StreamDeleteCmd) { w.Str(c.Name) },
		func(r *wire.Reader) engine.StreamDeleteCmd { return engine.StreamDeleteCmd{Name: r.Str()} }, notRelayed),
	row(TypeStreamCycle, appendCycle, readCycle, notRelayed),
	row(TypeTrace, appendTrace, readTrace, notRelayed),
	row(TypeGroups, func(w *wire.Writer, c Groups) { w.Uvarint(uint64(c.Count)) },
		func(r *wire.Reader) Groups { return Groups{Count: uint32(r.Uvarint())} }, notRelayed),
	row(TypePlaceQueue, func(w *wire.Writer, c PlaceQueue) { w.Str(c.Queue); w.Uvarint(uint64(c.Group)) },
		func(r *wire.Reader) PlaceQueue { return PlaceQueue{Queue: r.Str(), Group: uint32(r.Uvarint())} }, answersGroup),
	row(TypeLookupQueue, func(w *wire.Writer, c LookupQueue) { w.Str(c.Queue) },
		func(r *wire.Reader) LookupQueue { return LookupQueue{Queue: r.Str()} }, answersGroup),
	row(TypeLookupPart, func(w *wire.Writer, c LookupPartition) { w.ID(c.ID) },
		func(r *wire.Reader) LookupPartition { return LookupPartition{ID: r.ID()} }, answersFound),
	row(TypeLookupLease, func(w *wire.Writer, c LookupLease) { w.ID(c.ID) },
		func(r *wire.Reader) LookupLease { return LookupLease{ID: r.ID()} }, answersFound),
	// Command version 2: the outbox of transactions across groups.
	row(TypeOutboxTx, appendOutboxTx, readOutboxTx, notRelayed).from(2),
	row(TypeOutboxDelete, func(w *wire.Writer, c engine.OutboxDeleteCmd) { appendIDs(w, c.Rows) },
		func(r *wire.Reader) engine.OutboxDeleteCmd { return engine.OutboxDeleteCmd{Rows: readIDs(r)} }, answersCount).from(2),
	// Command version 2 too: moving a queue between groups.
	row(TypeImportQueue, appendImportQueue, readImportQueue, answersImport).from(2),
	row(TypeDropQueue, appendDropQueue, readDropQueue, answersFound).from(2),
	row(TypeFreezeQueue, appendFreezeQueue, readFreezeQueue, answersFound).from(2),
	row(TypeBeginMove, func(w *wire.Writer, c BeginMove) { w.Str(c.Queue); w.Uvarint(uint64(c.To)) },
		func(r *wire.Reader) BeginMove { return BeginMove{Queue: r.Str(), To: uint32(r.Uvarint())} }, answersEpoch).from(2),
	row(TypeEndMove, func(w *wire.Writer, c EndMove) {
		w.Str(c.Queue)
		w.Uvarint(uint64(c.To))
		w.Uvarint(c.Epoch)
		appendAttempt(w, c.StartedAt)
	}, func(r *wire.Reader) EndMove {
		return EndMove{Queue: r.Str(), To: uint32(r.Uvarint()), Epoch: r.Uvarint(), StartedAt: readAttempt(r)}
	}, answersEpoch).from(2),
	row(TypeAbortMove, func(w *wire.Writer, c AbortMove) { w.Str(c.Queue); w.Uvarint(c.Epoch); appendAttempt(w, c.StartedAt) },
		func(r *wire.Reader) AbortMove {
			return AbortMove{Queue: r.Str(), Epoch: r.Uvarint(), StartedAt: readAttempt(r)}
		}, answersFound).from(2),
	// Command version 3: groups on R of N nodes (layout.go).
	row(TypeReplicas, func(w *wire.Writer, c Replicas) { w.Uvarint(uint64(c.Count)) },
		func(r *wire.Reader) Replicas { return Replicas{Count: uint32(r.Uvarint())} }, notRelayed).from(3),
	row(TypeGroupLayout, appendGroupLayout, readGroupLayout, answersFound).from(3),
	row(TypeReplicaStep, appendReplicaStep, readReplicaStep, answersFound).from(3),
	// Command version 3 too: the load signal (load.go).
	row(TypeGroupLoad, appendGroupLoad, readGroupLoad, answersFound).from(3),
	row(TypeNodeLeaving, func(w *wire.Writer, c NodeLeaving) { w.Str(c.ID); w.Bool(c.Leaving) },
		func(r *wire.Reader) NodeLeaving { return NodeLeaving{ID: r.Str(), Leaving: r.Bool()} }, answersFound).from(3),
}

// codec is one row of the table.
type codec struct {
	typ    Type
	goType reflect.Type
	append func(w *wire.Writer, c engine.Command)
	read   func(r *wire.Reader) engine.Command
	result answer
	since  uint8 // the command version that brought the type (version.go)
}

// row makes the table row of the command type C.
func row[C engine.Command](t Type, write func(*wire.Writer, C), read func(*wire.Reader) C, result answer) codec {
	return codec{typ: t, goType: reflect.TypeFor[C](), result: result, since: 1,
		append: func(w *wire.Writer, c engine.Command) { write(w, c.(C)) },
		read:   func(r *wire.Reader) engine.Command { return read(r) }}
}

// from marks a row with the command version that brought its type.
func (c codec) from(version uint8) codec {
	c.since = version
	return c
}

// byType and byGoType index the table.
var (
	byType   [256]*codec
	byGoType = map[reflect.Type]*codec{}
)

func init() {
	for i := range codecs {
		c := &codecs[i]
		if byType[c.typ] != nil || byGoType[c.goType] != nil {
			panic(fmt.Sprintf("command: type %d (%v) listed twice", c.typ, c.goType))
		}
		byType[c.typ], byGoType[c.goType] = c, c
	}
}

// TypeOf returns the type number the log gives c, false for a command the
// table does not list.
func TypeOf(c engine.Command) (Type, bool) {
	if k := byGoType[reflect.TypeOf(c)]; k != nil {
		return k.typ, true
	}
	return 0, false
}

// AppendEntry appends one log entry holding cmds to dst. It panics on a
// command the table does not list: proposing one is a bug.
func AppendEntry(dst []byte, cmds []Stamped) []byte {
	dst = append(dst, magic, version)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	var room [binary.MaxVarintLen64]byte
	for i := range cmds {
		// Each command is encoded in place behind room for its length,
		// which is then written and the command moved down over the room
		// it did not use: a large push is not copied through a buffer of
		// its own (ARCHITECTURE.md "Memory").
		at := len(dst)
		dst = appendCommand(append(dst, room[:]...), &cmds[i])
		n := len(dst) - at - len(room)
		w := binary.PutUvarint(dst[at:], uint64(n))
		copy(dst[at+w:], dst[at+len(room):])
		dst = dst[:at+w+n]
	}
	return dst
}

func appendCommand(dst []byte, s *Stamped) []byte {
	if s.Raw != nil {
		at := len(dst)
		dst = append(dst, s.Raw...)
		binary.BigEndian.PutUint64(dst[at+1:], uint64(s.Stamp.Time))
		return dst
	}
	k := byGoType[reflect.TypeOf(s.Cmd)]
	if k == nil {
		panic(fmt.Sprintf("command: encode %T: not in the command table", s.Cmd))
	}
	w := wire.Writer{B: dst}
	w.U8(uint8(k.typ))
	w.I64(s.Stamp.Time)
	w.ID(s.Stamp.Seed)
	k.append(&w, s.Cmd)
	return w.B
}

// DecodeEntry decodes a log entry. The commands' byte slices (payloads)
// alias b.
func DecodeEntry(b []byte) ([]Stamped, error) {
	if len(b) < 2 || b[0] != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if b[1] != version {
		return nil, fmt.Errorf("%w: %d", ErrVersion, b[1])
	}
	r := wire.NewReader(b[2:], ErrCorrupt, "entry")
	cmds := make([]Stamped, r.Count(1))
	for i := range cmds {
		body := r.Bytes()
		if r.Err() != nil {
			return nil, r.Err()
		}
		if err := decodeCommand(body, &cmds[i]); err != nil {
			return nil, err
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return cmds, nil
}

func decodeCommand(b []byte, s *Stamped) error {
	r := wire.NewReader(b, ErrCorrupt, "command")
	t := r.U8()
	s.Stamp.Time = r.I64()
	s.Stamp.Seed = r.ID()
	k := byType[t]
	if k == nil {
		if r.Err() != nil {
			return r.Err()
		}
		return fmt.Errorf("%w: unknown command type %d", ErrCorrupt, t)
	}
	s.Cmd = k.read(r)
	return r.Done()
}

// The bodies.

func appendConfigure(w *wire.Writer, k engine.ConfigureCmd) {
	w.Str(k.Queue)
	w.Bool(k.NamespaceSet)
	w.Str(k.Namespace)
	w.Bool(k.TaskSet)
	w.Str(k.Task)
	w.Bool(k.Replace)
	w.Uvarint(uint64(len(k.Set)))
	for _, v := range k.Set {
		w.U8(uint8(v.Option))
		w.Varint(v.Value)
	}
	w.Uvarint(uint64(len(k.Reset)))
	for _, o := range k.Reset {
		w.U8(uint8(o))
	}
}

func readConfigure(r *wire.Reader) engine.ConfigureCmd {
	var k engine.ConfigureCmd
	k.Queue = r.Str()
	k.NamespaceSet = r.Bool()
	k.Namespace = r.Str()
	k.TaskSet = r.Bool()
	k.Task = r.Str()
	k.Replace = r.Bool()
	if n := r.Count(2); n > 0 {
		k.Set = make([]engine.OptionValue, n)
		for i := range k.Set {
			k.Set[i] = engine.OptionValue{Option: engine.Option(r.U8()), Value: r.Varint()}
		}
	}
	if n := r.Count(1); n > 0 {
		k.Reset = make([]engine.Option, n)
		for i := range k.Reset {
			k.Reset[i] = engine.Option(r.U8())
		}
	}
	return k
}

func appendPush(w *wire.Writer, c engine.PushCmd) {
	w.Uvarint(uint64(len(c.Items)))
	for i := range c.Items {
		appendPushItem(w, &c.Items[i])
	}
}

func readPush(r *wire.Reader) engine.PushCmd {
	var c engine.PushCmd
	if n := r.Count(6); n > 0 {
		c.Items = make([]engine.PushItem, n)
		for i := range c.Items {
			readPushItem(r, &c.Items[i])
		}
	}
	return c
}

func appendPop(w *wire.Writer, p engine.PopCmd) {
	w.Str(p.Queue)
	w.Str(p.Partition)
	w.Str(p.Namespace)
	w.Str(p.Task)
	w.Str(p.Group)
	w.Varint(int64(p.Batch))
	w.Varint(int64(p.Partitions))
	w.Bool(p.AutoAck)
	w.U8(p.SubscriptionMode)
	w.I64(p.SubscriptionFrom)
	w.Varint(p.LeaseSeconds)
}

func readPop(r *wire.Reader) engine.PopCmd {
	var p engine.PopCmd
	p.Queue, p.Partition, p.Namespace, p.Task, p.Group = r.Str(), r.Str(), r.Str(), r.Str(), r.Str()
	p.Batch = int(r.Varint())
	p.Partitions = int(r.Varint())
	p.AutoAck = r.Bool()
	p.SubscriptionMode = r.U8()
	p.SubscriptionFrom = r.I64()
	p.LeaseSeconds = r.Varint()
	return p
}

func appendAck(w *wire.Writer, c engine.AckCmd) {
	w.Uvarint(uint64(len(c.Items)))
	for i := range c.Items {
		appendAckItem(w, &c.Items[i])
	}
}

func readAck(r *wire.Reader) engine.AckCmd {
	var c engine.AckCmd
	if n := r.Count(37); n > 0 {
		c.Items = make([]engine.AckItem, n)
		for i := range c.Items {
			readAckItem(r, &c.Items[i])
		}
	}
	return c
}

// Transaction op kinds: part of the on-disk format — never change.
const (
	txPush = 1
	txAck  = 2
)

func appendTransaction(w *wire.Writer, c engine.TransactionCmd) {
	w.Uvarint(uint64(len(c.Ops)))
	for _, op := range c.Ops {
		if op.Push != nil {
			w.U8(txPush)
			appendPushItem(w, op.Push)
		} else {
			w.U8(txAck)
			appendAckItem(w, op.Ack)
		}
	}
	w.Uvarint(uint64(len(c.RequiredLeases)))
	for _, l := range c.RequiredLeases {
		w.ID(l)
	}
}

func appendIDs(w *wire.Writer, ids []engine.ID) {
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		w.ID(id)
	}
}

func readIDs(r *wire.Reader) []engine.ID {
	n := r.Count(16)
	if n == 0 {
		return nil
	}
	ids := make([]engine.ID, n)
	for i := range ids {
		ids[i] = r.ID()
	}
	return ids
}

func appendOutboxTx(w *wire.Writer, c engine.OutboxTxCmd) {
	appendTransaction(w, c.TransactionCmd)
	w.Uvarint(uint64(len(c.Away)))
	for i := range c.Away {
		appendPushItem(w, &c.Away[i])
	}
}

func readOutboxTx(r *wire.Reader) engine.OutboxTxCmd {
	c := engine.OutboxTxCmd{TransactionCmd: readTransaction(r)}
	if n := r.Count(7); n > 0 {
		c.Away = make([]engine.PushItem, n)
		for i := range c.Away {
			readPushItem(r, &c.Away[i])
		}
	}
	return c
}

func readTransaction(r *wire.Reader) engine.TransactionCmd {
	var c engine.TransactionCmd
	if n := r.Count(7); n > 0 {
		c.Ops = make([]engine.TxOp, n)
		for i := range c.Ops {
			switch kind := r.U8(); kind {
			case txPush:
				c.Ops[i].Push = &engine.PushItem{}
				readPushItem(r, c.Ops[i].Push)
			case txAck:
				c.Ops[i].Ack = &engine.AckItem{}
				readAckItem(r, c.Ops[i].Ack)
			default:
				r.Fail("transaction op kind %d", kind)
			}
		}
	}
	if n := r.Count(16); n > 0 {
		c.RequiredLeases = make([]engine.ID, n)
		for i := range c.RequiredLeases {
			c.RequiredLeases[i] = r.ID()
		}
	}
	return c
}

func appendReplay(w *wire.Writer, c engine.ReplayCmd) {
	w.ID(c.PartitionID)
	w.Str(c.TransactionID)
	w.Str(c.Group)
	kind := replayKind(&c)
	w.U8(kind)
	w.Bytes(c.Payload)
	if kind&replayProducer != 0 {
		w.Str(c.ProducerSub)
	}
}

func readReplay(r *wire.Reader) engine.ReplayCmd {
	var c engine.ReplayCmd
	c.PartitionID = r.ID()
	c.TransactionID = r.Str()
	c.Group = r.Str()
	readReplayPayload(r, &c)
	return c
}

// Push item flags: the byte that was hasTrace, whose 0 and 1 keep their
// meaning (doc.go, "Versions"). Part of the on-disk format — never change;
// a retired bit is never reused.
const (
	pushTrace      = 1 << 0 // the trace id is set
	pushSealed     = 1 << 1 // the payload is an envelope the broker's edge sealed
	pushFlagsKnown = pushTrace | pushSealed
)

func appendPushItem(w *wire.Writer, it *engine.PushItem) {
	var flags uint8
	if it.HasTrace {
		flags |= pushTrace
	}
	if it.Sealed {
		flags |= pushSealed
	}
	w.Str(it.Queue)
	w.Str(it.Partition)
	w.Str(it.TransactionID)
	w.U8(flags)
	w.ID(it.TraceID)
	w.Str(it.ProducerSub)
	w.Bytes(it.Payload)
}

func readPushItem(r *wire.Reader, it *engine.PushItem) {
	it.Queue, it.Partition, it.TransactionID = r.Str(), r.Str(), r.Str()
	flags := r.U8()
	if flags&^pushFlagsKnown != 0 {
		r.Fail("push item flags %#x", flags)
	}
	it.HasTrace, it.Sealed = flags&pushTrace != 0, flags&pushSealed != 0
	it.TraceID = r.ID()
	it.ProducerSub = r.Str()
	it.Payload = r.Bytes()
}

// Replay payload kinds: the byte that was hasPayload, whose 0 and 1 keep
// their meaning (doc.go, "Versions"): a value in the low two bits, and one
// flag bit with a corrected payload. Part of the on-disk format — never
// change or reuse a value.
const (
	replaySnapshot = 0 // no corrected payload: replay the dead-letter snapshot
	replayPlain    = 1 // a corrected payload, stored as sent
	replaySealed   = 2 // a corrected payload the broker's edge sealed
	// replayProducer flags a corrected payload stamped with the replaying
	// caller's producerSub (engine.ReplayCmd.Restamp), which follows it.
	replayProducer = 1 << 2
)

// replayKind is the payload kind of a replay. Sealed and Restamp mean
// nothing without a corrected payload, so they are not encoded then.
func replayKind(c *engine.ReplayCmd) uint8 {
	if c.Payload == nil {
		return replaySnapshot
	}
	kind := uint8(replayPlain)
	if c.Sealed {
		kind = replaySealed
	}
	if c.Restamp {
		kind |= replayProducer
	}
	return kind
}

func readReplayPayload(r *wire.Reader, c *engine.ReplayCmd) {
	kind := r.U8()
	payload := r.Bytes()
	switch kind &^ replayProducer {
	case replaySnapshot:
		if kind != replaySnapshot {
			r.Fail("replay payload kind %d", kind)
		}
	case replayPlain, replaySealed:
		c.Payload, c.Sealed = payload, kind&^replayProducer == replaySealed
		if c.Payload == nil {
			c.Payload = []byte{}
		}
		if kind&replayProducer != 0 {
			c.Restamp, c.ProducerSub = true, r.Str()
		}
	default:
		r.Fail("replay payload kind %d", kind)
	}
}

func appendAckItem(w *wire.Writer, it *engine.AckItem) {
	w.Str(it.TransactionID)
	w.ID(it.PartitionID)
	w.Str(it.Group)
	w.U8(uint8(it.Status))
	w.ID(it.Lease)
	w.Str(it.Error)
}

func readAckItem(r *wire.Reader, it *engine.AckItem) {
	it.TransactionID = r.Str()
	it.PartitionID = r.ID()
	it.Group = r.Str()
	status := r.U8()
	if status > uint8(cursor.DeadLetter) {
		r.Fail("ack status %d", status)
	}
	it.Status = cursor.Status(status)
	it.Lease = r.ID()
	it.Error = r.Str()
}

func readCycle(r *wire.Reader) *engine.PreparedCycle {
	c := &engine.PreparedCycle{}
	c.QueryID, c.PartitionID, c.Group = r.ID(), r.ID(), r.Str()
	if n := r.Count(2); n > 0 {
		c.Ops = make([]engine.StateOp, n)
		for i := range c.Ops {
			op := &c.Ops[i]
			switch kind := r.U8(); kind {
			case stateDelete:
				op.Delete, op.Key = true, r.Str()
			case stateUpsert:
				op.Key, op.HasWindowEnd = r.Str(), r.Bool()
				op.WindowEnd = math.Float64frombits(uint64(r.I64()))
				op.Value = r.Bytes()
				if math.IsNaN(op.WindowEnd) || !op.HasWindowEnd && op.WindowEnd != 0 {
					r.Fail("state op %d windowEnd %v", i, op.WindowEnd)
				}
			default:
				r.Fail("state op kind %d", kind)
			}
		}
	}
	if r.Bool() {
		a := &engine.CycleAck{TransactionID: r.Str(), Lease: r.ID()}
		status := r.U8()
		if status > uint8(cursor.DeadLetter) {
			r.Fail("cycle ack status %d", status)
		}
		a.Status, a.Count, a.Error = cursor.Status(status), r.Varint(), r.Str()
		c.Ack = a
	}
	c.KeepLease = r.Bool()
	d1, d2 := r.ID(), r.ID()
	copy(c.Digest[:16], d1[:])
	copy(c.Digest[16:], d2[:])
	if r.Bool() {
		c.Push = readPrepared(r)
	}
	return c
}

func appendTrace(w *wire.Writer, c engine.TraceCmd) {
	w.ID(c.PartitionID)
	w.Str(c.TransactionID)
	w.Str(c.Group)
	w.Str(c.EventType)
	w.Str(c.WorkerID)
	w.Bytes(c.Data)
	w.Uvarint(uint64(len(c.Names)))
	for _, n := range c.Names {
		w.Str(n)
	}
}

func readTrace(r *wire.Reader) engine.TraceCmd {
	c := engine.TraceCmd{PartitionID: r.ID(), TransactionID: r.Str(), Group: r.Str(), EventType: r.Str(), WorkerID: r.Str(), Data: r.Bytes()}
	if n := r.Count(1); n > 0 {
		c.Names = make([]string, n)
		for i := range c.Names {
			c.Names[i] = r.Str()
		}
	}
	return c
}
