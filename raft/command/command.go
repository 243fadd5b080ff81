package command

import (
	"encoding/binary"
	"fmt"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
)

// Type identifies a command: part of the on-disk format — never change or
// reuse a value.
type Type uint8

// Command types.
const (
	TypeConfigure   Type = 1
	TypeDeleteQueue Type = 2
	TypePush        Type = 3
	TypePop         Type = 4
	TypeAck         Type = 5
	TypeExtendLease Type = 6
	TypeTransaction Type = 7
	TypeReplay      Type = 8
	TypeDeleteDLQ   Type = 9
	TypeMoveToDLQ   Type = 10
	TypeSeek        Type = 11
	TypeDeleteGroup Type = 12
	TypeUpdateSub   Type = 13
	TypeAnnounce    Type = 14
	TypeSweep       Type = 15
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
	r := &reader{b: b[2:]}
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		return nil, fmt.Errorf("%w: %d commands in %d bytes", ErrCorrupt, n, len(r.b))
	}
	cmds := make([]Command, n)
	for i := range cmds {
		body := r.bytes()
		if r.err != nil {
			return nil, r.err
		}
		if err := cmds[i].decode(body); err != nil {
			return nil, err
		}
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return cmds, nil
}

func (c *Command) append(dst []byte) []byte {
	w := writer{dst}
	w.u8(uint8(c.Type))
	w.i64(c.Stamp.Time)
	w.id(c.Stamp.Seed)
	switch c.Type {
	case TypeConfigure:
		k := &c.Configure
		w.str(k.Queue)
		w.boolean(k.NamespaceSet)
		w.str(k.Namespace)
		w.boolean(k.TaskSet)
		w.str(k.Task)
		w.boolean(k.Replace)
		w.uvarint(uint64(len(k.Set)))
		for _, v := range k.Set {
			w.u8(uint8(v.Option))
			w.varint(v.Value)
		}
		w.uvarint(uint64(len(k.Reset)))
		for _, o := range k.Reset {
			w.u8(uint8(o))
		}
	case TypeDeleteQueue:
		w.str(c.Queue)
	case TypePush:
		w.uvarint(uint64(len(c.Push)))
		for i := range c.Push {
			w.pushItem(&c.Push[i])
		}
	case TypePop:
		p := &c.Pop
		w.str(p.Queue)
		w.str(p.Partition)
		w.str(p.Namespace)
		w.str(p.Task)
		w.str(p.Group)
		w.varint(int64(p.Batch))
		w.varint(int64(p.Partitions))
		w.boolean(p.AutoAck)
		w.u8(p.SubscriptionMode)
		w.i64(p.SubscriptionFrom)
		w.varint(p.LeaseSeconds)
	case TypeAck:
		w.uvarint(uint64(len(c.Ack)))
		for i := range c.Ack {
			w.ackItem(&c.Ack[i])
		}
	case TypeExtendLease:
		w.id(c.Lease)
		w.varint(c.Seconds)
	case TypeTransaction:
		w.uvarint(uint64(len(c.Ops)))
		for _, op := range c.Ops {
			if op.Push != nil {
				w.u8(1)
				w.pushItem(op.Push)
			} else {
				w.u8(2)
				w.ackItem(op.Ack)
			}
		}
		w.uvarint(uint64(len(c.Leases)))
		for _, l := range c.Leases {
			w.id(l)
		}
	case TypeReplay:
		w.id(c.Replay.PartitionID)
		w.str(c.Replay.TransactionID)
		w.str(c.Replay.Group)
		w.boolean(c.Replay.Payload != nil)
		w.bytes(c.Replay.Payload)
	case TypeDeleteDLQ:
		w.id(c.Address.PartitionID)
		w.str(c.Address.TransactionID)
		w.str(c.Address.Group)
	case TypeMoveToDLQ:
		w.id(c.Address.PartitionID)
		w.str(c.Address.TransactionID)
		w.str(c.Address.Group)
		w.str(c.Address.Error)
	case TypeSeek:
		s := &c.Seek
		w.str(s.Group)
		w.str(s.Queue)
		w.str(s.Partition)
		w.boolean(s.ToEnd)
		w.i64(s.Timestamp)
	case TypeDeleteGroup:
		w.str(c.Group.Group)
		w.str(c.Group.Queue)
		w.boolean(c.Group.DeleteMetadata)
	case TypeUpdateSub:
		w.str(c.Group.Group)
		w.i64(c.Group.Timestamp)
	case TypeAnnounce:
		w.str(c.Announce.NodeID)
		w.str(c.Announce.HTTP)
	case TypeSweep:
	default:
		panic(fmt.Sprintf("command: encode unknown type %d", c.Type))
	}
	return w.b
}

func (c *Command) decode(b []byte) error {
	r := &reader{b: b}
	c.Type = Type(r.u8())
	c.Stamp.Time = r.i64()
	c.Stamp.Seed = r.id()
	switch c.Type {
	case TypeConfigure:
		k := &c.Configure
		k.Queue = r.str()
		k.NamespaceSet = r.boolean()
		k.Namespace = r.str()
		k.TaskSet = r.boolean()
		k.Task = r.str()
		k.Replace = r.boolean()
		if n := r.count(2); n > 0 {
			k.Set = make([]engine.OptionValue, n)
			for i := range k.Set {
				k.Set[i] = engine.OptionValue{Option: engine.Option(r.u8()), Value: r.varint()}
			}
		}
		if n := r.count(1); n > 0 {
			k.Reset = make([]engine.Option, n)
			for i := range k.Reset {
				k.Reset[i] = engine.Option(r.u8())
			}
		}
	case TypeDeleteQueue:
		c.Queue = r.str()
	case TypePush:
		if n := r.count(6); n > 0 {
			c.Push = make([]engine.PushItem, n)
			for i := range c.Push {
				r.pushItem(&c.Push[i])
			}
		}
	case TypePop:
		p := &c.Pop
		p.Queue, p.Partition, p.Namespace, p.Task, p.Group = r.str(), r.str(), r.str(), r.str(), r.str()
		p.Batch = int(r.varint())
		p.Partitions = int(r.varint())
		p.AutoAck = r.boolean()
		p.SubscriptionMode = r.u8()
		p.SubscriptionFrom = r.i64()
		p.LeaseSeconds = r.varint()
	case TypeAck:
		if n := r.count(37); n > 0 {
			c.Ack = make([]engine.AckItem, n)
			for i := range c.Ack {
				r.ackItem(&c.Ack[i])
			}
		}
	case TypeExtendLease:
		c.Lease = r.id()
		c.Seconds = r.varint()
	case TypeTransaction:
		if n := r.count(7); n > 0 {
			c.Ops = make([]engine.TxOp, n)
			for i := range c.Ops {
				switch kind := r.u8(); kind {
				case 1:
					c.Ops[i].Push = &engine.PushItem{}
					r.pushItem(c.Ops[i].Push)
				case 2:
					c.Ops[i].Ack = &engine.AckItem{}
					r.ackItem(c.Ops[i].Ack)
				default:
					r.fail("transaction op kind %d", kind)
				}
			}
		}
		if n := r.count(16); n > 0 {
			c.Leases = make([]engine.ID, n)
			for i := range c.Leases {
				c.Leases[i] = r.id()
			}
		}
	case TypeReplay:
		c.Replay.PartitionID = r.id()
		c.Replay.TransactionID = r.str()
		c.Replay.Group = r.str()
		has := r.boolean()
		payload := r.bytes()
		if has {
			c.Replay.Payload = payload
			if c.Replay.Payload == nil {
				c.Replay.Payload = []byte{}
			}
		}
	case TypeDeleteDLQ:
		c.Address = Address{PartitionID: r.id(), TransactionID: r.str(), Group: r.str()}
	case TypeMoveToDLQ:
		c.Address = Address{PartitionID: r.id(), TransactionID: r.str(), Group: r.str(), Error: r.str()}
	case TypeSeek:
		c.Seek = engine.SeekCmd{Group: r.str(), Queue: r.str(), Partition: r.str(), ToEnd: r.boolean(), Timestamp: r.i64()}
	case TypeDeleteGroup:
		c.Group = GroupCmd{Group: r.str(), Queue: r.str(), DeleteMetadata: r.boolean()}
	case TypeUpdateSub:
		c.Group = GroupCmd{Group: r.str(), Timestamp: r.i64()}
	case TypeAnnounce:
		c.Announce = Announce{NodeID: r.str(), HTTP: r.str()}
	case TypeSweep:
	default:
		return fmt.Errorf("%w: unknown command type %d", ErrCorrupt, c.Type)
	}
	return r.done()
}

func (w *writer) pushItem(it *engine.PushItem) {
	w.str(it.Queue)
	w.str(it.Partition)
	w.str(it.TransactionID)
	w.boolean(it.HasTrace)
	w.id(it.TraceID)
	w.str(it.ProducerSub)
	w.bytes(it.Payload)
}

func (r *reader) pushItem(it *engine.PushItem) {
	it.Queue, it.Partition, it.TransactionID = r.str(), r.str(), r.str()
	it.HasTrace = r.boolean()
	it.TraceID = r.id()
	it.ProducerSub = r.str()
	it.Payload = r.bytes()
}

func (w *writer) ackItem(it *engine.AckItem) {
	w.str(it.TransactionID)
	w.id(it.PartitionID)
	w.str(it.Group)
	w.u8(uint8(it.Status))
	w.id(it.Lease)
	w.str(it.Error)
}

func (r *reader) ackItem(it *engine.AckItem) {
	it.TransactionID = r.str()
	it.PartitionID = r.id()
	it.Group = r.str()
	status := r.u8()
	if status > uint8(cursor.DeadLetter) {
		r.fail("ack status %d", status)
	}
	it.Status = cursor.Status(status)
	it.Lease = r.id()
	it.Error = r.str()
}
