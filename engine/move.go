package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/engine/segment"
)

// Moving a queue from one store to another (ARCHITECTURE.md "Step 2,
// moving a queue"; issue 30). The engine's part is three steps, each
// deterministic and exact:
//
//   - Export (Snapshot.ExportQueue) reads every key of one queue from a
//     consistent view, in chunks of bounded size, resumable from the
//     position each chunk ends at.
//   - Import (ImportQueueCmd, a replicated command) writes the chunks, in
//     order, into the target store: keys and values verbatim, so partition,
//     message, lease and dead-letter row ids stay what they were. The queue
//     stays hidden (an import mark, keyspace.ImportMark) until the chunk
//     marked Last, which loads it into the model as Open does.
//   - Drop (DropQueueCmd) removes every key of the queue from the source,
//     dead-letter rows and traces included, or abandons an import.
//
// Freezing the queue, the placement epochs and the routing are the
// replication layer's (package raft).

// KV is one key and its value, copied verbatim between stores.
type KV struct{ Key, Value []byte }

// QueueChunk is one chunk of a queue's export.
type QueueChunk struct {
	// ID is the queue record's id: ImportQueueCmd.ID.
	ID ID
	// KVs are the chunk's keys, in export order.
	KVs []KV
	// Next is the position to export the following chunk from: opaque
	// (the last key the chunk holds). Export every chunk of a move from
	// one Snapshot; a later view of the same store continues it exactly
	// only if the queue did not change in between (a frozen queue).
	Next []byte
	// Last says the export is complete: this is the import's Last chunk.
	Last bool
}

// ExportChunkBytes is the chunk size the replication layer uses. An import
// chunk is applied in the target group's serial apply, so its size is how
// long that group's pushes and pops wait behind it: 256 KiB applies in
// about 2.3 ms, 1 MiB in about 9 ms, at the same ~100 MB/s either way
// (BenchmarkMove_ImportChunk, 32 KiB messages, a 2-core VM), so the
// smaller size costs the move nothing in throughput and keeps the stall
// within what one large push costs.
const ExportChunkBytes = 256 << 10

// ExportQueue returns the chunk of queue's keys that follows position from
// (nil: the first chunk), at most maxBytes of keys and values, except that
// a chunk always holds at least one unit: a key with the keys that must
// travel with it (a dead-letter row with its two index entries, a trace
// with its name index entries), so a segment larger than maxBytes makes a
// chunk of its own.
//
// The keys are walked in key order of their primary key, family by family
// (engine/keyspace doc.go, "Moving a queue"): the queue record, its
// partition records, their segments, transaction ids and cursors, the
// subscriptions, the dead-letter rows (with their indexes), the txn-expiry
// entries and the traces (with their name index entries). Stream state is
// not exported: a queue a stream reads or writes is refused (ErrInvalid).
func (s *Snapshot) ExportQueue(queue string, from []byte, maxBytes int) (QueueChunk, error) {
	m, err := s.exportOf(queue)
	if err != nil {
		return QueueChunk{}, err
	}
	x := exporter{r: s.snap, from: from, max: maxBytes, chunk: QueueChunk{ID: m.id, Next: from}}
	for _, sp := range m.spans {
		full, err := x.span(sp)
		if err != nil || full {
			return x.chunk, err
		}
	}
	x.chunk.Last = true
	return x.chunk, nil
}

// queueExport is what every chunk of one queue's export from a Snapshot
// shares: the queue's id and its key ranges, found once (the partitions
// are a scan of every partition record).
type queueExport struct {
	queue string
	id    ID
	spans []exportSpan
}

// exportOf returns the export of queue from the view, made at its first
// chunk.
func (s *Snapshot) exportOf(queue string) (*queueExport, error) {
	s.exportMu.Lock()
	defer s.exportMu.Unlock()
	if m := s.export; m != nil && m.queue == queue {
		return m, nil
	}
	r := s.snap
	var qrec keyspace.QueueRecord
	found, err := get(r, keyspace.Queue(queue), func(v []byte) (err error) {
		qrec, err = keyspace.DecodeQueue(v)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, ErrQueueNotFound
	}
	if err := refuseStreams(r, queue); err != nil {
		return nil, err
	}
	parts, err := partitionsOf(r, queue)
	if err != nil {
		return nil, err
	}
	s.export = &queueExport{queue: queue, id: qrec.ID, spans: exportSpans(queue, parts)}
	return s.export, nil
}

// refuseStreams refuses to export a queue a streaming query reads or
// writes: streams run in group 1 with their queues.
func refuseStreams(r pebble.Reader, queue string) error {
	return scanPrefix(r, keyspace.FamilyPrefix(keyspace.FamilyStreamQuery), func(k, v []byte) error {
		q, err := keyspace.DecodeStreamQuery(v)
		if err != nil {
			return err
		}
		if q.SourceQueue == queue || (q.HasSink && q.SinkQueue == queue) {
			return fmt.Errorf("%w: queue %q is read or written by stream %q; queues of streams are not moved", ErrInvalid, queue, k[1:])
		}
		return nil
	})
}

// partitionsOf returns the ids of queue's partitions in r, in key order.
func partitionsOf(r pebble.Reader, queue string) ([]ID, error) {
	var ids []ID
	err := scanPrefix(r, keyspace.FamilyPrefix(keyspace.FamilyPartition), func(k, v []byte) error {
		rec, err := keyspace.DecodePartition(v)
		if err == nil && rec.Queue == queue {
			var id ID
			copy(id[:], k[1:])
			ids = append(ids, id)
		}
		return err
	})
	return ids, err
}

// exportSpan is one key range of an export; unit, when set, expands one
// key of it into the keys that travel with it.
type exportSpan struct {
	lo, hi []byte
	unit   func(r pebble.Reader, k, v []byte) ([]KV, error)
}

// exportSpans lists a queue's key ranges in ascending key order, so that
// a position (the last primary key exported) orders against all of them.
func exportSpans(queue string, parts []ID) []exportSpan {
	point := func(k []byte) exportSpan { return exportSpan{lo: k, hi: append(bytes.Clone(k), 0)} }
	prefix := func(p []byte) exportSpan { return exportSpan{lo: p, hi: keyspace.PrefixEnd(p)} }
	spans := []exportSpan{point(keyspace.Queue(queue))}
	for _, id := range parts {
		spans = append(spans, point(keyspace.Partition(id)))
	}
	for _, f := range []keyspace.Family{keyspace.FamilySegment, keyspace.FamilyTxn, keyspace.FamilyCursor} {
		for _, id := range parts {
			spans = append(spans, prefix(keyspace.PartitionPrefix(f, id)))
		}
	}
	spans = append(spans, prefix(keyspace.Sub(queue, "")))
	dlq := prefix(keyspace.DLQQueuePrefix(queue, "", false))
	dlq.unit = deadLetterUnit
	spans = append(spans, dlq)
	for _, id := range parts {
		spans = append(spans, prefix(keyspace.PartitionPrefix(keyspace.FamilyTxnExpiry, id)))
	}
	for _, id := range parts {
		sp := prefix(keyspace.PartitionPrefix(keyspace.FamilyTrace, id))
		sp.unit = traceUnit
		spans = append(spans, sp)
	}
	return spans
}

// deadLetterUnit expands a (queue, group) index entry into its row and its
// two index entries.
func deadLetterUnit(r pebble.Reader, k, _ []byte) ([]KV, error) {
	row, err := keyspace.RowKeyOfIndex(k)
	if err != nil {
		return nil, err
	}
	var unit []KV
	found, err := get(r, keyspace.DLQ(row), func(v []byte) error {
		rec, err := keyspace.DecodeDeadLetter(v)
		if err != nil {
			return err
		}
		unit = []KV{{keyspace.DLQ(row), bytes.Clone(v)},
			{keyspace.DLQAddr(rec.PartitionID, rec.TransactionID, row), []byte{}},
			{bytes.Clone(k), []byte{}}}
		return nil
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: dead-letter index names missing row %x", ErrCorrupt, row)
	}
	return unit, err
}

// traceUnit expands a trace record into itself and its name index entries.
func traceUnit(_ pebble.Reader, k, v []byte) ([]KV, error) {
	part, off, id, err := keyspace.ParseTrace(k)
	if err != nil {
		return nil, err
	}
	tr, err := keyspace.DecodeTrace(v)
	if err != nil {
		return nil, err
	}
	unit := []KV{{bytes.Clone(k), bytes.Clone(v)}}
	loc := traceLoc(part, off)
	for _, name := range tr.Names {
		unit = append(unit, KV{keyspace.TraceName(name, tr.CreatedAt, id), loc})
	}
	return unit, nil
}

// traceLoc is the value of a trace name index entry.
func traceLoc(part ID, off int64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), part[:]...), uint64(off))
}

// exporter fills one chunk.
type exporter struct {
	r     pebble.Reader
	from  []byte
	max   int
	size  int
	chunk QueueChunk
}

var errChunkFull = errors.New("chunk full")

// span adds sp's keys after the position to the chunk; it reports whether
// the chunk filled up.
func (x *exporter) span(sp exportSpan) (bool, error) {
	lo := sp.lo
	if x.from != nil && bytes.Compare(x.from, lo) >= 0 {
		if bytes.Compare(x.from, sp.hi) >= 0 {
			return false, nil
		}
		lo = append(bytes.Clone(x.from), 0)
	}
	err := scanRange(x.r, lo, sp.hi, func(k, v []byte) error {
		unit := []KV{{bytes.Clone(k), bytes.Clone(v)}}
		if sp.unit != nil {
			var err error
			if unit, err = sp.unit(x.r, k, v); err != nil {
				return err
			}
		}
		n := 0
		for _, kv := range unit {
			n += len(kv.Key) + len(kv.Value)
		}
		if len(x.chunk.KVs) > 0 && x.size+n > x.max {
			return errChunkFull
		}
		x.chunk.KVs = append(x.chunk.KVs, unit...)
		x.size += n
		x.chunk.Next = bytes.Clone(k)
		return nil
	})
	if errors.Is(err, errChunkFull) {
		return true, nil
	}
	return false, err
}

// ImportQueueCmd writes one chunk of a queue exported from another store
// (Snapshot.ExportQueue). Chunks are numbered from 0 and applied in order:
// a chunk already applied is a no-op (a retried proposal that lands
// twice), a chunk out of order is refused. Every key must be the queue's:
// a family the export walks, a partition the import's partition records
// declare, the queue's name, and the keys of a unit together; otherwise
// the whole chunk is refused and nothing is written. The first chunk must
// open with the queue record, whose id must be ID, and the queue must not
// exist here: an import never writes over a queue. Until the Last chunk
// the queue is invisible to reads and refused by writes (ErrQueueNotFound);
// the Last chunk loads it into the model as Open does, and from then on
// it is a queue like any other. A queue already imported answers every
// chunk of its import as a no-op.
type ImportQueueCmd struct {
	// Group is the Raft group that imports: it routes the command
	// (cluster.Host); the engine does not read it.
	Group uint32
	Queue string
	ID    ID
	// Epoch identifies the move (the placement epoch it flips to): a chunk
	// of another move of the same queue is refused while one is under way.
	Epoch uint64
	Seq   uint32
	Last  bool
	KVs   []KV
}

// ImportResult is the answer of an ImportQueueCmd.
type ImportResult struct {
	// Next is the sequence number the import takes next (0 when Done
	// answers a chunk of an import that ended earlier).
	Next uint32
	// Done says the queue is imported: live here.
	Done bool
}

// importing is an import under way: its mark, and the partitions its
// chunks declared so far (ids to names).
type importing struct {
	rec   keyspace.ImportRecord
	parts map[ID]string
}

// declare records a partition of the import of queue.
func (im *importing) declare(e *Engine, queue string, id ID, name string) {
	im.parts[id] = name
	e.importParts[id] = queue
}

// loadImports reads the import marks (load).
func (e *Engine) loadImports() error {
	return scanPrefix(e.db, keyspace.ImportMarkPrefix(), func(k, v []byte) error {
		name, err := keyspace.ParseImportMark(k)
		if err != nil {
			return err
		}
		rec, err := keyspace.DecodeImport(v)
		if err != nil {
			return err
		}
		e.imports[name] = &importing{rec: rec, parts: map[ID]string{}}
		return nil
	})
}

// Apply writes the chunk. Value: ImportResult. The Last chunk wakes the
// queue.
func (c ImportQueueCmd) Apply(b *Batch, _ Stamp) Result {
	v, err := b.importQueue(&c)
	r := Result{Value: v, Err: err}
	if err == nil && c.Last {
		r.Wake = []string{c.Queue}
	}
	return r
}

func (b *Batch) importQueue(c *ImportQueueCmd) (ImportResult, error) {
	e := b.e
	if err := ValidateQueueName(c.Queue); err != nil {
		return ImportResult{}, err
	}
	im := e.imports[c.Queue]
	if im == nil {
		if q := e.queues[c.Queue]; q != nil {
			if q.rec.ID == c.ID {
				return ImportResult{Done: true}, nil // a repeat of an import that ended
			}
			return ImportResult{}, fmt.Errorf("%w: queue %q exists here; an import does not write over a queue", ErrInvalid, c.Queue)
		}
		if c.Seq != 0 {
			return ImportResult{}, fmt.Errorf("%w: chunk %d of an import of %q that has not begun", ErrInvalid, c.Seq, c.Queue)
		}
		im = &importing{rec: keyspace.ImportRecord{ID: c.ID, Epoch: c.Epoch}, parts: map[ID]string{}}
	} else if im.rec.ID != c.ID || im.rec.Epoch != c.Epoch {
		return ImportResult{Next: im.rec.Next}, fmt.Errorf("%w: another import of %q is under way", ErrInvalid, c.Queue)
	}
	switch {
	case c.Seq < im.rec.Next:
		return ImportResult{Next: im.rec.Next}, nil // applied already
	case c.Seq > im.rec.Next:
		return ImportResult{Next: im.rec.Next}, fmt.Errorf("%w: chunk %d of %q out of order, expected %d", ErrInvalid, c.Seq, c.Queue, im.rec.Next)
	}
	declared, err := e.checkChunk(c, im)
	if err != nil {
		return ImportResult{Next: im.rec.Next}, err
	}
	for _, kv := range c.KVs {
		b.set(kv.Key, kv.Value)
	}
	e.imports[c.Queue] = im
	for _, d := range declared {
		im.declare(e, c.Queue, d.id, d.name)
	}
	im.rec.Next = c.Seq + 1
	if !c.Last {
		b.set(keyspace.ImportMark(c.Queue), im.rec.Encode(nil))
		return ImportResult{Next: im.rec.Next}, nil
	}
	b.del(keyspace.ImportMark(c.Queue))
	ids := make([]ID, 0, len(im.parts))
	for id := range im.parts {
		delete(e.importParts, id)
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	delete(e.imports, c.Queue)
	if err := e.loadQueue(b.pb, c.Queue, ids); err != nil {
		b.fail(err)
		return ImportResult{Next: im.rec.Next}, err
	}
	return ImportResult{Next: im.rec.Next, Done: true}, nil
}

type declaredPart struct {
	id   ID
	name string
}

// checkChunk checks every key of a chunk against the import, before
// anything is written, and returns the partitions it declares.
func (e *Engine) checkChunk(c *ImportQueueCmd, im *importing) ([]declaredPart, error) {
	bad := func(k []byte, why string, args ...any) error {
		return fmt.Errorf("%w: import of %q: key %x: %s", ErrInvalid, c.Queue, k, fmt.Sprintf(why, args...))
	}
	var declared []declaredPart
	inChunk := map[ID]bool{}
	names := map[string]bool{}
	for _, n := range im.parts {
		names[n] = true
	}
	isPart := func(id ID) bool {
		_, ok := im.parts[id]
		return ok || inChunk[id]
	}
	// Units: the rows and trace records of this chunk, which their index
	// entries must follow.
	rows := map[keyspace.RowKey]keyspace.DeadLetterRecord{}
	traces := map[string]keyspace.TraceRecord{}
	owed := map[string]bool{} // index entries a unit of the chunk still owes
	if c.Seq == 0 && (len(c.KVs) == 0 || !bytes.Equal(c.KVs[0].Key, keyspace.Queue(c.Queue))) {
		return nil, fmt.Errorf("%w: import of %q: the first chunk must open with the queue record", ErrInvalid, c.Queue)
	}
	for i, kv := range c.KVs {
		k, v := kv.Key, kv.Value
		if len(k) == 0 {
			return nil, bad(k, "empty key")
		}
		switch f := keyspace.Family(k[0]); f {
		case keyspace.FamilyQueue:
			if c.Seq != 0 || i != 0 {
				return nil, bad(k, "a queue record past the first key")
			}
			rec, err := keyspace.DecodeQueue(v)
			if err != nil {
				return nil, bad(k, "%v", err)
			}
			if rec.ID != c.ID {
				return nil, bad(k, "queue id %x, the import's is %x", rec.ID, c.ID)
			}
		case keyspace.FamilyPartition:
			rec, err := keyspace.DecodePartition(v)
			if err != nil || len(k) != 17 {
				return nil, bad(k, "partition record: %v", err)
			}
			var id ID
			copy(id[:], k[1:])
			switch {
			case rec.Queue != c.Queue:
				return nil, bad(k, "a partition of queue %q", rec.Queue)
			case isPart(id) || e.parts[id] != nil || e.importParts[id] != "":
				return nil, bad(k, "partition id in use")
			case names[rec.Name]:
				return nil, bad(k, "partition %q declared twice", rec.Name)
			case ValidateName("partition", rec.Name) != nil:
				return nil, bad(k, "partition name %q", rec.Name)
			}
			names[rec.Name] = true
			inChunk[id] = true
			declared = append(declared, declaredPart{id, rec.Name})
		case keyspace.FamilySegment, keyspace.FamilyTxn, keyspace.FamilyCursor, keyspace.FamilyTxnExpiry, keyspace.FamilyTrace:
			id, err := keyspace.ParsePartitionKey(k)
			if err == nil {
				err = checkPartitionKey(f, k, v)
			}
			if err != nil {
				return nil, bad(k, "%v", err)
			}
			if !isPart(id) {
				return nil, bad(k, "partition %x is not declared by the import", id)
			}
			if f == keyspace.FamilyTrace {
				tr, _ := keyspace.DecodeTrace(v)
				traces[string(k)] = tr
				_, _, tid, _ := keyspace.ParseTrace(k)
				for _, name := range tr.Names {
					owed[string(keyspace.TraceName(name, tr.CreatedAt, tid))] = true
				}
			}
		case keyspace.FamilySub:
			q, _, err := keyspace.ParseSub(k)
			if err == nil {
				_, err = keyspace.DecodeSub(v)
			}
			if err != nil || q != c.Queue {
				return nil, bad(k, "not a subscription to the queue (%v)", err)
			}
		case keyspace.FamilyDLQ:
			row, err := keyspace.ParseDLQ(k)
			if err != nil {
				return nil, bad(k, "%v", err)
			}
			rec, err := keyspace.DecodeDeadLetter(v)
			if err != nil || rec.Queue != c.Queue {
				return nil, bad(k, "not a dead letter of the queue (%v)", err)
			}
			rows[row] = rec
			owed[string(keyspace.DLQAddr(rec.PartitionID, rec.TransactionID, row))] = true
			owed[string(keyspace.DLQQueue(rec.Queue, rec.Group, row))] = true
		case keyspace.FamilyDLQAddr, keyspace.FamilyDLQQueue:
			row, err := keyspace.RowKeyOfIndex(k)
			if err != nil {
				return nil, bad(k, "%v", err)
			}
			rec, ok := rows[row]
			if !ok {
				return nil, bad(k, "a dead-letter index entry without its row")
			}
			want := keyspace.DLQAddr(rec.PartitionID, rec.TransactionID, row)
			if f == keyspace.FamilyDLQQueue {
				want = keyspace.DLQQueue(rec.Queue, rec.Group, row)
			}
			if !bytes.Equal(k, want) || len(v) != 0 {
				return nil, bad(k, "a dead-letter index entry that does not match its row")
			}
			delete(owed, string(k))
		case keyspace.FamilyTraceName:
			name, at, id, err := keyspace.ParseTraceName(k)
			if err != nil || len(v) != 24 {
				return nil, bad(k, "trace name entry (%v)", err)
			}
			var part ID
			copy(part[:], v[:16])
			tr, ok := traces[string(keyspace.Trace(part, int64(binary.BigEndian.Uint64(v[16:])), id))]
			if !ok || tr.CreatedAt != at || !slices.Contains(tr.Names, name) {
				return nil, bad(k, "a trace name entry without its trace")
			}
			delete(owed, string(k))
		default:
			return nil, bad(k, "family %#x is not a queue's", byte(f))
		}
	}
	if len(owed) > 0 {
		return nil, fmt.Errorf("%w: import of %q: %d index entries of the chunk's dead letters or traces are missing", ErrInvalid, c.Queue, len(owed))
	}
	return declared, nil
}

// checkPartitionKey checks the layout of a key of a per-partition family
// and decodes its value where the model or a reader will.
func checkPartitionKey(f keyspace.Family, k, v []byte) error {
	var err error
	switch f {
	case keyspace.FamilySegment:
		// The header and the CRC over the whole segment, not the body's
		// frames: a chunk is applied without decompressing anything.
		var base int64
		if _, base, err = keyspace.ParseSegment(k); err == nil {
			var h segment.Header
			if h, err = segment.ReadHeader(v); err == nil && h.Base != base {
				err = fmt.Errorf("segment of base %d under key base %d", h.Base, base)
			}
		}
	case keyspace.FamilyTxn:
		_, err = keyspace.DecodeTxn(v)
	case keyspace.FamilyCursor:
		_, err = keyspace.DecodeCursor(v)
	case keyspace.FamilyTxnExpiry:
		if _, _, err = keyspace.ParseTxnExpiry(k); err == nil {
			_, err = keyspace.DecodeTxnExpiry(v)
		}
	case keyspace.FamilyTrace:
		if _, _, _, err = keyspace.ParseTrace(k); err == nil {
			_, err = keyspace.DecodeTrace(v)
		}
	}
	return err
}

// DropQueueCmd removes every key of a queue: what DeleteQueueCmd removes,
// and its dead-letter rows (by queue name, whichever partition they came
// from) and their indexes too. It drops the source copy of a moved queue,
// and abandons an import under way (a move that failed). ID must be the
// queue record's id (the import's ID), so a drop retried after the queue
// was created again under the same name drops nothing.
type DropQueueCmd struct {
	// Group is the Raft group to drop from: it routes the command
	// (cluster.Host); the engine does not read it.
	Group uint32
	Queue string
	ID    ID
}

// Apply drops the queue. Value: bool, whether there was a queue (or an
// import) with that id to drop. It wakes the queue.
func (c DropQueueCmd) Apply(b *Batch, _ Stamp) Result {
	v, err := b.dropQueue(c.Queue, c.ID)
	return Result{Value: v, Err: err, Wake: []string{c.Queue}}
}

func (b *Batch) dropQueue(name string, id ID) (bool, error) {
	e := b.e
	switch q, im := e.queues[name], e.imports[name]; {
	case q != nil && q.rec.ID == id:
		b.tombstoneParts(q)
		b.deleteQueue(name)
	case im != nil && im.rec.ID == id:
		b.dropImport(name, im)
	default:
		return false, nil
	}
	return true, b.deleteDeadLettersOf(name)
}

// dropImport removes what an unfinished import wrote.
func (b *Batch) dropImport(name string, im *importing) {
	e := b.e
	ids := make([]ID, 0, len(im.parts))
	for id := range im.parts {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		if err := b.deleteTraces(&partition{id: id, rec: keyspace.PartitionRecord{Next: 1<<63 - 1}}, 0, 1<<63-1); err != nil {
			b.fail(err)
		}
		for _, f := range []keyspace.Family{keyspace.FamilySegment, keyspace.FamilyTxn, keyspace.FamilyCursor, keyspace.FamilyTxnExpiry} {
			lo := keyspace.PartitionPrefix(f, id)
			b.delRange(lo, keyspace.PrefixEnd(lo))
		}
		b.del(keyspace.Partition(id))
		delete(e.importParts, id)
	}
	lo := keyspace.Sub(name, "")
	b.delRange(lo, keyspace.PrefixEnd(lo))
	b.del(keyspace.Queue(name))
	b.del(keyspace.ImportMark(name))
	delete(e.imports, name)
}

// deleteDeadLettersOf removes every dead-letter row filed under queue.
func (b *Batch) deleteDeadLettersOf(queue string) error {
	var rows []keyspace.RowKey
	err := scanPrefix(b.pb, keyspace.DLQQueuePrefix(queue, "", false), func(k, _ []byte) error {
		row, err := keyspace.RowKeyOfIndex(k)
		rows = append(rows, row)
		return err
	})
	for _, row := range rows {
		if err != nil {
			break
		}
		var d DeadLetter
		var found bool
		if d, found, err = getDeadLetter(b.pb, row); err == nil && found {
			b.deleteDeadLetter(row, &d.DeadLetterRecord)
		}
	}
	if err != nil {
		b.fail(err)
	}
	return err
}

// arriving reports whether queue is being imported: hidden from reads,
// refused by writes.
func (e *Engine) arriving(queue string) bool { return e.imports[queue] != nil }

// ImportProgress reports the import of queue under way here: the queue id
// and epoch it carries and the chunk it takes next. A mover that lost
// track (a new leader) continues from next, or abandons the import
// (DropQueueCmd with the id) when the source may have changed since.
func (e *Engine) ImportProgress(queue string) (id ID, epoch uint64, next uint32, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	im := e.imports[queue]
	if im == nil {
		return ID{}, 0, 0, false
	}
	return im.rec.ID, im.rec.Epoch, im.rec.Next, true
}

// ImportsUnderWay lists the queues being imported, in name order.
func (e *Engine) ImportsUnderWay() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	names := make([]string, 0, len(e.imports))
	for n := range e.imports {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// arrivingPart reports whether a trace name entry's value (partition id,
// offset) locates a trace of a queue being imported.
func (e *Engine) arrivingPart(loc []byte) bool {
	if len(e.importParts) == 0 || len(loc) < 16 {
		return false
	}
	var id ID
	copy(id[:], loc[:16])
	_, ok := e.importParts[id]
	return ok
}
