// Package faulttest injects I/O errors into the Pebble stores of tests,
// through Pebble's errorfs. Import it only from _test.go files.
//
// An Injector fails the data operations of the files a store cannot lose
// without noticing: WAL files (*.log), tables (*.sst), blob files (*.blob)
// and the write probe of package fault. It never touches what Pebble v2.1.7
// cannot survive failing, which ends the process (fault.Exit) by design and
// which child-process tests cover instead: MANIFEST, marker, OPTIONS and
// LOCK files and directories, and the fsyncs of blob files. A random
// schedule also spares the fsyncs of WAL files: Pebble panics when one fails
// while it rotates the WAL inside a commit, which it does whenever a
// memtable fills (see package fault). Fail may fail them, for tests that
// commit too little to fill one.
//
// Injection is seeded. Which operation fails also depends on how goroutines
// interleave, so a seed replays the same schedule of decisions, not always
// the same failures.
package faulttest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/queenmq/queen/engine/fault"
)

// Kind is a set of file operations to fail.
type Kind uint8

const (
	// Write is Create, Write, WriteAt and Preallocate.
	Write Kind = 1 << iota
	// Sync is Sync, SyncData and SyncTo.
	Sync
	// Read is Read and ReadAt.
	Read
	// All is every kind.
	All = Write | Sync | Read
)

func (k Kind) String() string {
	var parts []string
	for _, p := range []struct {
		k    Kind
		name string
	}{{Write, "write"}, {Sync, "sync"}, {Read, "read"}} {
		if k&p.k != 0 {
			parts = append(parts, p.name)
		}
	}
	return strings.Join(parts, "+")
}

// Schedule alternates quiet and faulty phases, each a number of eligible
// operations drawn from its range. In a faulty phase each operation of
// Kinds fails with probability Rate.
type Schedule struct {
	Kinds          Kind
	Rate           float64
	Quiet, Faulty  [2]int // [min, max] eligible operations per phase
	Err            error  // the error injected; nil means syscall.EIO
	DiskFullWrites bool   // make failed writes and syncs ENOSPC instead of Err
}

// Injector decides, operation by operation, whether a file operation fails.
// It is an errorfs.Injector; FS wraps a file system with it.
type Injector struct {
	mu       sync.Mutex
	rng      *rand.Rand
	sched    Schedule
	random   bool // following sched
	constant Kind // failing every operation of these kinds
	err      error
	once     Kind   // failing the next operation of these kinds on...
	onceOn   string // ...a file whose name ends so, then stopping
	onceErr  error
	faulty   bool
	left     int // eligible operations left in the phase
	ops      uint64
	injected map[Kind]uint64
}

// New returns an injector that injects nothing until Random or Fail.
func New(seed uint64) *Injector {
	return &Injector{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), injected: map[Kind]uint64{}}
}

// FS wraps inner (nil means vfs.Default) so that its operations consult the
// injector.
func (in *Injector) FS(inner vfs.FS) vfs.FS {
	if inner == nil {
		inner = vfs.Default
	}
	return errorfs.Wrap(inner, in)
}

// Random starts following s, beginning with a quiet phase.
func (in *Injector) Random(s Schedule) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sched, in.random, in.constant, in.faulty = s, true, 0, false
	in.left = in.draw(s.Quiet)
}

// Fail makes every eligible operation of kinds fail with err until Lift.
func (in *Injector) Fail(kinds Kind, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.random, in.constant, in.err = false, kinds, err
}

// Once makes the next eligible operation of kind on a file whose name ends
// with suffix fail with err, once, besides whatever else is injected. A
// test arms it for a WAL fsync (suffix ".log") right after a store opens,
// when its memtable is empty and Pebble cannot be rotating the WAL.
func (in *Injector) Once(kind Kind, suffix string, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.once, in.onceOn, in.onceErr = kind, suffix, err
}

// Lift stops all injection.
func (in *Injector) Lift() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.random, in.constant, in.once = false, 0, 0
}

// Injected returns how many errors were injected so far, and how many
// eligible operations were seen.
func (in *Injector) Injected() (errors map[Kind]uint64, ops uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[Kind]uint64, len(in.injected))
	for k, n := range in.injected {
		out[k] = n
	}
	return out, in.ops
}

// Total returns how many errors were injected so far.
func (in *Injector) Total() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	var n uint64
	for _, v := range in.injected {
		n += v
	}
	return n
}

// String describes the counts, for test logs.
func (in *Injector) String() string {
	errs, ops := in.Injected()
	return fmt.Sprintf("%d eligible file operations, injected %d write, %d sync, %d read errors",
		ops, errs[Write], errs[Sync], errs[Read])
}

func (in *Injector) draw(r [2]int) int {
	if r[1] <= r[0] {
		return max(r[0], 1)
	}
	return r[0] + in.rng.IntN(r[1]-r[0]+1)
}

// MaybeError implements errorfs.Injector.
func (in *Injector) MaybeError(op errorfs.Op) error {
	kind := kindOf(op.Kind)
	if kind == 0 || !eligible(op.Path) || (kind == Sync && strings.HasSuffix(op.Path, ".blob")) {
		return nil
	}
	walSync := kind == Sync && strings.HasSuffix(op.Path, ".log")
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ops++
	switch {
	case in.once&kind != 0 && strings.HasSuffix(op.Path, in.onceOn):
		in.once = 0
		in.injected[kind]++
		return in.onceErr
	case in.constant&kind != 0:
		in.injected[kind]++
		return in.err
	case !in.random || walSync:
		return nil
	}
	in.left--
	if in.left <= 0 {
		in.faulty = !in.faulty
		if in.faulty {
			in.left = in.draw(in.sched.Faulty)
		} else {
			in.left = in.draw(in.sched.Quiet)
		}
	}
	if !in.faulty || in.sched.Kinds&kind == 0 || in.rng.Float64() >= in.sched.Rate {
		return nil
	}
	in.injected[kind]++
	switch {
	case in.sched.DiskFullWrites && kind != Read:
		return syscall.ENOSPC
	case in.sched.Err != nil:
		return in.sched.Err
	}
	return syscall.EIO
}

func kindOf(k errorfs.OpKind) Kind {
	switch k {
	case errorfs.OpCreate, errorfs.OpFileWrite, errorfs.OpFileWriteAt, errorfs.OpFilePreallocate:
		return Write
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return Sync
	case errorfs.OpFileRead, errorfs.OpFileReadAt:
		return Read
	}
	return 0
}

// eligible reports whether injection may touch path (see the package doc).
func eligible(path string) bool {
	base := path[strings.LastIndexByte(path, '/')+1:]
	return strings.HasSuffix(base, ".log") || strings.HasSuffix(base, ".sst") ||
		strings.HasSuffix(base, ".blob") || base == fault.ProbeName
}
