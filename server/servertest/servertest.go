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
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

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

// LocalBroker implements server.Broker over a real engine on one node.
// Each command is one engine batch, stamped with the wall clock (plus the
// offset Advance adds) and a UUIDv7 seed, under a mutex: the store is real,
// only replication is missing. Watch is served by an in-process notifier.
type LocalBroker struct {
	eng *engine.Engine
	dir string

	mu      sync.Mutex // serializes commands: stamps and applied index
	offset  time.Duration
	last    int64
	applied uint64

	watchMu  sync.Mutex
	watchers map[*watcher]struct{}

	pushPaused, popPaused atomic.Bool // the maintenance switches
}

// Maintenance reports the maintenance switches (server.Maintainer).
func (b *LocalBroker) Maintenance() (push, pop bool) { return b.pushPaused.Load(), b.popPaused.Load() }

// SetMaintenance flips a maintenance switch; turning one off wakes parked pops.
func (b *LocalBroker) SetMaintenance(_ context.Context, pop, enabled bool) error {
	if pop {
		b.popPaused.Store(enabled)
	} else {
		b.pushPaused.Store(enabled)
	}
	if !enabled {
		b.notify(true)
	}
	return nil
}

type watcher struct {
	queue string
	ch    chan struct{}
}

var _ server.Broker = (*LocalBroker)(nil)

// NewLocalBroker opens an engine under t.TempDir(); at cleanup the engine's
// full consistency check runs and the engine is closed.
func NewLocalBroker(t testing.TB) *LocalBroker {
	t.Helper()
	h := enginetest.MustOpenDir(t, t.TempDir(), enginetest.Options())
	return &LocalBroker{eng: h.Engine, dir: h.Dir, watchers: map[*watcher]struct{}{}}
}

// Dir is the engine's data directory.
func (b *LocalBroker) Dir() string { return b.dir }

// Sweep runs a retention sweep (retention, eviction, transaction-id index
// purge) as of the broker's clock, as the Raft leader proposes one every
// RetentionInterval. The space of deleted segments comes back when the
// engine's background compaction of their ranges finishes.
func (b *LocalBroker) Sweep(ctx context.Context) (res engine.SweepResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res, err = batch.Sweep(st)
		return err
	})
	return res, err
}

// Advance moves the broker's clock forward: leases expire and delays pass
// without sleeping.
func (b *LocalBroker) Advance(d time.Duration) {
	b.mu.Lock()
	b.offset += d
	b.mu.Unlock()
}

// apply runs one command in one batch. The batch is committed even when the
// command reports an error, as a Raft FSM applies every committed entry.
func (b *LocalBroker) apply(ctx context.Context, fn func(batch *engine.Batch, st engine.Stamp) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now().Add(b.offset).UnixMicro()
	if now <= b.last {
		now = b.last + 1
	}
	b.last = now
	seed, err := uuid.NewV7()
	if err != nil {
		return err
	}
	batch, err := b.eng.Begin()
	if err != nil {
		return err
	}
	cmdErr := fn(batch, engine.Stamp{Time: now, Seed: engine.ID(seed)})
	b.applied++
	if err := batch.Commit(b.applied); err != nil {
		return err
	}
	return cmdErr
}

// notify wakes the watchers of the named queues, and of every queue when
// all is set; discovery watchers ("") always wake.
func (b *LocalBroker) notify(all bool, queues ...string) {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	for w := range b.watchers {
		if all || w.queue == "" || slices.Contains(queues, w.queue) {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

// Watch implements server.Broker.
func (b *LocalBroker) Watch(queue string) (<-chan struct{}, func()) {
	w := &watcher{queue: queue, ch: make(chan struct{}, 1)}
	b.watchMu.Lock()
	b.watchers[w] = struct{}{}
	b.watchMu.Unlock()
	return w.ch, func() {
		b.watchMu.Lock()
		delete(b.watchers, w)
		b.watchMu.Unlock()
	}
}

// Watchers returns the number of registered watches (parked long-polls).
func (b *LocalBroker) Watchers() int {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	return len(b.watchers)
}

// Barrier implements server.Broker: one node has applied everything.
func (b *LocalBroker) Barrier(context.Context) error { return nil }

// Status implements server.Broker: a single voter, always the leader.
func (b *LocalBroker) Status() raft.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return raft.Status{ID: "local", Role: "leader", Leader: "local", Applied: b.applied, Term: 1, Voters: 1}
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

func (b *LocalBroker) ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error) {
	return b.eng.ListMessages(f)
}

// Commands.

func (b *LocalBroker) Configure(ctx context.Context, cmd engine.ConfigureCmd) (info engine.QueueInfo, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		info, err = batch.Configure(st, cmd)
		return err
	})
	b.notify(false, cmd.Queue)
	return info, err
}

func (b *LocalBroker) DeleteQueue(ctx context.Context, name string) (existed bool, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, _ engine.Stamp) error {
		existed = batch.DeleteQueue(name)
		return nil
	})
	return existed, err
}

func (b *LocalBroker) Push(ctx context.Context, items []engine.PushItem) (res []engine.PushResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res = batch.Push(st, items)
		return nil
	})
	queues := make([]string, 0, 1)
	for i := range items {
		if !slices.Contains(queues, items[i].Queue) {
			queues = append(queues, items[i].Queue)
		}
	}
	b.notify(false, queues...)
	return res, err
}

func (b *LocalBroker) Pop(ctx context.Context, cmd engine.PopCmd) (res engine.PopResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res, err = batch.Pop(st, cmd)
		return err
	})
	return res, err
}

func (b *LocalBroker) Ack(ctx context.Context, items []engine.AckItem) (res []engine.AckResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res = batch.Ack(st, items)
		return nil
	})
	b.notify(false, ackQueues(res)...)
	return res, err
}

func ackQueues(res []engine.AckResult) []string {
	var queues []string
	for i := range res {
		if res[i].Queue != "" && !slices.Contains(queues, res[i].Queue) {
			queues = append(queues, res[i].Queue)
		}
	}
	return queues
}

func (b *LocalBroker) ExtendLease(ctx context.Context, lease engine.ID, seconds int64) (res engine.ExtendResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res = batch.ExtendLease(st, lease, seconds)
		return nil
	})
	return res, err
}

func (b *LocalBroker) Transaction(ctx context.Context, ops []engine.TxOp, required []engine.ID) (res engine.TxResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res = batch.Transaction(st, ops, required)
		return nil
	})
	queues := ackQueues(res.Acks)
	for i := range res.Pushes {
		queues = append(queues, res.Pushes[i].Queue)
	}
	b.notify(false, queues...)
	return res, err
}

func (b *LocalBroker) Replay(ctx context.Context, cmd engine.ReplayCmd) (res engine.ReplayResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res, err = batch.Replay(st, cmd)
		return err
	})
	b.notify(false, res.Queue)
	return res, err
}

func (b *LocalBroker) DeleteDLQ(ctx context.Context, part engine.ID, txn, group string) (removed int, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, _ engine.Stamp) error {
		removed, err = batch.DeleteDLQ(part, txn, group)
		return err
	})
	return removed, err
}

func (b *LocalBroker) MoveToDLQ(ctx context.Context, part engine.ID, txn, group, text string) (res engine.AckResult, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		res, err = batch.MoveToDLQ(st, part, txn, group, text)
		return err
	})
	b.notify(false, res.Queue)
	return res, err
}

func (b *LocalBroker) Seek(ctx context.Context, cmd engine.SeekCmd) (updated int, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, st engine.Stamp) error {
		updated, err = batch.Seek(st, cmd)
		return err
	})
	b.notify(false, cmd.Queue)
	return updated, err
}

func (b *LocalBroker) DeleteGroup(ctx context.Context, group, queue string, deleteMetadata bool) (deleted int, meta bool, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, _ engine.Stamp) error {
		deleted, meta = batch.DeleteGroup(group, queue, deleteMetadata)
		return nil
	})
	b.notify(queue == "", queue)
	return deleted, meta, err
}

func (b *LocalBroker) UpdateSubscription(ctx context.Context, group string, ts int64) (updated int, err error) {
	err = b.apply(ctx, func(batch *engine.Batch, _ engine.Stamp) error {
		updated = batch.UpdateSubscription(group, ts)
		return nil
	})
	return updated, err
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
