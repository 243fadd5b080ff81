package command

import (
	"math"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/segment"
	"github.com/queenmq/queen/internal/wire"
)

// The codecs of the prepared push (its items and segment bodies, encoded
// before proposing) and of the streams' commands (a query's registration,
// a cycle with its prepared sink push): the table's largest codecs, kept
// apart from command.go's table. Their layouts are in doc.go.

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

func appendStreamRegister(w *wire.Writer, c engine.StreamRegisterCmd) {
	w.Str(c.Name)
	w.Str(c.SourceQueue)
	w.Bool(c.HasSink)
	w.Str(c.SinkQueue)
	w.Str(c.ConfigHash)
	w.Bool(c.Reset)
}

func readStreamRegister(r *wire.Reader) engine.StreamRegisterCmd {
	return engine.StreamRegisterCmd{Name: r.Str(), SourceQueue: r.Str(), HasSink: r.Bool(), SinkQueue: r.Str(),
		ConfigHash: r.Str(), Reset: r.Bool()}
}

// State op kinds: part of the on-disk format — never change.
const (
	stateUpsert = 1
	stateDelete = 2
)

func appendCycle(w *wire.Writer, c *engine.PreparedCycle) {
	w.ID(c.QueryID)
	w.ID(c.PartitionID)
	w.Str(c.Group)
	w.Uvarint(uint64(len(c.Ops)))
	for i := range c.Ops {
		op := &c.Ops[i]
		if op.Delete {
			w.U8(stateDelete)
			w.Str(op.Key)
			continue
		}
		w.U8(stateUpsert)
		w.Str(op.Key)
		w.Bool(op.HasWindowEnd)
		w.I64(int64(math.Float64bits(op.WindowEnd)))
		w.Bytes(op.Value)
	}
	w.Bool(c.Ack != nil)
	if a := c.Ack; a != nil {
		w.Str(a.TransactionID)
		w.ID(a.Lease)
		w.U8(uint8(a.Status))
		w.Varint(a.Count)
		w.Str(a.Error)
	}
	w.Bool(c.KeepLease)
	w.B = append(w.B, c.Digest[:]...)
	w.Bool(c.Push != nil)
	if c.Push != nil {
		appendPrepared(w, c.Push)
	}
}
