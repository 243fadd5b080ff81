package fault_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/queenmq/queen/engine/fault"
	"github.com/queenmq/queen/engine/fault/faulttest"
)

// open opens a Pebble store in dir over fs, configured by m.
func open(t *testing.T, dir string, m *fault.Monitor) *pebble.DB {
	t.Helper()
	po := &pebble.Options{}
	m.Configure(po, t.Logf, func(err error) { t.Errorf("unexpected fatal: %v", err); runtime.Goexit() })
	db, err := pebble.Open(dir, po)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return db
}

func set(db *pebble.DB, i int, opts *pebble.WriteOptions) error {
	return fault.Commit(func() error {
		return db.Set(fmt.Appendf(nil, "k%06d", i), []byte("value"), opts)
	})
}

func count(t *testing.T, db *pebble.DB) int {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// A failed WAL fsync makes the synced commit return the error instead of
// killing the process, trips WALFailure, and the store reopens with every
// commit acknowledged before it.
func TestCommit_FatalCommitErrorIsReturned(t *testing.T) {
	dir := t.TempDir()
	inj := faulttest.New(1)
	m := fault.NewMonitor(inj.FS(nil), nil)
	db := open(t, dir, m)
	for i := range 10 {
		if err := set(db, i, pebble.Sync); err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
	}
	inj.Fail(faulttest.Sync, syscall.ENOSPC)
	err := set(db, 10, pebble.Sync)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit with a failing WAL fsync = %v, want ENOSPC", err)
	}
	if !errors.Is(m.WALFailure(), syscall.ENOSPC) {
		t.Errorf("WALFailure = %v after a failed WAL fsync", m.WALFailure())
	}
	if m.Errors() == 0 {
		t.Errorf("no error counted")
	}
	inj.Lift()
	db.Close() // the instance is done; its error is expected
	m.Reset()
	db = open(t, dir, m)
	defer db.Close()
	if got := count(t, db); got < 10 {
		t.Fatalf("reopened store holds %d keys, want the 10 acknowledged", got)
	}
	if err := set(db, 11, pebble.Sync); err != nil {
		t.Fatalf("set after reopen: %v", err)
	}
}

// A WAL write that fails is retried, not returned (Pebble panics when one
// fails while it rotates the WAL): the commit waits, Stalled says why, and
// the commit completes once the disk takes the write.
func TestMonitor_WALWrite_StallsUntilTheDiskTakesIt(t *testing.T) {
	for _, sync := range []bool{true, false} {
		t.Run(fmt.Sprint("sync=", sync), func(t *testing.T) {
			dir := t.TempDir()
			inj := faulttest.New(2)
			m := fault.NewMonitor(inj.FS(nil), nil)
			db := open(t, dir, m)
			opts := pebble.NoSync
			if sync {
				opts = pebble.Sync
			}
			inj.Fail(faulttest.Write, syscall.ENOSPC)
			done := make(chan error, 1)
			go func() {
				// Unsynced commits return before the write: the one
				// that syncs waits for it.
				for i := range 5 {
					if err := set(db, i, opts); err != nil {
						done <- err
						return
					}
				}
				done <- set(db, 5, pebble.Sync)
			}()
			deadline := time.Now().Add(30 * time.Second)
			for !errors.Is(m.Stalled(), syscall.ENOSPC) {
				if time.Now().After(deadline) {
					t.Fatalf("Stalled = %v, want ENOSPC while the WAL cannot be written", m.Stalled())
				}
				time.Sleep(time.Millisecond)
			}
			if !errors.Is(m.Stalled(), fault.ErrStalled) {
				t.Errorf("Stalled = %v, want it to wrap ErrStalled", m.Stalled())
			}
			select {
			case err := <-done:
				t.Fatalf("synced commit returned %v while its WAL write was failing", err)
			default:
			}
			inj.Lift()
			if err := <-done; err != nil {
				t.Fatalf("commits once the disk took the write: %v", err)
			}
			if m.Stalled() != nil || m.WALFailure() != nil {
				t.Errorf("after the stall: Stalled %v, WALFailure %v", m.Stalled(), m.WALFailure())
			}
			db.Close()
			m.Reset()
			db = open(t, dir, m)
			defer db.Close()
			if got := count(t, db); got != 6 {
				t.Fatalf("reopened store holds %d keys, want 6", got)
			}
		})
	}
}

// A failed fsync of a blob file goes to OnFatal (Pebble v2.1.7 panics when a
// blob file cannot be finished).
func TestMonitor_BlobSync_IsFatal(t *testing.T) {
	dir := t.TempDir()
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync {
			return syscall.EIO
		}
		return nil
	})
	m := fault.NewMonitor(errorfs.Wrap(vfs.Default, inj), nil)
	po := &pebble.Options{}
	got := make(chan error, 1)
	m.Configure(po, nil, func(err error) { got <- err; runtime.Goexit() })
	go func() {
		f, err := po.FS.Create(filepath.Join(dir, "000001.blob"), vfs.WriteCategoryUnspecified)
		if err != nil {
			got <- err
			return
		}
		f.Sync()
		got <- errors.New("Sync of a blob file returned")
	}()
	if err := <-got; !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "sync") {
		t.Errorf("OnFatal got %v, want the failed sync", err)
	}
}

// Pebble retries a failed flush at once and forever, and Open waits for the
// flush of the replayed WAL: on a full disk that loop spun at full CPU. The
// monitor makes each file creation after a failure wait, doubling: six
// failed creations take at least 10+20+40+80+160 ms.
func TestMonitor_Create_ThrottlesRetries(t *testing.T) {
	dir := t.TempDir()
	inj := faulttest.New(3)
	m := fault.NewMonitor(inj.FS(nil), nil)
	db := open(t, dir, m)
	for i := range 100 {
		if err := set(db, i, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	db.Close() // leaves the WAL for the next Open to flush
	m.Reset()
	var creates atomic.Int64
	inj.Fail(faulttest.Write, syscall.ENOSPC)
	start := time.Now()
	opened := make(chan *pebble.DB, 1)
	go func() {
		po := &pebble.Options{}
		m.Configure(po, func(string, ...any) { creates.Add(1) }, nil)
		db, err := pebble.Open(dir, po)
		if err != nil {
			t.Errorf("open: %v", err)
		}
		opened <- db
	}()
	for creates.Load() < 6 {
		time.Sleep(time.Millisecond)
	}
	if took := time.Since(start); took < 310*time.Millisecond {
		t.Errorf("6 failed flushes took %v, want at least 310ms of back-off", took)
	}
	inj.Lift()
	if db := <-opened; db != nil {
		if got := count(t, db); got != 100 {
			t.Errorf("reopened store holds %d keys, want 100", got)
		}
		db.Close()
	}
}

func TestMonitor_Probe(t *testing.T) {
	dir := t.TempDir()
	inj := faulttest.New(4)
	m := fault.NewMonitor(inj.FS(nil), nil)
	if err := m.Probe(dir, 1); err != nil {
		t.Fatalf("probe of a healthy dir: %v", err)
	}
	if err := m.Probe(dir, 1<<62); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("probe needing 4 EiB = %v, want ENOSPC", err)
	}
	inj.Fail(faulttest.Sync, syscall.EIO)
	if err := m.Probe(dir, 0); !errors.Is(err, syscall.EIO) {
		t.Errorf("probe with failing fsync = %v, want EIO", err)
	}
	if m.Errors() != 0 {
		t.Errorf("probe failures counted as storage errors: %d", m.Errors())
	}
	inj.Lift()
	if _, err := os.Stat(filepath.Join(dir, fault.ProbeName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("probe file left behind: %v", err)
	}
}

// The monitored file system adds no allocation to reads and writes.
func TestMonitor_FS_ReadWriteAllocateNothing(t *testing.T) {
	dir := t.TempDir()
	m := fault.NewMonitor(vfs.Default, nil)
	po := &pebble.Options{}
	m.Configure(po, nil, nil)
	f, err := po.FS.Create(filepath.Join(dir, "f"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 512)
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		f.WriteAt(buf, 0)
		f.ReadAt(buf, 0)
	}); n != 0 {
		t.Errorf("WriteAt+ReadAt allocate %.1f times, want 0", n)
	}
}

// A fatal error outside a commit goes to OnFatal, and Fatalf never returns.
func TestLogger_Fatalf_OutsideCommitCallsOnFatal(t *testing.T) {
	got := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		l := fault.Logger{OnFatal: func(err error) { got <- err; runtime.Goexit() }}
		l.Fatalf("MANIFEST sync failed: %v", syscall.EIO)
		t.Error("Fatalf returned")
	}()
	err := <-got
	<-returned
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "MANIFEST sync failed") {
		t.Errorf("OnFatal got %v", err)
	}
}

// Exit names the error and ends the process with status 74.
func TestExit_EndsProcessWithStatus74(t *testing.T) {
	if os.Getenv("QUEEN_FAULT_EXIT") == "1" {
		fault.Exit(fmt.Errorf("MANIFEST sync failed: %w", syscall.EIO))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExit_EndsProcessWithStatus74$")
	cmd.Env = append(os.Environ(), "QUEEN_FAULT_EXIT=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != fault.ExitCode {
		t.Fatalf("child ended with %v, want exit status %d; output:\n%s", err, fault.ExitCode, out)
	}
	if !strings.Contains(string(out), "unrecoverable error: MANIFEST sync failed: input/output error") {
		t.Errorf("child's message does not name the error:\n%s", out)
	}
}
