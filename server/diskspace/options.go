package diskspace

import (
	"fmt"
	"time"
)

// DefaultMinFreeBytes is the reserve `queen serve` keeps by default
// (--min-free-bytes): 512 MiB. It is what a node may still write while it
// refuses data, with the engine's 32 MiB memtables and the Raft log's 8 MiB
// ones:
//
//   - WAL preallocation, about 330 MiB at worst: Pebble preallocates every
//     new WAL file to 110% of a memtable (35.2 MiB, 8.8 MiB), and after
//     each start it grows its memtables from 256 KiB by doubling, a WAL
//     each, flushing nothing before half a memtable has gathered: up to
//     eight engine WALs and six log WALs at once. Under a push load on a
//     fresh node, space allocated beyond the bytes written peaked at
//     253 MiB. Pops and acks after a restart go through the same ramp;
//   - flushes, about 80 MiB: two memtables of each store written out as
//     tables and blob files before their WALs can go;
//   - the rest, about 100 MiB: compactions, which write their output before
//     deleting their input (that is how retention's range deletions and
//     Raft log truncation give space back), manifests, and the log entries
//     of pops, acks and deletes until a snapshot truncates the log.
//
// On a disk of tens of GiB that is a few percent. With a smaller reserve a
// WAL preallocation may not fit: it fails, but while it runs it can take
// the space a concurrent append needed (seen on tmpfs: an ENOSPC on a Raft
// log append with 20 MiB free).
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
	// ResumeBytes is the hysteresis: once a filesystem has been found below
	// the reserve, writes stay refused until it has MinFreeBytes +
	// ResumeBytes free (default MinFreeBytes/16). Without it a disk that
	// hovers at the reserve would let every other write through, and
	// /health would say OK between the refusals a client is getting.
	ResumeBytes uint64
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
	if o.ResumeBytes == 0 {
		o.ResumeBytes = o.MinFreeBytes / 16
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
	case len(o.Dirs) > 64:
		return fmt.Errorf("%w: more than 64 directories", ErrInvalidOptions)
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
