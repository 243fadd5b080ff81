package fault

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ProbeName is the file Probe writes and removes. Pebble ignores names it
// does not know.
const ProbeName = "queen-write-probe"

// probeBytes is how much Probe writes: one page, enough to need a block.
const probeBytes = 4096

// Probe reports whether dir takes writes: at least need bytes free (when
// the file system can tell), and a file that can be written, fsynced and
// removed. It goes straight to the monitored file system, so its failures
// are not counted as storage errors. A store probes before it reopens, so
// that Pebble's Open, which waits for the flush of the replayed WAL, does
// not start on a disk that cannot take it.
func (m *Monitor) Probe(dir string, need uint64) error {
	fs := m.inner
	if need > 0 {
		if u, err := fs.GetDiskUsage(dir); err == nil && u.AvailBytes < need {
			return fmt.Errorf("probe %s: %d bytes free, %d needed: %w", dir, u.AvailBytes, need, syscall.ENOSPC)
		}
	}
	name := fs.PathJoin(dir, ProbeName)
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("probe %s: %w", dir, err)
	}
	_, err = f.Write(make([]byte, probeBytes))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := fs.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("probe %s: %w", dir, err)
	}
	return nil
}

// WALBytes returns the size of the WAL files in dir: what Pebble's Open
// replays and flushes before it returns, so a reopen needs about that much
// free space and a memtable more.
func (m *Monitor) WALBytes(dir string) uint64 {
	names, err := m.inner.List(dir)
	if err != nil {
		return 0
	}
	var n uint64
	for _, name := range names {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		if fi, err := m.inner.Stat(m.inner.PathJoin(dir, name)); err == nil {
			n += uint64(fi.Size())
		}
	}
	return n
}
