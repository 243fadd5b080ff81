package logstore

import (
	"fmt"
	"log"
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
	// messages are dropped). Nil discards everything.
	Logger func(format string, args ...any)
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

// pebbleLogger adapts Options.Logger to Pebble's Logger: info is dropped,
// errors are forwarded, and fatal messages are forwarded and then panic,
// because Pebble does not expect Fatalf to return.
type pebbleLogger struct {
	logf func(format string, args ...any)
}

func (l pebbleLogger) Infof(string, ...any) {}

func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.logf != nil {
		l.logf(format, args...)
	}
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.Errorf(format, args...)
	panic(fmt.Sprintf("logstore: pebble: "+format, args...))
}
