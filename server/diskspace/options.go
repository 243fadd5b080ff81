package diskspace

import (
	"fmt"
	"time"
)

// DefaultMinFreeBytes is the reserve `queen serve` keeps by default
// (--min-free-bytes): 512 MiB. What a node writes while it refuses data,
// with the engine's 32 MiB memtables and the Raft log's 8 MiB ones:
//
//   - WAL preallocation: Pebble preallocates every new WAL file to 110% of
//     the memtable size, and after each start its memtables grow from
//     256 KiB by doubling, one WAL each, and are not flushed before half a
//     memtable has gathered: up to 7 engine WALs (7 × 35.2 MiB) and 5 log
//     WALs (5 × 8.8 MiB), about 290 MiB, whatever the traffic;
//   - flushes: two memtables of each store written out as tables and blob
//     files, about 80 MiB, before their WALs can go;
//   - compactions, which write their output before deleting their input
//     (that is how range deletions from retention and Raft log truncation
//     give space back), the manifests, and the Raft log entries of pops,
//     acks and deletes until the next snapshot truncates it: the rest.
//
// On a disk of tens of GiB that is a few percent; a smaller disk can take a
// smaller reserve only with smaller memtables.
const DefaultMinFreeBytes = 512 << 20

// Options configures a Guard. Zero fields take their defaults
// (EnsureDefaults) except Dirs.
type Options struct {
	// Dirs are the directories whose filesystems are guarded: a node's
	// engine/, raft/, snapshots/ and spool/. Directories on one filesystem
	// share its free space and are read and checked once; every distinct
	// filesystem must keep MinFreeBytes free. At least one is required.
	Dirs []string
	// MinFreeBytes is the reserve: writes that add data are refused while
	// a filesystem has less free space than this. 0 TURNS THE GUARD OFF:
	// free space is still read and reported, and nothing is refused.
	MinFreeBytes uint64
	// MaxAge is how old a reading may be when it is used; an older one is
	// replaced first (default 250 ms). A reading costs one statfs and one
	// stat per directory, a few microseconds.
	MaxAge time.Duration
	// Statfs reads the filesystem holding dir (default: stat(2) for the
	// filesystem's identity, statfs(2) for the bytes available to this
	// process's user). Tests inject a fake.
	Statfs func(dir string) (Space, error)
}

// Space is what Statfs reports of the filesystem holding a directory.
type Space struct {
	// Filesystem identifies the filesystem (stat's st_dev): directories
	// with the same value share their free space.
	Filesystem uint64
	// Free is the bytes available to this process's user (statfs's
	// f_bavail × f_bsize: the blocks reserved for root are not counted).
	Free uint64
}

// EnsureDefaults fills every zero field but Dirs and MinFreeBytes with its
// default.
func (o *Options) EnsureDefaults() {
	if o.MaxAge == 0 {
		o.MaxAge = 250 * time.Millisecond
	}
	if o.Statfs == nil {
		o.Statfs = statfs
	}
}

// Validate reports an option that cannot work.
func (o Options) Validate() error {
	switch {
	case len(o.Dirs) == 0:
		return fmt.Errorf("%w: no directory to guard", ErrInvalidOptions)
	case o.MaxAge < 0:
		return fmt.Errorf("%w: MaxAge must not be negative", ErrInvalidOptions)
	case o.Statfs == nil:
		return fmt.Errorf("%w: Statfs is required", ErrInvalidOptions)
	}
	for _, d := range o.Dirs {
		if d == "" {
			return fmt.Errorf("%w: an empty directory name", ErrInvalidOptions)
		}
	}
	return nil
}
