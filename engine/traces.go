package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"sort"

	"github.com/queenmq/queen/engine/keyspace"
)

// Traces (docs/api.md §13): records consumer code attaches to a message
// (msg.trace in the SDKs). They live beside their message: keyed by its
// partition and offset, they go when retention or a queue delete removes
// the message's segment, whatever dead-letter rows it left (a dead letter
// is a snapshot; its traces are the message's).

// MaxTracesPerMessage bounds the trace records of one message: a trace
// beyond it is refused (ErrTraceLimit), so a consumer that traces in a
// loop cannot grow one message without end.
const MaxTracesPerMessage = 256

// ErrTraceLimit is returned by a TraceCmd on a message that holds
// MaxTracesPerMessage traces already.
var ErrTraceLimit = errors.New("engine: the message holds as many traces as it may")

// TraceCmd records one trace of the message (PartitionID, TransactionID).
type TraceCmd struct {
	PartitionID   ID
	TransactionID string
	Group         string // "" means QueueMode
	EventType     string // "" means "info"
	WorkerID      string
	Data          []byte // JSON; empty is null
	Names         []string
}

// Apply records the trace. Value: ID, the new trace's id; Err is
// ErrMessageNotFound when no retained message has that address.
func (c TraceCmd) Apply(b *Batch, st Stamp) Result {
	p := b.e.parts[c.PartitionID]
	if p == nil {
		return Result{Value: ID{}, Err: ErrMessageNotFound}
	}
	rec, ok := b.lookupTxn(p.id, c.TransactionID)
	if !ok || rec.Offset < p.rec.Start {
		return Result{Value: ID{}, Err: ErrMessageNotFound}
	}
	n := 0
	prefix := keyspace.TracePrefix(p.id, rec.Offset)
	if err := scanPrefix(b.pb, prefix, func(_, _ []byte) error { n++; return nil }); err != nil {
		b.fail(err)
		return Result{Value: ID{}, Err: err}
	}
	if n >= MaxTracesPerMessage {
		return Result{Value: ID{}, Err: ErrTraceLimit}
	}
	id := (&minter{seed: st.Seed}).next()
	group, event, data := c.Group, c.EventType, c.Data
	if group == "" {
		group = QueueMode
	}
	if event == "" {
		event = "info"
	}
	if len(data) == 0 {
		data = []byte("null")
	}
	names := slices.Clone(c.Names)
	slices.Sort(names)
	names = slices.Compact(names)
	tr := keyspace.TraceRecord{CreatedAt: st.Time, TransactionID: c.TransactionID, Group: group, EventType: event,
		WorkerID: c.WorkerID, Data: data, Names: names}
	b.set(keyspace.Trace(p.id, rec.Offset, id), tr.Encode(nil))
	loc := binary.BigEndian.AppendUint64(append([]byte(nil), p.id[:]...), uint64(rec.Offset))
	for _, name := range names {
		b.set(keyspace.TraceName(name, st.Time, id), loc)
	}
	return Result{Value: id}
}

// deleteTraces removes the traces of p's messages at offsets [from, to)
// and their name index entries (retention, queue deletion).
func (b *Batch) deleteTraces(p *partition, from, to int64) error {
	lo, hi := keyspace.TraceSpan(p.id, from, to)
	found := false
	err := scanRange(b.pb, lo, hi, func(k, v []byte) error {
		_, _, id, err := keyspace.ParseTrace(k)
		if err != nil {
			return err
		}
		tr, err := keyspace.DecodeTrace(v)
		if err != nil {
			return err
		}
		for _, name := range tr.Names {
			b.del(keyspace.TraceName(name, tr.CreatedAt, id))
		}
		found = true
		return nil
	})
	if err != nil {
		return err
	}
	if found {
		b.delRange(lo, hi)
		b.compact(lo, hi)
	}
	return nil
}

// Trace is one trace record as read.
type Trace struct {
	ID          ID
	PartitionID ID
	Offset      Offset
	keyspace.TraceRecord
}

// Traces returns the traces of a message, oldest first (ties by id), and
// none for an address that names no retained message.
func (e *Engine) Traces(part ID, txn string) ([]Trace, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	p := e.parts[part]
	if p == nil {
		return nil, nil
	}
	rec, ok, err := lookupTxn(e.db, part, txn)
	if err != nil || !ok || rec.Offset < p.rec.Start {
		return nil, err
	}
	var out []Trace
	err = scanPrefix(e.db, keyspace.TracePrefix(part, rec.Offset), func(k, v []byte) error {
		t, err := decodeTraceAt(k, v)
		out = append(out, t)
		return err
	})
	sortTraces(out)
	return out, err
}

// TraceAt is a trace found by name, with its message.
type TraceAt struct {
	Trace
	Queue, Partition string // "" when the partition is gone
	Payload          []byte // the message's stored payload; nil when gone
	HasMessage       bool
}

// TracesByName pages the traces carrying name, oldest first (ties by id),
// and returns how many there are.
func (e *Engine) TracesByName(name string, limit, offset int) ([]TraceAt, int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, 0, err
	}
	var out []TraceAt
	total := 0
	err := scanPrefix(e.db, keyspace.TraceNamePrefix(name), func(k, v []byte) error {
		if e.arrivingPart(v) {
			return nil
		}
		total++
		if total <= offset || len(out) >= limit {
			return nil
		}
		_, _, id, err := keyspace.ParseTraceName(k)
		if err != nil {
			return err
		}
		if len(v) != 24 {
			return keyspace.ErrCorrupt
		}
		var part ID
		copy(part[:], v[:16])
		off := int64(binary.BigEndian.Uint64(v[16:]))
		key := keyspace.Trace(part, off, id)
		_, err = get(e.db, key, func(tv []byte) error {
			t, err := decodeTraceAt(key, tv)
			if err != nil {
				return err
			}
			at := TraceAt{Trace: t}
			if p := e.parts[part]; p != nil {
				at.Queue, at.Partition = p.q.name, p.rec.Name
				f, _, found, err := e.readOne(e.db, p, Offset(off))
				if err != nil {
					return err
				}
				if found {
					at.Payload, at.HasMessage = bytes.Clone(f.Payload), true
				}
			}
			out = append(out, at)
			return nil
		})
		return err
	})
	return out, total, err
}

// TraceName summarises the traces carrying one name.
type TraceName struct {
	Name         string
	TraceCount   int
	MessageCount int   // distinct transaction ids among them
	LastSeen     int64 // the newest one's createdAt
}

// TraceNames pages the distinct trace names, newest lastSeen first (then
// by name), and returns how many there are.
func (e *Engine) TraceNames(limit, offset int) ([]TraceName, int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, 0, err
	}
	var (
		names []TraceName
		txns  map[string]bool
	)
	err := e.scan(keyspace.FamilyTraceName, func(k, v []byte) error {
		name, at, id, err := keyspace.ParseTraceName(k)
		if err != nil {
			return err
		}
		if e.arrivingPart(v) {
			return nil
		}
		if len(names) == 0 || names[len(names)-1].Name != name {
			names = append(names, TraceName{Name: name})
			txns = map[string]bool{}
		}
		n := &names[len(names)-1]
		n.TraceCount++
		n.LastSeen = max(n.LastSeen, at)
		if len(v) == 24 {
			var part ID
			copy(part[:], v[:16])
			_, err := get(e.db, keyspace.Trace(part, int64(binary.BigEndian.Uint64(v[16:])), id), func(tv []byte) error {
				tr, err := keyspace.DecodeTrace(tv)
				if err == nil && !txns[tr.TransactionID] {
					txns[tr.TransactionID] = true
					n.MessageCount++
				}
				return err
			})
			return err
		}
		return keyspace.ErrCorrupt
	})
	if err != nil {
		return nil, 0, err
	}
	sort.SliceStable(names, func(i, j int) bool {
		if names[i].LastSeen != names[j].LastSeen {
			return names[i].LastSeen > names[j].LastSeen
		}
		return names[i].Name < names[j].Name
	})
	total := len(names)
	if offset >= len(names) {
		return []TraceName{}, total, nil
	}
	names = names[offset:]
	if limit < len(names) {
		names = names[:limit]
	}
	return names, total, nil
}

func decodeTraceAt(k, v []byte) (Trace, error) {
	part, off, id, err := keyspace.ParseTrace(k)
	if err != nil {
		return Trace{}, err
	}
	tr, err := keyspace.DecodeTrace(v)
	if err != nil {
		return Trace{}, err
	}
	tr.Data = bytes.Clone(tr.Data)
	return Trace{ID: id, PartitionID: part, Offset: Offset(off), TraceRecord: tr}, nil
}

func sortTraces(ts []Trace) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].CreatedAt != ts[j].CreatedAt {
			return ts[i].CreatedAt < ts[j].CreatedAt
		}
		return bytes.Compare(ts[i].ID[:], ts[j].ID[:]) < 0
	})
}
