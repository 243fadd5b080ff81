//go:build unix

package raft

import (
	"os"
	"syscall"
)

// diskSpace returns the spaceOps of a real disk.
func diskSpace() spaceOps { return spaceOps{free: freeBytes, release: releaseTail} }

// freeBytes returns the bytes available to this process's user on the
// filesystem holding dir.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// releaseTail truncates path to its own length, which frees the blocks
// allocated past its end (fallocate with KEEP_SIZE, as Pebble preallocates
// WAL files) and changes no byte of it. A file with nothing past its end is
// left untouched.
func releaseTail(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, nil
	}
	const block = 4096
	allocated := int64(st.Blocks) * 512
	if allocated <= (fi.Size()+block-1)/block*block {
		return 0, nil
	}
	if err := os.Truncate(path, fi.Size()); err != nil {
		return 0, err
	}
	if fi, err = os.Stat(path); err != nil {
		return 0, err
	}
	return allocated - int64(fi.Sys().(*syscall.Stat_t).Blocks)*512, nil
}
