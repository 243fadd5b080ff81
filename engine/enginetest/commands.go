package enginetest

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine"
)

// Transaction runs one transaction command.
func (h *Harness) Transaction(ops []engine.TxOp, requiredLeases ...engine.ID) engine.TxResult {
	h.T.Helper()
	return Must[engine.TxResult](h, engine.TransactionCmd{Ops: ops, RequiredLeases: requiredLeases})
}

// Extend runs one lease-extend command.
func (h *Harness) Extend(lease engine.ID, seconds int64) engine.ExtendResult {
	h.T.Helper()
	return Must[engine.ExtendResult](h, engine.ExtendLeaseCmd{Lease: lease, Seconds: seconds})
}

// Seek runs one seek command and returns the partitions updated and the
// command's error.
func (h *Harness) Seek(cmd engine.SeekCmd) (int, error) {
	h.T.Helper()
	return Run[int](h, cmd)
}

// DeleteGroup runs one group-delete command.
func (h *Harness) DeleteGroup(group, queue string, deleteMetadata bool) (int, bool) {
	h.T.Helper()
	v := Must[engine.GroupDeleted](h, engine.DeleteGroupCmd{Group: group, Queue: queue, DeleteMetadata: deleteMetadata})
	return v.Cursors, v.Metadata
}

// UpdateSubscription runs one subscription-update command.
func (h *Harness) UpdateSubscription(group string, ts int64) int {
	h.T.Helper()
	return Must[int](h, engine.UpdateSubscriptionCmd{Group: group, Timestamp: ts})
}

// DeleteQueue runs one queue-delete command.
func (h *Harness) DeleteQueue(name string) bool {
	h.T.Helper()
	return Must[bool](h, engine.DeleteQueueCmd{Queue: name})
}

// Replay runs one dead-letter replay command.
func (h *Harness) Replay(cmd engine.ReplayCmd) (engine.ReplayResult, error) {
	h.T.Helper()
	return Run[engine.ReplayResult](h, cmd)
}

// DeleteDLQ runs one dead-letter delete command.
func (h *Harness) DeleteDLQ(part engine.ID, txn, group string) (int, error) {
	h.T.Helper()
	return Run[int](h, engine.DeleteDLQCmd{PartitionID: part, TransactionID: txn, Group: group})
}

// MoveToDLQ runs one move-to-DLQ command (docs/decisions.md B3).
func (h *Harness) MoveToDLQ(part engine.ID, txn, group, text string) (engine.AckResult, error) {
	h.T.Helper()
	return Run[engine.AckResult](h, engine.MoveToDLQCmd{PartitionID: part, TransactionID: txn, Group: group, Error: text})
}

// KV is one key/value pair of the store.
type KV struct {
	Key, Value []byte
}

// Dump checks and closes the engine, reads every key and value of its
// Pebble store in key order, and opens the engine again. Two engines that
// applied the same commands with the same stamps must dump identically.
func (h *Harness) Dump() []KV {
	h.T.Helper()
	if err := h.Engine.Check(); err != nil {
		h.T.Fatalf("engine.Check before dump: %v", err)
	}
	if err := h.Engine.Close(); err != nil {
		h.T.Fatalf("close engine: %v", err)
	}
	kvs, err := dumpDir(h.Dir)
	if err != nil {
		h.T.Fatalf("dump store: %v", err)
	}
	e, err := engine.Open(h.Dir, h.opts)
	if err != nil {
		h.T.Fatalf("reopen engine: %v", err)
	}
	h.Engine = e
	return kvs
}

func dumpDir(dir string) ([]KV, error) {
	db, err := pebble.Open(dir, &pebble.Options{
		ReadOnly:           true,
		ErrorIfNotExists:   true,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             quietLogger{},
	})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		return nil, err
	}
	var kvs []KV
	for it.First(); it.Valid(); it.Next() {
		kvs = append(kvs, KV{Key: bytes.Clone(it.Key()), Value: bytes.Clone(it.Value())})
	}
	return kvs, it.Close()
}

// DiffDumps describes the first difference between two dumps, "" when they
// are identical.
func DiffDumps(a, b []KV) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if !bytes.Equal(a[i].Key, b[i].Key) {
			return fmt.Sprintf("entry %d: key %x vs %x", i, a[i].Key, b[i].Key)
		}
		if !bytes.Equal(a[i].Value, b[i].Value) {
			return fmt.Sprintf("entry %d (key %x): value %x vs %x", i, a[i].Key, a[i].Value, b[i].Value)
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%d entries vs %d", len(a), len(b))
	}
	return ""
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// Sweep runs one retention sweep command and fails the test on an error.
func (h *Harness) Sweep() engine.SweepResult {
	h.T.Helper()
	return Must[engine.SweepResult](h, engine.SweepCmd{})
}
