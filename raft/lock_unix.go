//go:build unix

package raft

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock (flock) on dir/LOCK, held until the
// returned closer is closed: one node per data directory, and no recovery
// under a running node. The kernel drops the lock when the process dies, so
// a crash leaves nothing to clean up. With create false a missing LOCK file
// is not created, and there is nothing to hold (see Lock).
func lockDir(dir string, create bool) (io.Closer, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), flags, 0o644)
	if !create && errors.Is(err, fs.ErrNotExist) {
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, fmt.Errorf("raft: lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrInUse, dir)
		}
		return nil, fmt.Errorf("raft: lock data dir: %w", err)
	}
	return f, nil
}
