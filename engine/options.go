package engine

import (
	"fmt"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"
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
	// SegmentCacheEntries and SegmentCacheBytes bound the cache of decoded
	// segments that serves pops; 0 in either disables it.
	SegmentCacheEntries int
	SegmentCacheBytes   int64
	// Logger receives Pebble's errors and the engine's own warnings. Pebble's
	// informational chatter is dropped.
	Logger *slog.Logger
	// FS is the file system the store lives on; nil means vfs.Default. Tests
	// inject I/O errors through it (engine/fault/faulttest).
	FS vfs.FS
	// OnError, if set, is called with every failed file operation of the
	// store (for a metric). It must be cheap and must not block.
	OnError func(error)
	// OnFatal receives an error Pebble cannot continue from outside a
	// commit (a MANIFEST write failing in a background flush), after which
	// the store can be neither used nor closed. It should end the process,
	// so that a restart recovers from the disk; if it returns, the Pebble
	// goroutine that raised the error blocks for good. nil means fault.Exit.
	OnFatal func(error)
	// ReadOnly opens an existing store without writing anything, for tools
	// that inspect a stopped node (queen check): Open fails with ErrNoStore
	// when the directory holds no store, and creates no file or directory;
	// Begin fails with ErrReadOnly.
	ReadOnly bool
	// BulkLoad turns Pebble's write-ahead log off, for an offline load
	// into a new directory (queen restore): writes reach the disk only
	// when a memtable is flushed, and Sync flushes. A crash loses what
	// was not flushed, so the loader must start over in a fresh
	// directory; never set it on a serving node.
	BulkLoad bool
}

// defaultFS is the file system of Options.FS == nil.
var defaultFS = vfs.Default

// DefaultOptions returns options suited to a broker node.
func DefaultOptions() Options {
	return Options{
		Sync:                true,
		BlockCacheBytes:     128 << 20,
		MemTableBytes:       32 << 20,
		SegmentCacheEntries: 4096,
		SegmentCacheBytes:   64 << 20,
		Logger:              slog.Default(),
		FS:                  vfs.Default,
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
	case o.SegmentCacheEntries < 0 || o.SegmentCacheBytes < 0:
		return fmt.Errorf("%w: SegmentCacheEntries and SegmentCacheBytes must not be negative", ErrInvalid)
	case o.Logger == nil:
		return fmt.Errorf("%w: Logger is required", ErrInvalid)
	}
	return nil
}
