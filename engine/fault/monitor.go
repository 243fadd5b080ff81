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

// Throttle bounds for the file creations of a failing flush or compaction:
// Pebble retries those at once and forever, so each creation after a failed
// write waits minThrottle, doubling with every further failure up to
// maxThrottle, until an fsync succeeds.
const (
	minThrottle = 10 * time.Millisecond
	maxThrottle = time.Second
)

// Monitor watches the file system of one Pebble store. It counts every
// failed file operation, throttles the retries of failing background work,
// and remembers the first failed write to a WAL file, after which the
// instance must not commit again (see WALFailure). One Monitor serves a
// store for its whole life, across reopens; Reset clears what belonged to
// the instance before.
type Monitor struct {
	inner   vfs.FS
	onError func(error)

	errors atomic.Uint64
	wal    atomic.Pointer[error]
	// streak counts failed writes since the last successful fsync.
	streak atomic.Int32
}

// NewMonitor returns a monitor over inner (nil means vfs.Default). onError,
// if set, is called with every error it counts; it must be cheap and must
// not block.
func NewMonitor(inner vfs.FS, onError func(error)) *Monitor {
	if inner == nil {
		inner = vfs.Default
	}
	return &Monitor{inner: inner, onError: onError}
}

// Errors returns how many file operations have failed so far.
func (m *Monitor) Errors() uint64 { return m.errors.Load() }

// WALFailure returns the first failed write, sync or creation of a WAL file
// since Reset, or nil. Pebble learns of a failed background WAL write only
// at its next commit, and then panics holding its commit mutex, so a store
// checks this before every commit and stops committing instead.
func (m *Monitor) WALFailure() error {
	if p := m.wal.Load(); p != nil {
		return *p
	}
	return nil
}

// Reset forgets the WAL failure and the throttle: call it when the instance
// they belonged to has been closed and before a new one opens.
func (m *Monitor) Reset() {
	m.wal.Store(nil)
	m.streak.Store(0)
}

// Configure makes po write through the monitored file system (under
// Pebble's usual disk-health checks), log through errorf, and report
// Pebble's fatal errors: a fatal commit error becomes a panic that Commit
// turns into an error; any other goes to onFatal (nil means Exit), after
// which the calling Pebble goroutine never returns. Corruption that Pebble
// finds is counted and logged, and the read that found it fails; it does
// not end the process.
func (m *Monitor) Configure(po *pebble.Options, errorf func(format string, args ...any), onFatal func(error)) {
	if onFatal == nil {
		onFatal = Exit
	}
	po.FS = vfs.OnDiskFull(m.inner, m.diskFull)
	po.FS = &monitoredFS{FS: po.FS, m: m}
	po.WithFSDefaults()
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

// failed records a failed operation on a file. A failed write (not a read)
// feeds the throttle, and on a WAL file trips the instance.
func (m *Monitor) failed(write, wal bool, op, name string, err error) {
	m.count(err)
	if !write {
		return
	}
	m.streak.Add(1)
	if wal {
		e := fmt.Errorf("%s %s: %w", op, name, err)
		m.wal.CompareAndSwap(nil, &e)
	}
}

func (m *Monitor) synced() {
	if m.streak.Load() != 0 {
		m.streak.Store(0)
	}
}

// isWAL reports whether a Pebble file name is a WAL: NNNNNN.log, possibly
// with a failover suffix.
func isWAL(name string) bool {
	base := name[strings.LastIndexByte(name, '/')+1:]
	return strings.HasSuffix(base, ".log") || strings.Contains(base, ".log-")
}

// expected reports errors that are answers, not faults: Pebble looks for
// files that may not exist.
func expected(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist)
}

// monitoredFS counts the errors of the file system under it and wraps the
// files it opens.
type monitoredFS struct {
	vfs.FS
	m *Monitor
}

func (fs *monitoredFS) Unwrap() vfs.FS { return fs.FS }

func (fs *monitoredFS) wrap(f vfs.File, name string, wal bool) vfs.File {
	return &file{File: f, m: fs.m, name: name, wal: wal}
}

func (fs *monitoredFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	wal := isWAL(name)
	if !wal {
		if d := fs.m.delay(); d > 0 {
			time.Sleep(d)
		}
	}
	f, err := fs.FS.Create(name, category)
	if err != nil {
		fs.m.failed(true, wal, "create", name, err)
		return nil, err
	}
	return fs.wrap(f, name, wal), nil
}

func (fs *monitoredFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	if err != nil {
		if !expected(err) {
			fs.m.failed(false, false, "open", name, err)
		}
		return nil, err
	}
	return fs.wrap(f, name, false), nil
}

func (fs *monitoredFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	wal := isWAL(name)
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		if !expected(err) {
			fs.m.failed(true, wal, "open", name, err)
		}
		return nil, err
	}
	return fs.wrap(f, name, wal), nil
}

func (fs *monitoredFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		if !expected(err) {
			fs.m.failed(false, false, "open dir", name, err)
		}
		return nil, err
	}
	return fs.wrap(f, name, false), nil
}

func (fs *monitoredFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	wal := isWAL(newname)
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		fs.m.failed(true, wal, "reuse", newname, err)
		return nil, err
	}
	return fs.wrap(f, newname, wal), nil
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

func (fs *monitoredFS) check(write bool, op, name string, err error) error {
	if err != nil && !expected(err) {
		fs.m.failed(write, false, op, name, err)
	}
	return err
}

// file counts the errors of one open file. Its methods add no allocation.
type file struct {
	vfs.File
	m    *Monitor
	name string
	wal  bool
}

func (f *file) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		f.m.failed(true, f.wal, "write", f.name, err)
	}
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if err != nil {
		f.m.failed(true, f.wal, "write", f.name, err)
	}
	return n, err
}

func (f *file) Preallocate(off, length int64) error {
	err := f.File.Preallocate(off, length)
	if err != nil {
		f.m.failed(true, f.wal, "preallocate", f.name, err)
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
	if err != nil {
		f.m.failed(true, f.wal, "sync", f.name, err)
		return
	}
	f.m.synced()
}

func (f *file) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	if err != nil && err != io.EOF {
		f.m.failed(false, false, "read", f.name, err)
	}
	return n, err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if err != nil && err != io.EOF {
		f.m.failed(false, false, "read", f.name, err)
	}
	return n, err
}
