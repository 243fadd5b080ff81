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
	var res engine.TxResult
	st := h.Stamp()
	h.Do(func(b *engine.Batch) { res = b.Transaction(st, ops, requiredLeases) })
	return res
}

// Extend runs one lease-extend command.
func (h *Harness) Extend(lease engine.ID, seconds int64) engine.ExtendResult {
	h.T.Helper()
	var res engine.ExtendResult
	st := h.Stamp()
	h.Do(func(b *engine.Batch) { res = b.ExtendLease(st, lease, seconds) })
	return res
}

// Seek runs one seek command and returns the partitions updated and the
// command's error.
func (h *Harness) Seek(cmd engine.SeekCmd) (int, error) {
	h.T.Helper()
	var (
		n   int
		err error
	)
	st := h.Stamp()
	h.Do(func(b *engine.Batch) { n, err = b.Seek(st, cmd) })
	return n, err
}

// DeleteGroup runs one group-delete command.
func (h *Harness) DeleteGroup(group, queue string, deleteMetadata bool) (int, bool) {
	h.T.Helper()
	var (
		n    int
		meta bool
	)
	h.Do(func(b *engine.Batch) { n, meta = b.DeleteGroup(group, queue, deleteMetadata) })
	return n, meta
}

// UpdateSubscription runs one subscription-update command.
func (h *Harness) UpdateSubscription(group string, ts int64) int {
	h.T.Helper()
	var n int
	h.Do(func(b *engine.Batch) { n = b.UpdateSubscription(group, ts) })
	return n
}

// DeleteQueue runs one queue-delete command.
func (h *Harness) DeleteQueue(name string) bool {
	h.T.Helper()
	var ok bool
	h.Do(func(b *engine.Batch) { ok = b.DeleteQueue(name) })
	return ok
}

// Replay runs one dead-letter replay command.
func (h *Harness) Replay(cmd engine.ReplayCmd) (engine.ReplayResult, error) {
	h.T.Helper()
	var (
		res engine.ReplayResult
		err error
	)
	st := h.Stamp()
	h.Do(func(b *engine.Batch) { res, err = b.Replay(st, cmd) })
	return res, err
}

// DeleteDLQ runs one dead-letter delete command.
func (h *Harness) DeleteDLQ(part engine.ID, txn, group string) (int, error) {
	h.T.Helper()
	var (
		n   int
		err error
	)
	h.Do(func(b *engine.Batch) { n, err = b.DeleteDLQ(part, txn, group) })
	return n, err
}

// MoveToDLQ runs one move-to-DLQ command (B3).
func (h *Harness) MoveToDLQ(part engine.ID, txn, group, text string) (engine.AckResult, error) {
	h.T.Helper()
	var (
		res engine.AckResult
		err error
	)
	st := h.Stamp()
	h.Do(func(b *engine.Batch) { res, err = b.MoveToDLQ(st, part, txn, group, text) })
	return res, err
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
	var (
		res engine.SweepResult
		err error
	)
	st := h.Stamp()
	h.Do(func(b *engine.Batch) { res, err = b.Sweep(st) })
	if err != nil {
		h.T.Fatalf("sweep: %v", err)
	}
	return res
}
