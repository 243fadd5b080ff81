package engine

import (
	"errors"
	"fmt"

	"github.com/queenmq/queen/engine/keyspace"
)

// The outbox (ARCHITECTURE.md, "Scale-out", a transaction): a transaction
// whose acks and required leases lie in one Raft group, its home, and
// whose pushes reach queues of other groups commits in the home group as
// one command, OutboxTxCmd: its own operations, and each push bound
// elsewhere written as an outbox row (keyspace family 0x13) under a fixed
// transaction id. The node that ran it pushes each row to its group and
// then deletes the rows it delivered (OutboxDeleteCmd); rows a crash left
// are redelivered by the home group's leader, the target queue's
// transaction-id dedup making a repeat a duplicate, not a second message.

// OutboxTxCmd is a transaction run in its home group with pushes for
// queues of other groups (Away).
type OutboxTxCmd struct {
	TransactionCmd // the operations that lie in the home group
	// Away are the pushes bound for other groups, in request order. An
	// item without a transaction id gets one minted from the seed.
	Away []PushItem
}

// Apply runs the transaction and, when it commits, writes an outbox row
// for each away push. Value: TxResult, its Outbox set on success. It wakes
// the home queues it pushed to or acked on.
func (c OutboxTxCmd) Apply(b *Batch, st Stamp) Result {
	rows := make([]OutboxRow, len(c.Away))
	m := &minter{seed: st.Seed, n: outboxIDBase}
	for i, it := range c.Away {
		part := it.Partition
		if part == "" {
			part = DefaultPartition
		}
		if err := validatePushItem(it.Queue, part, it.TransactionID); err != nil {
			return Result{Value: TxResult{ID: (&minter{seed: st.Seed}).next(), Error: err.Error()}}
		}
		rows[i] = OutboxRow{ID: m.next(), CreatedAt: st.Time, Item: it}
		if it.TransactionID == "" {
			rows[i].Item.TransactionID = FormatID(rows[i].ID)
		}
	}
	r := c.TransactionCmd.Apply(b, st)
	v := r.Value.(TxResult)
	if !v.Success {
		return r
	}
	for i := range rows {
		rows[i].Tx = v.ID
		rec := rows[i].record()
		b.set(keyspace.Outbox(rows[i].ID), rec.Encode(nil))
	}
	v.Outbox = rows
	r.Value = v
	return r
}

// outboxIDBase is where an OutboxTxCmd mints its row ids from its seed,
// clear of the ids the transaction mints from 0 and of a prepared push's
// (preparedIDBase).
const outboxIDBase = 2 << 40

// OutboxRow is one outbox row: a push a committed transaction owes to a
// queue of another group.
type OutboxRow struct {
	ID        ID    // the row's key, a UUIDv7: rows sort by commit time
	Tx        ID    // the transaction that wrote it (TxResult.ID)
	CreatedAt int64 // the transaction's commit time
	Item      PushItem
}

func (o *OutboxRow) record() keyspace.OutboxRecord {
	it := &o.Item
	return keyspace.OutboxRecord{CreatedAt: o.CreatedAt, Tx: o.Tx, Queue: it.Queue, Partition: it.Partition,
		TransactionID: it.TransactionID, HasTrace: it.HasTrace, TraceID: it.TraceID, ProducerSub: it.ProducerSub,
		Payload: it.Payload, Sealed: it.Sealed}
}

func outboxRow(id ID, rec keyspace.OutboxRecord) OutboxRow {
	return OutboxRow{ID: id, Tx: rec.Tx, CreatedAt: rec.CreatedAt, Item: PushItem{Queue: rec.Queue, Partition: rec.Partition,
		TransactionID: rec.TransactionID, HasTrace: rec.HasTrace, TraceID: rec.TraceID, ProducerSub: rec.ProducerSub,
		Payload: rec.Payload, Sealed: rec.Sealed}}
}

// OutboxDeleteCmd deletes delivered outbox rows.
type OutboxDeleteCmd struct{ Rows []ID }

// Apply deletes the rows; one already gone is skipped, so a repeat is a
// no-op. Value: int, the rows deleted.
func (c OutboxDeleteCmd) Apply(b *Batch, _ Stamp) Result {
	n := 0
	for _, id := range c.Rows {
		k := keyspace.Outbox(id)
		found, err := get(b.pb, k, func([]byte) error { return nil })
		if err != nil {
			return Result{Value: n, Err: err}
		}
		if found {
			b.del(k)
			n++
		}
	}
	return Result{Value: n}
}

// errEnough stops a scan.
var errEnough = errors.New("enough")

// Outbox returns up to limit outbox rows, oldest first.
func (e *Engine) Outbox(limit int) ([]OutboxRow, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	var out []OutboxRow
	err := e.scan(keyspace.FamilyOutbox, func(k, v []byte) error {
		if len(out) == limit {
			return errEnough
		}
		id, err := keyspace.ParseOutbox(k)
		if err != nil {
			return err
		}
		rec, err := keyspace.DecodeOutbox(v)
		if err != nil {
			return fmt.Errorf("outbox row %s: %w", FormatID(id), err)
		}
		rec.Payload = append([]byte(nil), rec.Payload...) // v is the iterator's
		out = append(out, outboxRow(id, rec))
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return out, err
}
