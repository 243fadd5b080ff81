package fault

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// startWriteBack asks the kernel to start writing the range of f out:
// sync_file_range(2) with SYNC_FILE_RANGE_WRITE alone, which neither waits
// for the writes nor for earlier ones, and does not check or consume the
// file's write-back errors (only the WAIT flags do), so the fsync that later
// makes the range durable still sees any error. It makes nothing durable.
func startWriteBack(f vfs.File, off, n int64) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil
	}
	return unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
