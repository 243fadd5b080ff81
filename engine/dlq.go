package engine

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
)

// DeadLetter is one dead-letter row: a snapshot of the message and of why it
// failed, independent of the segments it came from (docs/semantics.md §9, docs/decisions.md B2).
type DeadLetter struct {
	Row       keyspace.RowKey
	FailedAt  int64
	Queue     string
	Partition string
	Group     string
	keyspace.DeadLetterRecord
}

// DLQFilter selects dead-letter rows (docs/decisions.md B1). Zero fields do not filter.
type DLQFilter struct {
	Queue     string
	Group     string
	Partition string
	From, To  int64 // failedAt bounds in µs, inclusive; 0 = open
	Limit     int   // page size; <= 0 means 100
	Offset    int
}

func (b *Batch) putDeadLetter(row keyspace.RowKey, rec *keyspace.DeadLetterRecord) {
	b.buf = rec.Encode(b.buf[:0])
	b.set(keyspace.DLQ(row), b.buf)
	b.set(keyspace.DLQAddr(rec.PartitionID, rec.TransactionID, row), nil)
	b.set(keyspace.DLQQueue(rec.Queue, rec.Group, row), nil)
}

func (b *Batch) deleteDeadLetter(row keyspace.RowKey, rec *keyspace.DeadLetterRecord) {
	b.del(keyspace.DLQ(row))
	b.del(keyspace.DLQAddr(rec.PartitionID, rec.TransactionID, row))
	b.del(keyspace.DLQQueue(rec.Queue, rec.Group, row))
}

// getDeadLetter reads one row.
func getDeadLetter(r pebble.Reader, row keyspace.RowKey) (DeadLetter, bool, error) {
	var rec keyspace.DeadLetterRecord
	found, err := get(r, keyspace.DLQ(row), func(v []byte) (err error) {
		rec, err = keyspace.DecodeDeadLetter(v)
		return err
	})
	if err != nil {
		return DeadLetter{}, false, fmt.Errorf("engine: read dead letter: %w", err)
	}
	if !found {
		return DeadLetter{}, false, nil
	}
	return DeadLetter{Row: row, FailedAt: row.FailedAt(), Queue: rec.Queue, Partition: rec.Partition, Group: rec.Group, DeadLetterRecord: rec}, true, nil
}

// ListDLQ returns one page of dead-letter rows, newest failure first, and
// the number of rows matching the filter (docs/decisions.md B1: a true total).
func (e *Engine) ListDLQ(f DLQFilter) ([]DeadLetter, int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, 0, err
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if e.arriving(f.Queue) {
		return nil, 0, nil
	}
	rows, err := e.dlqCandidates(f)
	if err != nil {
		return nil, 0, err
	}
	// Rows must be read to filter on what their keys do not hold: the
	// partition always, the group when the scan was not by group, the
	// queue while one is arriving (move.go) and the scan was not by queue.
	hide := f.Queue == "" && len(e.imports) > 0
	needRecord := f.Partition != "" || (f.Group != "" && f.Queue == "") || hide
	var (
		page  []DeadLetter
		total int
	)
	for _, row := range rows {
		if (f.From != 0 && row.FailedAt() < f.From) || (f.To != 0 && row.FailedAt() > f.To) {
			continue
		}
		inPage := total >= f.Offset && len(page) < f.Limit
		if !needRecord && !inPage {
			total++
			continue
		}
		d, found, err := getDeadLetter(e.db, row)
		if err != nil {
			return nil, 0, err
		}
		if !found {
			return nil, 0, fmt.Errorf("%w: dead-letter index names missing row %x", ErrCorrupt, row)
		}
		if (f.Partition != "" && d.Partition != f.Partition) || (f.Group != "" && d.Group != f.Group) || e.arriving(d.Queue) {
			continue
		}
		if inPage {
			page = append(page, d)
		}
		total++
	}
	return page, total, nil
}

// dlqCandidates returns the row keys the filter's queue and group select,
// newest failure first.
func (e *Engine) dlqCandidates(f DLQFilter) ([]keyspace.RowKey, error) {
	prefix := keyspace.FamilyPrefix(keyspace.FamilyDLQ)
	if f.Queue != "" {
		prefix = keyspace.DLQQueuePrefix(f.Queue, f.Group, f.Group != "")
	}
	var rows []keyspace.RowKey
	err := scanPrefix(e.db, prefix, func(k, _ []byte) error {
		row, err := keyspace.RowKeyOfIndex(k)
		if err == nil {
			rows = append(rows, row)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// A queue-only scan walks group by group: order across groups.
	sort.Slice(rows, func(i, j int) bool { return bytes.Compare(rows[i][:], rows[j][:]) > 0 })
	return rows, nil
}

// deadLettersAt returns the rows of an address, optionally of one group.
func deadLettersAt(r pebble.Reader, part ID, txn, group string) ([]DeadLetter, error) {
	var out []DeadLetter
	err := scanPrefix(r, keyspace.DLQAddrPrefix(part, txn), func(k, _ []byte) error {
		row, err := keyspace.RowKeyOfIndex(k)
		if err != nil {
			return err
		}
		d, found, err := getDeadLetter(r, row)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: dead-letter index names missing row %x", ErrCorrupt, row)
		}
		if group == "" || d.Group == group {
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// DeadLettersAt returns the dead-letter rows of an address.
func (e *Engine) DeadLettersAt(part ID, txn string) ([]DeadLetter, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	rows, err := deadLettersAt(e.db, part, txn, "")
	return e.hideArriving(rows), err
}

// hideArriving drops the rows of queues being imported (move.go).
func (e *Engine) hideArriving(rows []DeadLetter) []DeadLetter {
	if len(e.imports) == 0 {
		return rows
	}
	return slices.DeleteFunc(rows, func(d DeadLetter) bool { return e.arriving(d.Queue) })
}

// deleteDLQ removes the dead-letter rows of an address (of one group when
// group is set). It returns ErrNoDeadLetter when there is none: live messages
// are immutable and cannot be deleted (docs/semantics.md §9.3).
func (b *Batch) deleteDLQ(part ID, txn, group string) (int, error) {
	rows, err := deadLettersAt(b.pb, part, txn, group)
	if err != nil {
		return 0, err
	}
	if rows = b.e.hideArriving(rows); len(rows) == 0 {
		return 0, ErrNoDeadLetter
	}
	for i := range rows {
		b.deleteDeadLetter(rows[i].Row, &rows[i].DeadLetterRecord)
	}
	return len(rows), nil
}

// ReplayCmd re-publishes a dead-lettered message (docs/decisions.md C4).
type ReplayCmd struct {
	PartitionID   ID
	TransactionID string
	Group         string // "" replays the address for every group that dead-lettered it
	Payload       []byte // nil replays the snapshot; else a corrected payload (docs/decisions.md B4)
	// Sealed says the corrected Payload is an envelope the broker's edge
	// sealed (PushItem.Sealed). Without a Payload it is ignored: the
	// snapshot is replayed with its own sealed bit.
	Sealed bool
	// Restamp says a corrected Payload is stamped with ProducerSub, the
	// replaying caller's verified subject ("" when anonymous), in place of
	// the dead letter's: whoever writes a payload is its producer, or any
	// read-write caller could publish words under another's name
	// (docs/semantics.md §9.2). The edge sets it on every corrected replay;
	// replays logged before it existed lack it and keep the snapshot's
	// producer, as they did when first applied. Without a Payload it is
	// ignored: the snapshot is replayed with its own producer.
	Restamp     bool
	ProducerSub string
}

// ReplayResult reports a replay.
type ReplayResult struct {
	Queue       string
	Partition   string
	Push        PushResult
	RowsRemoved int
}

// replay pushes the newest snapshot of an address back to its queue and
// partition with a fresh transaction id minted from the new message id, and
// removes the address's rows in the same atomic batch, so the row goes only
// if the push is accepted (docs/decisions.md C4, docs/semantics.md §9.2). The snapshot keeps its
// sealed bit, so a sealed payload is re-pushed as it is, never sealed twice;
// a corrected payload is sealed as cmd.Sealed says, and produced by
// cmd.ProducerSub when cmd.Restamp says so. The rows keep their own
// producerSub until they go.
func (b *Batch) replay(st Stamp, cmd ReplayCmd) (ReplayResult, error) {
	rows, err := deadLettersAt(b.pb, cmd.PartitionID, cmd.TransactionID, cmd.Group)
	if err != nil {
		return ReplayResult{}, err
	}
	if rows = b.e.hideArriving(rows); len(rows) == 0 {
		return ReplayResult{}, ErrNoDeadLetter
	}
	newest := rows[0]
	for _, d := range rows[1:] {
		if bytes.Compare(d.Row[:], newest.Row[:]) > 0 {
			newest = d
		}
	}
	payload, sealed, producer := newest.Payload, newest.Sealed, newest.ProducerSub
	if cmd.Payload != nil {
		payload, sealed = cmd.Payload, cmd.Sealed
		if cmd.Restamp {
			producer = cmd.ProducerSub
		}
	}
	item := PushItem{Queue: newest.Queue, Partition: newest.Partition, Payload: payload, Sealed: sealed,
		TraceID: newest.TraceID, HasTrace: newest.HasTrace, ProducerSub: producer}
	m := &minter{seed: st.Seed}
	pushed := b.push(st.Time, m, []PushItem{item})[0]
	res := ReplayResult{Queue: newest.Queue, Partition: newest.Partition, Push: pushed}
	if pushed.Status != Queued {
		return res, pushed.Err
	}
	for i := range rows {
		b.deleteDeadLetter(rows[i].Row, &rows[i].DeadLetterRecord)
	}
	res.RowsRemoved = len(rows)
	return res, nil
}
