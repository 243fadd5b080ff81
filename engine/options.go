package engine

import (
	"fmt"
	"log/slog"
)

// Options configures an Engine. The zero value is not valid; start from
// DefaultOptions.
type Options struct {
	// Sync makes every Batch.Commit durable with an fsync before it returns.
	// Under Raft it stays false: the Raft log is the write-ahead log and the
	// applied index makes re-application safe. Turning it off WITHOUT Raft
	// LOSES ACKNOWLEDGED WRITES on a crash.
	Sync bool
	// BlockCacheBytes is the size of Pebble's block cache. Pebble reserves
	// its memtables out of it, so it must exceed twice MemTableBytes by a
	// good margin, or the index and filter blocks every dedup probe needs
	// are read from disk each time.
	BlockCacheBytes int64
	// MemTableBytes is the size of one Pebble memtable.
	MemTableBytes uint64
	// SegmentCacheEntries bounds the cache of decoded segments that serves
	// pops; 0 disables it.
	SegmentCacheEntries int
	// Logger receives Pebble's errors and the engine's own warnings. Pebble's
	// informational chatter is dropped.
	Logger *slog.Logger
	// ReadOnly opens an existing store without writing anything, for tools
	// that inspect a stopped node (queen check): Open fails with ErrNoStore
	// when the directory holds no store, and creates no file or directory;
	// Begin fails with ErrReadOnly.
	ReadOnly bool
}

// DefaultOptions returns options suited to a broker node.
func DefaultOptions() Options {
	return Options{
		Sync:                true,
		BlockCacheBytes:     128 << 20,
		MemTableBytes:       32 << 20,
		SegmentCacheEntries: 4096,
		Logger:              slog.Default(),
	}
}

// Validate reports an option that cannot work.
func (o Options) Validate() error {
	switch {
	case o.BlockCacheBytes < 0:
		return fmt.Errorf("%w: BlockCacheBytes must not be negative", ErrInvalid)
	case o.MemTableBytes < 1<<20:
		return fmt.Errorf("%w: MemTableBytes must be at least 1 MiB", ErrInvalid)
	case o.BlockCacheBytes < 2*int64(o.MemTableBytes)+16<<20:
		return fmt.Errorf("%w: BlockCacheBytes must be at least 2 × MemTableBytes + 16 MiB (memtables are reserved from it)", ErrInvalid)
	case o.SegmentCacheEntries < 0:
		return fmt.Errorf("%w: SegmentCacheEntries must not be negative", ErrInvalid)
	case o.Logger == nil:
		return fmt.Errorf("%w: Logger is required", ErrInvalid)
	}
	return nil
}

// pebbleLogger forwards Pebble's errors to slog and drops its info lines.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(string, ...any) {}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("pebble fatal: " + msg)
	panic("pebble: " + msg)
}
