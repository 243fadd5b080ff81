package fault

import (
	"errors"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeBackRecorder replaces m's write-back with one that records each
// range and answers err.
func writeBackRecorder(m *Monitor, err error) *[][2]int64 {
	var got [][2]int64
	m.startWriteBack = func(_ vfs.File, off, n int64) error {
		got = append(got, [2]int64{off, n})
		return err
	}
	return &got
}

// writeIn writes total bytes to f in chunks of an odd size, as a WAL's
// blocks and records do not fall on pages.
func writeIn(t *testing.T, f vfs.File, total int) {
	t.Helper()
	chunk := make([]byte, 10007)
	for left := total; left > 0; left -= len(chunk) {
		n, err := f.Write(chunk[:min(left, len(chunk))])
		if err != nil || n != min(left, len(chunk)) {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
}

func TestMonitor_WriteBackWAL_StartsEveryWholeRangeOnceInOrder(t *testing.T) {
	dir := t.TempDir()
	m := NewMonitor(nil, nil)
	m.WriteBackWAL(1 << 20)
	got := writeBackRecorder(m, nil)
	fs := &monitoredFS{FS: vfs.Default, m: m}

	wal, err := fs.Create(filepath.Join(dir, "000002.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	const total = 3<<20 + 700<<10
	writeIn(t, wal, total)

	if len(*got) != 3 {
		t.Fatalf("write-back ranges after %d bytes at 1 MiB each: %v, want 3", total, *got)
	}
	var next int64
	for _, r := range *got {
		off, n := r[0], r[1]
		if off != next || n < 1<<20 || (off+n)%pageSize != 0 || off+n > total {
			t.Fatalf("ranges %v: want contiguous from 0, each >= 1 MiB, ending on a page, within the %d bytes written", *got, total)
		}
		next = off + n
	}

	// Other files are left to Pebble's own syncing.
	for _, name := range []string{"000003.sst", "000004.blob", "MANIFEST-000001"} {
		f, err := fs.Create(filepath.Join(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		writeIn(t, f, 2<<20)
		f.Close()
	}
	if len(*got) != 3 {
		t.Fatalf("write-back started for a file that is not a WAL: %v", (*got)[3:])
	}
}

func TestMonitor_WriteBackWAL_OffUnlessAsked(t *testing.T) {
	m := NewMonitor(nil, nil)
	got := writeBackRecorder(m, nil)
	fs := &monitoredFS{FS: vfs.Default, m: m}
	wal, err := fs.Create(filepath.Join(t.TempDir(), "000002.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	writeIn(t, wal, 3<<20)
	if len(*got) != 0 {
		t.Fatalf("write-back without WriteBackWAL (the Raft log store, which syncs every append): %v", *got)
	}
}

// A write-back that fails is counted; the write it follows succeeded and is
// answered so, and the WAL is not failed: only the fsync that makes the
// range durable decides that.
func TestMonitor_WriteBackWAL_FailureIsCountedNotReturned(t *testing.T) {
	var reported []error
	m := NewMonitor(nil, func(err error) { reported = append(reported, err) })
	m.WriteBackWAL(1 << 20)
	got := writeBackRecorder(m, syscall.EIO)
	fs := &monitoredFS{FS: vfs.Default, m: m}
	wal, err := fs.Create(filepath.Join(t.TempDir(), "000002.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	writeIn(t, wal, 2<<20-1000)
	if len(*got) != 1 {
		t.Fatalf("write-back ranges: %v, want 1", *got)
	}
	if m.Errors() != 1 || len(reported) != 1 || !errors.Is(reported[0], syscall.EIO) {
		t.Fatalf("errors counted %d, reported %v: want the one EIO", m.Errors(), reported)
	}
	if err := m.WALFailure(); err != nil {
		t.Fatalf("WAL failed by a write-back hint: %v", err)
	}
	if err := wal.Sync(); err != nil {
		t.Fatalf("sync after a failed hint on a healthy disk: %v", err)
	}
}

// Pebble's WAL goes through the monitor's Write, under a name it knows:
// unsynced commits start their write-back as they go. (Pebble's first
// memtables, and so its first WAL files, are small: 256 KiB doubling up to
// MemTableSize. 12 MiB of commits fill WALs of 1, 2, 4 and 4+ MiB.)
func TestMonitor_WriteBackWAL_PebbleCommits(t *testing.T) {
	m := NewMonitor(nil, nil)
	m.WriteBackWAL(1 << 20)
	got := writeBackRecorder(m, nil)
	po := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, MemTableSize: 64 << 20}
	m.Configure(po, t.Logf, func(err error) { t.Errorf("fatal: %v", err) })
	db, err := pebble.Open(t.TempDir(), po)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 64<<10)
	for i := range 192 { // 12 MiB
		if err := db.Set([]byte{byte(i)}, value, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.LogData(nil, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if len(*got) < 6 {
		t.Fatalf("write-back ranges after 12 MiB of unsynced commits: %v, want at least 6", *got)
	}
}

func TestStartWriteBack_OnARealFile(t *testing.T) {
	f, err := vfs.Default.Create(filepath.Join(t.TempDir(), "000002.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeIn(t, f, 2<<20)
	if err := startWriteBack(f, 0, 1<<20); err != nil {
		t.Fatalf("start write-back (%s): %v", runtime.GOOS, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
