//go:build linux

package raft

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// preallocated writes content to path and allocates size bytes past its
// end as Pebble does for a WAL (fallocate, KEEP_SIZE); it skips the test
// where the filesystem cannot.
func preallocated(t *testing.T, path string, content []byte, size int64) {
	t.Helper()
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, size); err != nil {
		t.Skipf("fallocate KEEP_SIZE on %s: %v", filepath.Dir(path), err)
	}
}

func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// The space Pebble preallocated past a WAL's end comes back, no byte of
// any file changes, and files that are not WALs are left alone.
func TestPrepareOpen_ReleasesWALPreallocation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wal := filepath.Join(dir, "000002.log")
	content := bytes.Repeat([]byte("wal record "), 1000)
	preallocated(t, wal, content, 8<<20)
	other := filepath.Join(dir, "000003.blob")
	preallocated(t, other, []byte("blob"), 1<<20)
	if got := allocated(t, wal); got < 8<<20 {
		t.Fatalf("preallocated WAL holds %d bytes, want >= 8 MiB", got)
	}
	if err := prepareOpen(quiet, []string{dir}, diskSpace(), time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if got := allocated(t, wal); got > 64<<10 {
		t.Fatalf("WAL still holds %d bytes after prepareOpen, want its content's (%d)", got, len(content))
	}
	if got, err := os.ReadFile(wal); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("WAL content changed: %d bytes, %v", len(got), err)
	}
	if got := allocated(t, other); got < 1<<20 {
		t.Fatalf("a file that is not a WAL lost its allocation: %d bytes", got)
	}
}

// On a disk that cannot take the replay, prepareOpen waits, without
// spinning, until it can, and a shutdown ends the wait.
func TestPrepareOpen_WaitsForRoom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "000004.log"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var free, calls atomic.Int64
	ops := spaceOps{
		free: func(string) (uint64, error) {
			calls.Add(1)
			return uint64(free.Load()), nil
		},
		release: func(string) (int64, error) { return 0, nil },
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- prepareOpen(quiet, []string{dir}, ops, 10*time.Millisecond, nil) }()
	// Three reads of the free space, the poll between them: still waiting.
	for deadline := time.Now().Add(10 * time.Second); calls.Load() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d free-space reads in 10 s at a 10 ms poll", calls.Load())
		}
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Fatalf("3 free-space reads in %v at a 10 ms poll: spinning", took)
	}
	select {
	case err := <-done:
		t.Fatalf("returned %v with no free space, want it to wait", err)
	default:
	}
	free.Store(1<<20 + openHeadroom) // the WAL's bytes and the headroom
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5 s after the room appeared")
	}

	free.Store(0)
	stop := make(chan struct{})
	go func() { done <- prepareOpen(quiet, []string{dir}, ops, 10*time.Millisecond, stop) }()
	close(stop)
	if err := <-done; !errors.Is(err, ErrShutdown) {
		t.Fatalf("after done closed: %v, want ErrShutdown", err)
	}
}
