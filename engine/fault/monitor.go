package fault

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Throttle bounds: each retry after a failed write waits minThrottle,
// doubling with every further failure up to maxThrottle, until an fsync
// succeeds. Pebble retries a failed flush or compaction at once and
// forever; the monitor applies the throttle to the file creations of those.
const (
	minThrottle = 10 * time.Millisecond
	maxThrottle = time.Second
)

// maxRetryPause caps the pause between two attempts of a write that is
// retried (see file): a stalled write costs one system call per pause, no
// log line, and should resume soon after the disk takes writes again.
const maxRetryPause = 100 * time.Millisecond

// StallLimit bounds how long a write to a WAL or blob file is retried (see
// file) before the monitor gives up and hands the error to OnFatal: a disk
// that takes nothing for that long will not take the next write soon, and a
// restart serves reads from a read-only store meanwhile.
const StallLimit = time.Minute

// Monitor watches the file system of one Pebble store. It counts every
// failed file operation, throttles the retries of failing background work,
// retries the writes Pebble cannot survive failing, and remembers the first
// failed fsync of a WAL file, after which the instance must not commit
// again (see WALFailure). One Monitor serves a store for its whole life,
// across reopens; Reset clears what belonged to the instance before.
type Monitor struct {
	inner   vfs.FS
	onError func(error)
	onFatal func(error) // set by Configure

	errors atomic.Uint64
	wal    atomic.Pointer[error]
	// streak counts failed writes since the last successful fsync.
	streak atomic.Int32
	// stalls counts the writes being retried now; stall is the last error
	// one of them saw.
	stalls atomic.Int32
	stall  atomic.Pointer[error]

	// writeBack, when positive, is how many bytes a WAL file takes before
	// the monitor asks the kernel to start writing them out (WriteBackWAL);
	// startWriteBack does it (a test replaces it).
	writeBack      int64
	startWriteBack func(f vfs.File, off, n int64) error
}

// NewMonitor returns a monitor over inner (nil means vfs.Default). onError,
// if set, is called with every error it counts; it must be cheap and must
// not block.
func NewMonitor(inner vfs.FS, onError func(error)) *Monitor {
	if inner == nil {
		inner = vfs.Default
	}
	return &Monitor{inner: inner, onError: onError, startWriteBack: startWriteBack}
}

// WriteBackWAL makes every WAL file opened from now on start the write-back
// of each further `every` bytes written to it, without waiting for it (on
// Linux; elsewhere it does nothing).
//
// For a store whose commits are not synced one by one (the engine), that
// bounds what the next fsync has to write: without it a snapshot's fsync
// found seconds of WAL in the page cache (10-40 MB at a sustained push) and
// held the store's commit gate for 1-19 ms while the disk took it, on
// every node at once on a shared disk. The fsync stays where it was, behind
// the gate: starting write-back neither waits nor consumes a write-back
// error, which that fsync still reports (see startWriteBack).
func (m *Monitor) WriteBackWAL(every int64) { m.writeBack = every }

// Errors returns how many file operations have failed so far.
func (m *Monitor) Errors() uint64 { return m.errors.Load() }

// WALFailure returns the first failed fsync of a WAL file since Reset, or
// nil. After one, Pebble's next commit would find the WAL broken and panic
// holding its commit mutex, so a store checks this before every commit and
// stops committing instead.
func (m *Monitor) WALFailure() error {
	if p := m.wal.Load(); p != nil {
		return *p
	}
	return nil
}

// Stalled returns, wrapping ErrStalled, the error of a write that is being
// retried now; nil when none is.
func (m *Monitor) Stalled() error {
	if m.stalls.Load() == 0 {
		return nil
	}
	if p := m.stall.Load(); p != nil {
		return *p
	}
	return ErrStalled
}

// Failing reports whether writes have been failing since the last
// successful fsync, or are being retried now.
func (m *Monitor) Failing() bool { return m.streak.Load() > 0 || m.stalls.Load() > 0 }

// Reset forgets the WAL failure and the throttle: call it when the instance
// they belonged to has been closed and before a new one opens.
func (m *Monitor) Reset() {
	m.wal.Store(nil)
	m.streak.Store(0)
}

// Configure makes po write through the monitored file system, log through
// errorf, and report
// Pebble's fatal errors: a fatal commit error becomes a panic that Commit
// turns into an error; any other goes to onFatal (nil means Exit), after
// which the calling Pebble goroutine never returns. Corruption that Pebble
// finds is counted and logged, and the read that found it fails; it does
// not end the process.
func (m *Monitor) Configure(po *pebble.Options, errorf func(format string, args ...any), onFatal func(error)) {
	if onFatal == nil {
		onFatal = Exit
	}
	m.onFatal = onFatal
	po.FS = vfs.OnDiskFull(m.inner, m.diskFull)
	// Pebble's default disk-health checker is left out: its only output
	// went to an event the stores never listened to, and an Open that fails
	// leaks its goroutines.
	po.FS = &monitoredFS{FS: po.FS, m: m}
	po.Logger = Logger{Log: errorf, OnFatal: onFatal}
	po.EventListener = &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			m.count(fmt.Errorf("pebble: data corruption: %s", info))
			if errorf != nil {
				errorf("data corruption: %s", info)
			}
		},
	}
}

// diskFull is vfs.OnDiskFull's callback: every write waits while it runs,
// and then the write that found the disk full is retried once. The pause
// lets space come back (a compaction, the guard at the edge) before the
// retry, and bounds how often a full disk is hit.
func (m *Monitor) diskFull() { time.Sleep(m.delay()) }

// delay is the current throttle: 0 after a successful fsync.
func (m *Monitor) delay() time.Duration {
	n := m.streak.Load()
	if n <= 0 {
		return 0
	}
	return min(minThrottle<<min(n-1, 16), maxThrottle)
}

func (m *Monitor) count(err error) {
	m.errors.Add(1)
	if m.onError != nil {
		m.onError(err)
	}
}

// fileKind is what the monitor needs to know of a Pebble file.
type fileKind uint8

const (
	otherFile fileKind = iota
	walFile
	blobFile
)

func kindOf(name string) fileKind {
	base := name[strings.LastIndexByte(name, '/')+1:]
	switch {
	case strings.HasSuffix(base, ".log") || strings.Contains(base, ".log-"):
		return walFile
	case strings.HasSuffix(base, ".blob"):
		return blobFile
	}
	return otherFile
}

// failed records a failed operation on a file; a failed write (not a read)
// feeds the throttle.
func (m *Monitor) failed(write bool, op, name string, err error) error {
	err = fmt.Errorf("%s %s: %w", op, name, err)
	m.count(err)
	if write {
		m.streak.Add(1)
	}
	return err
}

// fatal hands err to OnFatal; if that returns, the goroutine blocks for
// good, as after Pebble's own fatal errors.
func (m *Monitor) fatal(err error) {
	if m.onFatal != nil {
		m.onFatal(err)
	} else {
		Exit(err)
	}
	select {}
}

func (m *Monitor) synced() {
	if m.streak.Load() != 0 {
		m.streak.Store(0)
	}
}

// retry repeats op, which failed with err, until it succeeds, pausing as
// the throttle says and reporting the stall meanwhile; after StallLimit it
// hands the error to OnFatal.
func (m *Monitor) retry(what string, err error, op func() error) {
	m.stalls.Add(1)
	defer m.stalls.Add(-1)
	deadline := time.Now().Add(StallLimit)
	for err != nil {
		stall := fmt.Errorf("%w: %w", ErrStalled, err)
		m.stall.Store(&stall)
		if time.Now().After(deadline) {
			m.fatal(fmt.Errorf("%s: still failing after %v: %w", what, StallLimit, err))
		}
		time.Sleep(min(max(m.delay(), minThrottle), maxRetryPause))
		err = op()
	}
}

// expected reports errors that are answers, not faults: Pebble looks for
// files that may not exist.
func expected(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist)
}

// monitoredFS counts the errors of the file system under it and wraps the
// files it opens.
//
// WAL and blob files are where Pebble v2.1.7 cannot survive a failed write:
// a commit that rotates the WAL panics when closing the old WAL or creating
// the new one fails (db.go rotateWAL, with its mutex released, which ends
// the process), and a flush or compaction panics when a blob file fails to
// finish (sstable/blob FileWriter.Close aborts a writable that Finish has
// already closed). So their writes and creations are retried, as the disk
// allows (a write that failed continues from where it stopped), and a failed
// fsync of a blob file goes to OnFatal: a second fsync proves nothing after
// a failed one. A failed fsync of a WAL file is returned: inside a commit
// Pebble reports it as a fatal commit error, which a store survives.
type monitoredFS struct {
	vfs.FS
	m *Monitor
}

func (fs *monitoredFS) Unwrap() vfs.FS { return fs.FS }

func (fs *monitoredFS) wrap(f vfs.File, name string, kind fileKind) vfs.File {
	return &file{File: f, m: fs.m, name: name, kind: kind}
}

func (fs *monitoredFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	kind := kindOf(name)
	if kind == otherFile {
		if d := fs.m.delay(); d > 0 {
			time.Sleep(d)
		}
	}
	f, err := fs.FS.Create(name, category)
	if err != nil {
		err = fs.m.failed(true, "create", name, err)
		if kind == otherFile {
			return nil, err
		}
		fs.m.retry("create "+name, err, func() (err error) {
			if f, err = fs.FS.Create(name, category); err != nil {
				err = fs.m.failed(true, "create", name, err)
			}
			return err
		})
	}
	return fs.wrap(f, name, kind), nil
}

func (fs *monitoredFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	kind := kindOf(newname)
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		err = fs.m.failed(true, "reuse", newname, err)
		if kind == otherFile {
			return nil, err
		}
		// A reuse that failed may have renamed the file already: create
		// the new one instead.
		fs.m.retry("create "+newname, err, func() (err error) {
			if f, err = fs.FS.Create(newname, category); err != nil {
				err = fs.m.failed(true, "create", newname, err)
			}
			return err
		})
	}
	return fs.wrap(f, newname, kind), nil
}

func (fs *monitoredFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil {
		if !expected(err) {
			fs.m.failed(false, "open", name, err)
		}
		return nil, err
	}
	return fs.wrap(f, name, otherFile), nil
}

func (fs *monitoredFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		if !expected(err) {
			fs.m.failed(true, "open", name, err)
		}
		return nil, err
	}
	return fs.wrap(f, name, kindOf(name)), nil
}

func (fs *monitoredFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		if !expected(err) {
			fs.m.failed(false, "open dir", name, err)
		}
		return nil, err
	}
	return fs.wrap(f, name, otherFile), nil
}

func (fs *monitoredFS) Link(oldname, newname string) error {
	return fs.check(true, "link", newname, fs.FS.Link(oldname, newname))
}

func (fs *monitoredFS) Remove(name string) error {
	return fs.check(true, "remove", name, fs.FS.Remove(name))
}

func (fs *monitoredFS) RemoveAll(name string) error {
	return fs.check(true, "remove", name, fs.FS.RemoveAll(name))
}

func (fs *monitoredFS) Rename(oldname, newname string) error {
	return fs.check(true, "rename", newname, fs.FS.Rename(oldname, newname))
}

func (fs *monitoredFS) MkdirAll(dir string, perm os.FileMode) error {
	return fs.check(true, "mkdir", dir, fs.FS.MkdirAll(dir, perm))
}

func (fs *monitoredFS) Lock(name string) (io.Closer, error) {
	c, err := fs.FS.Lock(name)
	return c, fs.check(false, "lock", name, err)
}

func (fs *monitoredFS) List(dir string) ([]string, error) {
	names, err := fs.FS.List(dir)
	return names, fs.check(false, "list", dir, err)
}

func (fs *monitoredFS) Stat(name string) (vfs.FileInfo, error) {
	fi, err := fs.FS.Stat(name)
	return fi, fs.check(false, "stat", name, err)
}

// check counts err, and returns it unchanged for Pebble to inspect.
func (fs *monitoredFS) check(write bool, op, name string, err error) error {
	if err != nil && !expected(err) {
		fs.m.failed(write, op, name, err)
	}
	return err
}

// file counts the errors of one open file and applies the rules of
// monitoredFS to WAL and blob files. Its methods add no allocation.
type file struct {
	vfs.File
	m    *Monitor
	name string
	kind fileKind
	// WAL files with write-back: bytes written (Pebble writes a WAL in
	// order, from one goroutine) and the end of the range last handed to
	// write-back.
	written, handed int64
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		werr := f.m.failed(true, "write", f.name, err)
		if f.kind == otherFile {
			return n, err
		}
		f.m.retry("write "+f.name, werr, func() error {
			k, err := f.File.Write(p[n:])
			n += k
			if err != nil {
				return f.m.failed(true, "write", f.name, err)
			}
			return nil
		})
	}
	if f.kind == walFile && f.m.writeBack > 0 {
		f.wroteWAL(int64(n))
	}
	return n, nil
}

// wroteWAL counts n bytes written to a WAL file and, once writeBack whole
// pages have accumulated since the last time, starts their write-back. The
// page the writes are filling is left out: the next write would dirty it
// again. A failure is counted, not returned: the write it follows
// succeeded, and the fsync that makes the range durable reports the error.
func (f *file) wroteWAL(n int64) {
	f.written += n
	end := f.written &^ (pageSize - 1)
	if end-f.handed < f.m.writeBack {
		return
	}
	if err := f.m.startWriteBack(f.File, f.handed, end-f.handed); err != nil {
		f.m.count(fmt.Errorf("start write-back of %s: %w", f.name, err))
	}
	f.handed = end
}

// pageSize is the granularity write-back ranges are rounded to.
const pageSize = 4096

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if err != nil {
		werr := f.m.failed(true, "write", f.name, err)
		if f.kind == otherFile {
			return n, err
		}
		f.m.retry("write "+f.name, werr, func() error {
			k, err := f.File.WriteAt(p[n:], off+int64(n))
			n += k
			if err != nil {
				return f.m.failed(true, "write", f.name, err)
			}
			return nil
		})
	}
	return n, nil
}

func (f *file) Preallocate(off, length int64) error {
	err := f.File.Preallocate(off, length)
	if err != nil {
		f.m.failed(true, "preallocate", f.name, err)
	}
	return err
}

func (f *file) Sync() error {
	err := f.File.Sync()
	f.afterSync(err)
	return err
}

func (f *file) SyncData() error {
	err := f.File.SyncData()
	f.afterSync(err)
	return err
}

func (f *file) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	f.afterSync(err)
	return full, err
}

func (f *file) afterSync(err error) {
	if err == nil {
		f.m.synced()
		return
	}
	err = f.m.failed(true, "sync", f.name, err)
	switch f.kind {
	case walFile:
		f.m.wal.CompareAndSwap(nil, &err)
	case blobFile:
		f.m.fatal(err)
	}
}

func (f *file) Close() error {
	err := f.File.Close()
	if err != nil && f.kind == blobFile {
		f.m.fatal(f.m.failed(true, "close", f.name, err))
	}
	return err
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	if err != nil && err != io.EOF {
		f.m.failed(false, "read", f.name, err)
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if err != nil && err != io.EOF {
		f.m.failed(false, "read", f.name, err)
	}
	return n, err
}
