package diskspace

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Guard watches the free space of a node's data directories. Its methods
// are safe for concurrent use; it starts no goroutine and holds nothing to
// close.
type Guard struct {
	opts Options
	// mu is held while a reading is taken; nothing else is taken under it.
	mu       sync.Mutex
	last     atomic.Pointer[reading]
	inflight atomic.Int64 // bytes admitted and not yet released
	// low has bit i set while the filesystem whose first guarded directory
	// is Dirs[i] is refusing writes: set when it is found below the
	// reserve, cleared once it has the reserve plus ResumeBytes free.
	low atomic.Uint64
}

// reading is one pass of Statfs over the directories.
type reading struct {
	at   time.Time
	dirs []Dir
	fs   []filesystem // the distinct filesystems, in the order of Dirs
}

// filesystem is one distinct filesystem of a reading.
type filesystem struct {
	dirs  []string
	first int // index in Options.Dirs of dirs[0]: the filesystem's bit in Guard.low
	free  uint64
}

// Dir is one guarded directory as of a reading.
type Dir struct {
	Path string
	// Free is the bytes available on the directory's filesystem.
	Free uint64
	// Err is why the directory could not be read (Free is then 0 and the
	// directory is not checked: an unreadable directory refuses nothing).
	Err error
}

// Status is the guard's view, for /health and the metrics.
type Status struct {
	// OK is false while a filesystem is below the reserve.
	OK bool
	// Reason says why not OK ("" when OK): "free space below reserve on
	// /data/raft: 40 MiB < 256 MiB".
	Reason string
	// MinFreeBytes is the reserve (0: the guard is off).
	MinFreeBytes uint64
	// Dirs are the guarded directories, in the order of Options.Dirs.
	Dirs []Dir
	// Taken is when the reading was taken.
	Taken time.Time
}

// New returns a guard over opts.Dirs and takes its first reading.
func New(opts Options) (*Guard, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.Dirs = append([]string(nil), opts.Dirs...)
	g := &Guard{opts: opts}
	g.last.Store(g.read())
	return g, nil
}

// MinFreeBytes returns the reserve.
func (g *Guard) MinFreeBytes() uint64 { return g.opts.MinFreeBytes }

// Check returns nil when every filesystem has the reserve free, else a
// *ShortageError (wrapping ErrBelowReserve) with the reason.
func (g *Guard) Check() error {
	if reason := g.shortage(g.current()); reason != "" {
		return &ShortageError{Reason: reason}
	}
	return nil
}

// Admit is Check for a write of n more bytes: it counts them as written
// already, and on success keeps counting them until release is called
// (when the write is done, and the next reading sees it on disk). release
// is never nil; calling it more than once is harmless.
func (g *Guard) Admit(n int64) (release func(), err error) {
	n = max(n, 0)
	g.inflight.Add(n)
	if reason := g.shortage(g.current()); reason != "" {
		g.inflight.Add(-n)
		return func() {}, &ShortageError{Reason: reason}
	}
	var once sync.Once
	return func() { once.Do(func() { g.inflight.Add(-n) }) }, nil
}

// Status reports the current reading and what it means.
func (g *Guard) Status() Status {
	r := g.current()
	reason := g.shortage(r)
	return Status{OK: reason == "", Reason: reason, MinFreeBytes: g.opts.MinFreeBytes,
		Dirs: append([]Dir(nil), r.dirs...), Taken: r.at}
}

// current returns a reading no older than MaxAge, taking one if needed.
// A caller that finds another taking one uses the previous reading.
func (g *Guard) current() *reading {
	r := g.last.Load()
	if time.Since(r.at) < g.opts.MaxAge || !g.mu.TryLock() {
		return r
	}
	defer g.mu.Unlock()
	if r2 := g.last.Load(); r2 != r {
		return r2 // taken while we were getting the lock
	}
	r = g.read()
	g.last.Store(r)
	return r
}

// read takes a reading.
func (g *Guard) read() *reading {
	r := &reading{at: time.Now(), dirs: make([]Dir, len(g.opts.Dirs))}
	index := map[uint64]int{} // filesystem id -> index in r.fs
	for i, path := range g.opts.Dirs {
		sp, err := g.opts.Statfs(path)
		r.dirs[i] = Dir{Path: path, Free: sp.Free, Err: err}
		if err != nil {
			r.dirs[i].Free = 0
			continue
		}
		j, ok := index[sp.Filesystem]
		if !ok {
			j = len(r.fs)
			index[sp.Filesystem] = j
			r.fs = append(r.fs, filesystem{first: i, free: sp.Free})
		}
		r.fs[j].dirs = append(r.fs[j].dirs, path)
		// Two reads of one filesystem differ by what was written between
		// them: keep the smaller.
		r.fs[j].free = min(r.fs[j].free, sp.Free)
	}
	return r
}

// shortage returns why r, with the admitted bytes counted as written, is
// below the reserve ("" when it is not), and moves each filesystem's
// hysteresis bit: a filesystem below the reserve is marked low, and a low
// one needs ResumeBytes more than the reserve to be cleared.
func (g *Guard) shortage(r *reading) string {
	reserve := g.opts.MinFreeBytes
	if reserve == 0 {
		return ""
	}
	pending := uint64(max(g.inflight.Load(), 0))
	reason := ""
	for _, fs := range r.fs {
		free := fs.free - min(pending, fs.free)
		bit := uint64(1) << fs.first
		need := reserve
		low := g.low.Load()&bit != 0
		if low {
			need += g.opts.ResumeBytes
		}
		if free >= need {
			if low {
				g.low.And(^bit)
			}
			continue
		}
		if !low {
			g.low.Or(bit)
		}
		if reason != "" {
			continue // the bits of the other filesystems still move
		}
		reason = fmt.Sprintf("free space below reserve on %s: %s < %s", strings.Join(fs.dirs, ", "), FormatBytes(fs.free), FormatBytes(reserve))
		if pending > 0 {
			reason += fmt.Sprintf(" (%s more being written)", FormatBytes(pending))
		}
		if free >= reserve { // above the reserve, below the resume mark
			reason = fmt.Sprintf("free space below reserve on %s: %s free, writes resume at %s (the reserve of %s plus %s after a shortage)",
				strings.Join(fs.dirs, ", "), FormatBytes(fs.free), FormatBytes(need), FormatBytes(reserve), FormatBytes(g.opts.ResumeBytes))
			if pending > 0 {
				reason += fmt.Sprintf(" (%s more being written)", FormatBytes(pending))
			}
		}
	}
	return reason
}

// FormatBytes writes n for people: "40 MiB", "1.5 GiB", "512 B".
func FormatBytes(n uint64) string {
	switch {
	case n >= 1<<40:
		return fmt.Sprintf("%.1f TiB", float64(n)/(1<<40))
	case n >= 10<<30:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
