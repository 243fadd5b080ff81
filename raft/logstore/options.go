package logstore

import (
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Store. Start from DefaultOptions; the zero value is
// not valid.
type Options struct {
	// NoSync commits log appends, deletions and stable-store writes without
	// fsync. UNSAFE: a crash or power loss can then lose entries raft has
	// already acknowledged, or a vote, which breaks raft's safety. Only for
	// tests and benchmarks that measure everything but the disk.
	NoSync bool

	// CacheSize is the size in bytes of Pebble's block cache, which serves
	// GetLog for entries no longer in the memtable. Pebble reserves its
	// memtables out of it, so keep it well above twice MemTableSize. Must be
	// positive.
	CacheSize int64

	// MemTableSize is the size in bytes of one Pebble memtable. Appends land
	// here; prefixes deleted before a flush never reach an sstable. Must be
	// between 256 KiB and 1 GiB.
	MemTableSize uint64

	// Logger receives Pebble's error and fatal messages (Pebble's info
	// messages are dropped) and the store's own: a fault and its end. Nil
	// discards everything.
	Logger func(format string, args ...any)

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
	// goroutine that raised the error blocks for good. Nil means fault.Exit.
	OnFatal func(error)
}

// DefaultOptions returns the options a node uses: synced writes, a 32 MiB
// block cache, an 8 MiB memtable, and Pebble's errors on the standard logger.
func DefaultOptions() Options {
	return Options{
		CacheSize:    32 << 20,
		MemTableSize: 8 << 20,
		Logger: func(format string, args ...any) {
			log.Printf("logstore: "+format, args...)
		},
		FS: vfs.Default,
	}
}

// Validate reports the first option outside its documented range, wrapping
// ErrInvalidOptions.
func (o Options) Validate() error {
	switch {
	case o.CacheSize <= 0:
		return fmt.Errorf("%w: CacheSize %d must be positive", ErrInvalidOptions, o.CacheSize)
	case o.MemTableSize < 256<<10 || o.MemTableSize > 1<<30:
		return fmt.Errorf("%w: MemTableSize %d must be in [256 KiB, 1 GiB]", ErrInvalidOptions, o.MemTableSize)
	}
	return nil
}
