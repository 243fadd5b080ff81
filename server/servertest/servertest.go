// Package servertest runs the HTTP server in tests: Start serves a Broker
// on 127.0.0.1, and LocalBroker is a Broker over a real engine without
// replication, standing in for the Raft node. Import it only from _test.go
// files.
package servertest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/diskspace"
)

// Start serves b on a fresh 127.0.0.1 port with default options and
// returns the base URL ("http://127.0.0.1:port"). The server is shut down
// at test cleanup.
func Start(t testing.TB, b server.Broker) string {
	return StartOptions(t, b, server.Options{})
}

// StartOptions is Start with options (Addr is ignored). With opts.TLS the
// URL is https.
func StartOptions(t testing.TB, b server.Broker, opts server.Options) string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if opts.SpoolDir == "" {
		opts.SpoolDir = t.TempDir()
	}
	s, err := server.New(b, opts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("server serve: %v", err)
		}
	})
	if opts.TLS != nil {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// Elapse lets d pass for the broker's leases: a broker with a settable
// clock (LocalBroker) moves it, any other sleeps.
func Elapse(b server.Broker, d time.Duration) {
	if c, ok := b.(interface{ Advance(time.Duration) }); ok {
		c.Advance(d)
		return
	}
	time.Sleep(d)
}

// LocalBroker implements server.Broker over a real engine on one node,
// running every command through raft.Local: the production command path
// (skip, prepare, stamp, log encoding, the FSM's apply loop and wake-ups,
// finish) without consensus. Its clock is the wall clock plus the offset
// Advance adds, so leases expire without sleeping.
type LocalBroker struct {
	*raft.Local
	eng *engine.Engine
	dir string

	mu     sync.Mutex
	offset time.Duration
}

var (
	_ server.Broker     = (*LocalBroker)(nil)
	_ server.Maintainer = (*LocalBroker)(nil)
)

// NewLocalBroker opens an engine under t.TempDir(); at cleanup the engine's
// full consistency check runs and the engine is closed.
func NewLocalBroker(t testing.TB) *LocalBroker {
	t.Helper()
	h := enginetest.MustOpenDir(t, t.TempDir(), enginetest.Options())
	b := &LocalBroker{eng: h.Engine, dir: h.Dir}
	b.Local = raft.NewLocal(h.Engine, b.now, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return b
}

func (b *LocalBroker) now() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Now().Add(b.offset).UnixMicro()
}

// Dir is the engine's data directory.
func (b *LocalBroker) Dir() string { return b.dir }

// Engine is the broker's engine: the server backs it up as group 1.
func (b *LocalBroker) Engine() *engine.Engine { return b.eng }

// Sweep runs a retention sweep (retention, eviction, transaction-id index
// purge) as of the broker's clock, as the Raft leader proposes one every
// RetentionInterval. The space of deleted segments comes back when the
// engine's background compaction of their ranges finishes.
func (b *LocalBroker) Sweep(ctx context.Context) (engine.SweepResult, error) {
	return raft.Propose[engine.SweepResult](ctx, b, engine.SweepCmd{})
}

// Advance moves the broker's clock forward: leases expire and delays pass
// without sleeping.
func (b *LocalBroker) Advance(d time.Duration) {
	b.mu.Lock()
	b.offset += d
	b.mu.Unlock()
}

// Barrier implements server.Broker: one node has applied everything.
func (b *LocalBroker) Barrier(context.Context) error { return nil }

// Status implements server.Broker: a single voter, always the leader.
func (b *LocalBroker) Status() raft.Status {
	return raft.Status{ID: "local", Role: "leader", Leader: "local", Applied: b.eng.Applied(), Term: 1, Voters: 1}
}

// Reader.

func (b *LocalBroker) Queues() ([]engine.QueueInfo, error)         { return b.eng.Queues() }
func (b *LocalBroker) Queue(name string) (engine.QueueInfo, error) { return b.eng.Queue(name) }

// QueueConfig is the edge's optional cheap configuration lookup.
func (b *LocalBroker) QueueConfig(name string) (engine.Config, bool) { return b.eng.QueueConfig(name) }
func (b *LocalBroker) Subscriptions() ([]engine.Subscription, error) { return b.eng.Subscriptions() }
func (b *LocalBroker) Cursors(now int64, group string) ([]engine.CursorInfo, error) {
	return b.eng.Cursors(now, group)
}
func (b *LocalBroker) ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error) {
	return b.eng.ListDLQ(f)
}
func (b *LocalBroker) DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error) {
	return b.eng.DeadLettersAt(part, txn)
}
func (b *LocalBroker) MessageAt(part engine.ID, txn string) (engine.StoredMessage, error) {
	return b.eng.MessageAt(part, txn)
}

func (b *LocalBroker) StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error) {
	return b.eng.StreamQueryByID(id)
}

func (b *LocalBroker) StreamState(f engine.StateFilter) ([]engine.StateRow, error) {
	return b.eng.StreamState(f)
}

func (b *LocalBroker) Traces(part engine.ID, txn string) ([]engine.Trace, error) {
	return b.eng.Traces(part, txn)
}

func (b *LocalBroker) TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error) {
	return b.eng.TracesByName(name, limit, offset)
}

func (b *LocalBroker) TraceNames(limit, offset int) ([]engine.TraceName, int, error) {
	return b.eng.TraceNames(limit, offset)
}

func (b *LocalBroker) ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error) {
	return b.eng.ListMessages(f)
}

// InmemSpace stands in for the filesystems under a diskspace.Guard: every
// directory sits on one filesystem whose free space the test sets.
type InmemSpace struct{ free atomic.Uint64 }

// SetFree sets the free bytes every later reading sees.
func (s *InmemSpace) SetFree(n uint64) { s.free.Store(n) }

// Statfs is the guard's Options.Statfs.
func (s *InmemSpace) Statfs(string) (diskspace.Space, error) {
	return diskspace.Space{Filesystem: 1, Free: s.free.Load()}, nil
}

// Guard returns a guard over dirs with the reserve, reading s afresh on
// every use. s starts with free bytes.
func (s *InmemSpace) Guard(t testing.TB, free, reserve uint64, dirs ...string) *diskspace.Guard {
	t.Helper()
	s.SetFree(free)
	g, err := diskspace.New(diskspace.Options{Dirs: dirs, MinFreeBytes: reserve, MaxAge: time.Nanosecond, Statfs: s.Statfs})
	if err != nil {
		t.Fatalf("diskspace.New: %v", err)
	}
	return g
}
