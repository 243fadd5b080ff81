package command

import (
	"encoding/binary"
	"fmt"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
	"github.com/queenmq/queen/engine/segment"
	"github.com/queenmq/queen/internal/wire"
)

// Type identifies a command: part of the on-disk format — never change or
// reuse a value.
type Type uint8

// Command types.
const (
	TypeConfigure    Type = 1
	TypeDeleteQueue  Type = 2
	TypePush         Type = 3
	TypePop          Type = 4
	TypeAck          Type = 5
	TypeExtendLease  Type = 6
	TypeTransaction  Type = 7
	TypeReplay       Type = 8
	TypeDeleteDLQ    Type = 9
	TypeMoveToDLQ    Type = 10
	TypeSeek         Type = 11
	TypeDeleteGroup  Type = 12
	TypeUpdateSub    Type = 13
	TypeAnnounce     Type = 14
	TypeSweep        Type = 15
	TypePushPrepared Type = 16
	TypeMaintenance  Type = 17
)

const (
	magic   = 0x51
	version = 1
)

// Command is one stamped mutation. Exactly the fields of its Type are used.
type Command struct {
	Type  Type
	Stamp engine.Stamp

	Configure engine.ConfigureCmd
	Queue     string // DeleteQueue
	Push      []engine.PushItem
	Prepared  *engine.PreparedPush
	Pop       engine.PopCmd
	Ack       []engine.AckItem
	Lease     engine.ID // ExtendLease
	Seconds   int64     // ExtendLease
	Ops       []engine.TxOp
	Leases    []engine.ID // Transaction's requiredLeases
	Replay    engine.ReplayCmd
	Address   Address // DeleteDLQ, MoveToDLQ
	Seek      engine.SeekCmd
	Group     GroupCmd // DeleteGroup, UpdateSub
	Announce  Announce
	// Maintenance switches push (Pop false) or pop (Pop true) maintenance.
	Maintenance Maintenance
}

// Maintenance is the body of a maintenance switch.
type Maintenance struct {
	Pop     bool
	Enabled bool
}

// Address names a message for the DLQ commands.
type Address struct {
	PartitionID   engine.ID
	TransactionID string
	Group         string
	Error         string // MoveToDLQ
}

// GroupCmd is the body of DeleteGroup and UpdateSub.
type GroupCmd struct {
	Group          string
	Queue          string
	DeleteMetadata bool
	Timestamp      int64
}

// Announce publishes a leader's HTTP address, so followers can forward.
type Announce struct {
	NodeID string
	HTTP   string
}

// AppendEntry appends one log entry holding cmds to dst.
func AppendEntry(dst []byte, cmds []*Command) []byte {
	dst = append(dst, magic, version)
	dst = binary.AppendUvarint(dst, uint64(len(cmds)))
	var body []byte
	for _, c := range cmds {
		body = c.append(body[:0])
		dst = binary.AppendUvarint(dst, uint64(len(body)))
		dst = append(dst, body...)
	}
	return dst
}

// DecodeEntry decodes a log entry. The commands' byte slices (payloads)
// alias b.
func DecodeEntry(b []byte) ([]Command, error) {
	if len(b) < 2 || b[0] != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if b[1] != version {
		return nil, fmt.Errorf("%w: %d", ErrVersion, b[1])
	}
	r := wire.NewReader(b[2:], ErrCorrupt, "entry")
	cmds := make([]Command, r.Count(1))
	for i := range cmds {
		body := r.Bytes()
		if r.Err() != nil {
			return nil, r.Err()
		}
		if err := cmds[i].decode(body); err != nil {
			return nil, err
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return cmds, nil
}

func (c *Command) append(dst []byte) []byte {
	w := wire.Writer{B: dst}
	w.U8(uint8(c.Type))
	w.I64(c.Stamp.Time)
	w.ID(c.Stamp.Seed)
	switch c.Type {
	case TypeConfigure:
		k := &c.Configure
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
	case TypeDeleteQueue:
		w.Str(c.Queue)
	case TypePush:
		w.Uvarint(uint64(len(c.Push)))
		for i := range c.Push {
			appendPushItem(&w, &c.Push[i])
		}
	case TypePop:
		p := &c.Pop
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
	case TypeAck:
		w.Uvarint(uint64(len(c.Ack)))
		for i := range c.Ack {
			appendAckItem(&w, &c.Ack[i])
		}
	case TypeExtendLease:
		w.ID(c.Lease)
		w.Varint(c.Seconds)
	case TypeTransaction:
		w.Uvarint(uint64(len(c.Ops)))
		for _, op := range c.Ops {
			if op.Push != nil {
				w.U8(1)
				appendPushItem(&w, op.Push)
			} else {
				w.U8(2)
				appendAckItem(&w, op.Ack)
			}
		}
		w.Uvarint(uint64(len(c.Leases)))
		for _, l := range c.Leases {
			w.ID(l)
		}
	case TypeReplay:
		w.ID(c.Replay.PartitionID)
		w.Str(c.Replay.TransactionID)
		w.Str(c.Replay.Group)
		w.U8(replayKind(&c.Replay))
		w.Bytes(c.Replay.Payload)
	case TypeDeleteDLQ:
		w.ID(c.Address.PartitionID)
		w.Str(c.Address.TransactionID)
		w.Str(c.Address.Group)
	case TypeMoveToDLQ:
		w.ID(c.Address.PartitionID)
		w.Str(c.Address.TransactionID)
		w.Str(c.Address.Group)
		w.Str(c.Address.Error)
	case TypeSeek:
		s := &c.Seek
		w.Str(s.Group)
		w.Str(s.Queue)
		w.Str(s.Partition)
		w.Bool(s.ToEnd)
		w.I64(s.Timestamp)
	case TypeDeleteGroup:
		w.Str(c.Group.Group)
		w.Str(c.Group.Queue)
		w.Bool(c.Group.DeleteMetadata)
	case TypeUpdateSub:
		w.Str(c.Group.Group)
		w.I64(c.Group.Timestamp)
	case TypeAnnounce:
		w.Str(c.Announce.NodeID)
		w.Str(c.Announce.HTTP)
	case TypeSweep:
	case TypePushPrepared:
		appendPrepared(&w, c.Prepared)
	case TypeMaintenance:
		w.Bool(c.Maintenance.Pop)
		w.Bool(c.Maintenance.Enabled)
	default:
		panic(fmt.Sprintf("command: encode unknown type %d", c.Type))
	}
	return w.B
}

func (c *Command) decode(b []byte) error {
	r := wire.NewReader(b, ErrCorrupt, "command")
	c.Type = Type(r.U8())
	c.Stamp.Time = r.I64()
	c.Stamp.Seed = r.ID()
	switch c.Type {
	case TypeConfigure:
		k := &c.Configure
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
	case TypeDeleteQueue:
		c.Queue = r.Str()
	case TypePush:
		if n := r.Count(6); n > 0 {
			c.Push = make([]engine.PushItem, n)
			for i := range c.Push {
				readPushItem(r, &c.Push[i])
			}
		}
	case TypePop:
		p := &c.Pop
		p.Queue, p.Partition, p.Namespace, p.Task, p.Group = r.Str(), r.Str(), r.Str(), r.Str(), r.Str()
		p.Batch = int(r.Varint())
		p.Partitions = int(r.Varint())
		p.AutoAck = r.Bool()
		p.SubscriptionMode = r.U8()
		p.SubscriptionFrom = r.I64()
		p.LeaseSeconds = r.Varint()
	case TypeAck:
		if n := r.Count(37); n > 0 {
			c.Ack = make([]engine.AckItem, n)
			for i := range c.Ack {
				readAckItem(r, &c.Ack[i])
			}
		}
	case TypeExtendLease:
		c.Lease = r.ID()
		c.Seconds = r.Varint()
	case TypeTransaction:
		if n := r.Count(7); n > 0 {
			c.Ops = make([]engine.TxOp, n)
			for i := range c.Ops {
				switch kind := r.U8(); kind {
				case 1:
					c.Ops[i].Push = &engine.PushItem{}
					readPushItem(r, c.Ops[i].Push)
				case 2:
					c.Ops[i].Ack = &engine.AckItem{}
					readAckItem(r, c.Ops[i].Ack)
				default:
					r.Fail("transaction op kind %d", kind)
				}
			}
		}
		if n := r.Count(16); n > 0 {
			c.Leases = make([]engine.ID, n)
			for i := range c.Leases {
				c.Leases[i] = r.ID()
			}
		}
	case TypeReplay:
		c.Replay.PartitionID = r.ID()
		c.Replay.TransactionID = r.Str()
		c.Replay.Group = r.Str()
		readReplayPayload(r, &c.Replay)
	case TypeDeleteDLQ:
		c.Address = Address{PartitionID: r.ID(), TransactionID: r.Str(), Group: r.Str()}
	case TypeMoveToDLQ:
		c.Address = Address{PartitionID: r.ID(), TransactionID: r.Str(), Group: r.Str(), Error: r.Str()}
	case TypeSeek:
		c.Seek = engine.SeekCmd{Group: r.Str(), Queue: r.Str(), Partition: r.Str(), ToEnd: r.Bool(), Timestamp: r.I64()}
	case TypeDeleteGroup:
		c.Group = GroupCmd{Group: r.Str(), Queue: r.Str(), DeleteMetadata: r.Bool()}
	case TypeUpdateSub:
		c.Group = GroupCmd{Group: r.Str(), Timestamp: r.I64()}
	case TypeAnnounce:
		c.Announce = Announce{NodeID: r.Str(), HTTP: r.Str()}
	case TypeSweep:
	case TypePushPrepared:
		c.Prepared = readPrepared(r)
	case TypeMaintenance:
		c.Maintenance = Maintenance{Pop: r.Bool(), Enabled: r.Bool()}
	default:
		return fmt.Errorf("%w: unknown command type %d", ErrCorrupt, c.Type)
	}
	return r.Done()
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
// their meaning (doc.go, "Versions"). Part of the on-disk format — never
// change or reuse a value.
const (
	replaySnapshot = 0 // no corrected payload: replay the dead-letter snapshot
	replayPlain    = 1 // a corrected payload, stored as sent
	replaySealed   = 2 // a corrected payload the broker's edge sealed
)

// replayKind is the payload kind of a replay. Sealed means nothing without a
// corrected payload, so it is not encoded then.
func replayKind(c *engine.ReplayCmd) uint8 {
	switch {
	case c.Payload == nil:
		return replaySnapshot
	case c.Sealed:
		return replaySealed
	}
	return replayPlain
}

func readReplayPayload(r *wire.Reader, c *engine.ReplayCmd) {
	kind := r.U8()
	payload := r.Bytes()
	switch kind {
	case replaySnapshot:
	case replayPlain, replaySealed:
		c.Payload, c.Sealed = payload, kind == replaySealed
		if c.Payload == nil {
			c.Payload = []byte{}
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

// Prepared item flags: part of the on-disk format — never change.
const (
	preparedMinted = 1 << 0
	preparedDup    = 1 << 1
	preparedReject = 1 << 2
)

func appendPrepared(w *wire.Writer, pp *engine.PreparedPush) {
	w.Uvarint(uint64(len(pp.Items)))
	for i := range pp.Items {
		it := &pp.Items[i]
		w.Str(it.TransactionID)
		w.ID(it.MessageID)
		var flags uint8
		if it.Minted {
			flags |= preparedMinted
		}
		if it.DuplicateOf >= 0 {
			flags |= preparedDup
		}
		if it.Reject != "" {
			flags |= preparedReject
		}
		w.U8(flags)
		if it.DuplicateOf >= 0 {
			w.Uvarint(uint64(it.DuplicateOf))
		}
		if it.Reject != "" {
			w.Str(it.Reject)
		}
	}
	w.Uvarint(uint64(len(pp.Groups)))
	for g := range pp.Groups {
		grp := &pp.Groups[g]
		w.Str(grp.Queue)
		w.Str(grp.Partition)
		w.Uvarint(uint64(len(grp.Items)))
		for _, i := range grp.Items {
			w.Uvarint(uint64(i))
		}
		w.U8(uint8(grp.Body.Codec))
		w.U32(grp.Body.RawLen)
		w.Bytes(grp.Body.Data)
	}
}

func readPrepared(r *wire.Reader) *engine.PreparedPush {
	pp := &engine.PreparedPush{}
	n := r.Count(18)
	pp.Items = make([]engine.PreparedItem, n)
	for i := range pp.Items {
		it := &pp.Items[i]
		it.TransactionID = r.Str()
		it.MessageID = r.ID()
		flags := r.U8()
		it.Minted = flags&preparedMinted != 0
		it.DuplicateOf = -1
		if flags&preparedDup != 0 {
			if it.DuplicateOf = int(r.Uvarint()); it.DuplicateOf >= i {
				r.Fail("item %d duplicates a later item", i)
			}
		}
		if flags&preparedReject != 0 {
			it.Reject = r.Str()
		}
		if flags&^(preparedMinted|preparedDup|preparedReject) != 0 {
			r.Fail("item flags %x", flags)
		}
	}
	groups := r.Count(8)
	if groups > 0 {
		pp.Groups = make([]engine.PreparedGroup, groups)
	}
	for g := range pp.Groups {
		grp := &pp.Groups[g]
		grp.Queue, grp.Partition = r.Str(), r.Str()
		grp.Items = make([]int, r.Count(1))
		for k := range grp.Items {
			if grp.Items[k] = int(r.Uvarint()); grp.Items[k] >= n {
				r.Fail("group item %d out of range", grp.Items[k])
			}
		}
		grp.Body.Codec = segment.Codec(r.U8())
		grp.Body.RawLen = r.U32()
		grp.Body.Data = r.Bytes()
		grp.Body.Count = uint32(len(grp.Items))
	}
	return pp
}
