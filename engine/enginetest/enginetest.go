// Package enginetest opens engines for tests and checks them on the way out.
// Import it only from _test.go files.
package enginetest

import (
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
)

// Harness is an engine under test with a controllable clock. Every helper
// runs one command in its own batch and fails the test on a storage error.
type Harness struct {
	*engine.Engine
	T   testing.TB
	Dir string
	// Now is the time stamped on the next command (unix µs). Tests move it
	// with Advance; nothing reads a real clock.
	Now  int64
	rng  *rand.Rand
	opts engine.Options
}

// Options returns engine options for tests: quiet, not synced (tests never
// crash the process), small caches.
func Options() engine.Options {
	o := engine.DefaultOptions()
	o.Sync = false
	o.MemTableBytes = 4 << 20
	o.BlockCacheBytes = 32 << 20
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return o
}

// MustOpen opens an engine in a temporary directory. At cleanup it runs
// engine.Check and fails the test on any violation, then closes the engine.
func MustOpen(t testing.TB) *Harness {
	t.Helper()
	return MustOpenDir(t, t.TempDir(), Options())
}

// MustOpenDir opens an engine in dir with opts, checked at cleanup.
func MustOpenDir(t testing.TB, dir string, opts engine.Options) *Harness {
	t.Helper()
	e, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatalf("open engine: %v", err)
	}
	h := &Harness{Engine: e, T: t, Dir: dir, opts: opts,
		Now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro(),
		rng: rand.New(rand.NewPCG(1, 2))}
	t.Cleanup(func() {
		if err := h.Engine.Check(); err != nil {
			t.Errorf("engine.Check after test: %v", err)
		}
		if err := h.Engine.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
	})
	return h
}

// Reopen closes the engine and opens it again on the same directory, as a
// restart does.
func (h *Harness) Reopen() {
	h.T.Helper()
	if err := h.Engine.Check(); err != nil {
		h.T.Fatalf("engine.Check before reopen: %v", err)
	}
	if err := h.Engine.Close(); err != nil {
		h.T.Fatalf("close engine: %v", err)
	}
	e, err := engine.Open(h.Dir, h.opts)
	if err != nil {
		h.T.Fatalf("reopen engine: %v", err)
	}
	h.Engine = e
}

// Advance moves the clock.
func (h *Harness) Advance(d time.Duration) { h.Now += d.Microseconds() }

// Stamp returns the stamp of the next command: the clock and a fresh
// UUIDv7 seed drawn from the harness's fixed-seed generator.
func (h *Harness) Stamp() engine.Stamp {
	var id engine.ID
	ms := uint64(h.Now / 1000)
	binary.BigEndian.PutUint64(id[8:], h.rng.Uint64())
	binary.BigEndian.PutUint64(id[0:8], ms<<16|h.rng.Uint64()&0x0fff)
	id[6] = 0x70 | id[6]&0x0f // version 7
	id[8] = 0x80 | id[8]&0x3f // RFC 4122 variant
	return engine.Stamp{Time: h.Now, Seed: id}
}

// Do runs fn in one batch and commits it.
func (h *Harness) Do(fn func(b *engine.Batch)) {
	h.T.Helper()
	b, err := h.Engine.Begin()
	if err != nil {
		h.T.Fatalf("begin: %v", err)
	}
	fn(b)
	if err := b.Commit(0); err != nil {
		h.T.Fatalf("commit: %v", err)
	}
}

// Apply runs cmd as the proposer and the FSM do: prepared first when it
// has a prepare step (with the seed it is then stamped with), applied in a
// batch of its own, committed, and finished (a pop's messages are read).
// It fails the test on a storage error; the command's own error is in the
// result.
func (h *Harness) Apply(cmd engine.Command) engine.Result {
	h.T.Helper()
	st := h.Stamp()
	if p, ok := cmd.(engine.Preparer); ok {
		prepared, err := p.Prepare(st.Seed)
		if err != nil {
			h.T.Fatalf("prepare %T: %v", cmd, err)
		}
		cmd = prepared
	}
	var r engine.Result
	h.Do(func(b *engine.Batch) { r = b.Apply(st, cmd) })
	if err := h.Engine.Finish(&r); err != nil {
		h.T.Fatalf("finish %T: %v", cmd, err)
	}
	return r
}

// Run is Apply with the answer typed: it fails the test when the value is
// not a T, and returns the command's own error.
func Run[T any](h *Harness, cmd engine.Command) (T, error) {
	h.T.Helper()
	r := h.Apply(cmd)
	v, ok := r.Value.(T)
	if r.Value == nil && r.Err != nil {
		return v, r.Err // a refusal without a value (engine.ErrUnlistedCommand)
	}
	if !ok {
		h.T.Fatalf("%T answered %T, want %T", cmd, r.Value, v)
	}
	return v, r.Err
}

// Must is Run failing the test on the command's error too.
func Must[T any](h *Harness, cmd engine.Command) T {
	h.T.Helper()
	v, err := Run[T](h, cmd)
	if err != nil {
		h.T.Fatalf("%T: %v", cmd, err)
	}
	return v
}

// Push pushes items in one command.
func (h *Harness) Push(items ...engine.PushItem) []engine.PushResult {
	h.T.Helper()
	return Must[[]engine.PushResult](h, engine.PushCmd{Items: items})
}

// PushOne pushes one payload to queue/partition with a transaction id ("" for
// a minted one) and fails the test unless it is queued.
func (h *Harness) PushOne(queue, partition, txn, payload string) engine.PushResult {
	h.T.Helper()
	res := h.Push(engine.PushItem{Queue: queue, Partition: partition, TransactionID: txn, Payload: []byte(payload)})
	if res[0].Status != engine.Queued {
		h.T.Fatalf("push %s/%s %q: status %d, err %v", queue, partition, txn, res[0].Status, res[0].Err)
	}
	return res[0]
}

// Pop runs one pop command.
func (h *Harness) Pop(cmd engine.PopCmd) engine.PopResult {
	h.T.Helper()
	return Must[engine.PopResult](h, cmd)
}

// Ack runs one ack command.
func (h *Harness) Ack(items ...engine.AckItem) []engine.AckResult {
	h.T.Helper()
	return Must[[]engine.AckResult](h, engine.AckCmd{Items: items})
}

// Configure runs one configure command.
func (h *Harness) Configure(cmd engine.ConfigureCmd) engine.QueueInfo {
	h.T.Helper()
	return Must[engine.QueueInfo](h, cmd)
}

// Set configures queue options by name/value pairs, creating the queue.
func (h *Harness) Set(queue string, opts map[engine.Option]int64) engine.QueueInfo {
	h.T.Helper()
	cmd := engine.ConfigureCmd{Queue: queue}
	for _, o := range engine.AllOptions() {
		if v, ok := opts[o]; ok {
			cmd.Set = append(cmd.Set, engine.OptionValue{Option: o, Value: v})
		}
	}
	return h.Configure(cmd)
}

// AckMessages acks every message of a pop with one status, under its lease.
func AckMessages(res engine.PopResult, status string) []engine.AckItem {
	items := make([]engine.AckItem, 0, len(res.Messages))
	for _, m := range res.Messages {
		items = append(items, engine.AckItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID,
			Group: res.Group, Status: cursor.ParseStatus(status), Lease: res.LeaseID})
	}
	return items
}
