package diskspace_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/server/diskspace"
)

const mib = 1 << 20

// InmemStatfs is a fake Options.Statfs: each directory sits on a named
// filesystem whose free space the test sets.
type InmemStatfs struct {
	mu    sync.Mutex
	fs    map[string]uint64 // dir -> filesystem id
	free  map[uint64]uint64 // filesystem id -> free bytes
	fail  map[string]error
	calls int
}

func newInmemStatfs() *InmemStatfs {
	return &InmemStatfs{fs: map[string]uint64{}, free: map[uint64]uint64{}, fail: map[string]error{}}
}

// place puts dir on filesystem id.
func (s *InmemStatfs) place(dir string, id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fs[dir] = id
}

func (s *InmemStatfs) setFree(id, free uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free[id] = free
}

func (s *InmemStatfs) Statfs(dir string) (diskspace.Space, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if err := s.fail[dir]; err != nil {
		return diskspace.Space{}, err
	}
	id := s.fs[dir]
	return diskspace.Space{Filesystem: id, Free: s.free[id]}, nil
}

func (s *InmemStatfs) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// mustGuard builds a guard over dirs with reserve, reading fake, whose
// readings never go stale unless maxAge says so.
func mustGuard(t *testing.T, fake *InmemStatfs, reserve uint64, maxAge time.Duration, dirs ...string) *diskspace.Guard {
	t.Helper()
	g, err := diskspace.New(diskspace.Options{Dirs: dirs, MinFreeBytes: reserve, MaxAge: maxAge, Statfs: fake.Statfs})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g
}

func TestGuard_Check_AboveAndBelowReserve(t *testing.T) {
	fake := newInmemStatfs()
	fake.place("/data/raft", 1)
	fake.setFree(1, 300*mib)
	g := mustGuard(t, fake, 256*mib, time.Nanosecond, "/data/raft")
	if err := g.Check(); err != nil {
		t.Fatalf("300 MiB free, 256 MiB reserve: %v", err)
	}
	fake.setFree(1, 40*mib)
	err := g.Check()
	if !errors.Is(err, diskspace.ErrBelowReserve) {
		t.Fatalf("40 MiB free: got %v, want ErrBelowReserve", err)
	}
	want := "free space below reserve on /data/raft: 40 MiB < 256 MiB"
	if !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("error %q, want it to end with %q", err, want)
	}
	if st := g.Status(); st.OK || st.Reason != want || st.MinFreeBytes != 256*mib {
		t.Fatalf("status %+v, want not OK with reason %q", st, want)
	}
}

func TestGuard_Check_ExactlyTheReserveIsEnough(t *testing.T) {
	fake := newInmemStatfs()
	fake.setFree(0, 64*mib)
	g := mustGuard(t, fake, 64*mib, time.Nanosecond, "/d")
	if err := g.Check(); err != nil {
		t.Fatalf("free == reserve: %v", err)
	}
	fake.setFree(0, 64*mib-1)
	if err := g.Check(); err == nil {
		t.Fatal("free == reserve - 1: accepted")
	}
}

func TestGuard_Check_EachFilesystemSeparately(t *testing.T) {
	fake := newInmemStatfs()
	fake.place("/data/engine", 1)
	fake.place("/data/raft", 1)
	fake.place("/spool", 2)
	fake.setFree(1, 1<<30)
	fake.setFree(2, 1<<30)
	g := mustGuard(t, fake, 100*mib, time.Nanosecond, "/data/engine", "/data/raft", "/spool")
	if err := g.Check(); err != nil {
		t.Fatalf("both filesystems roomy: %v", err)
	}
	// The spool's filesystem fills; the data's does not.
	fake.setFree(2, 10*mib)
	err := g.Check()
	if err == nil || !strings.Contains(err.Error(), "on /spool: 10 MiB < 100 MiB") {
		t.Fatalf("spool filesystem low: got %v", err)
	}
	// The data's fills too: the directories sharing it are named together.
	fake.setFree(2, 1<<30)
	fake.setFree(1, 99*mib)
	err = g.Check()
	if err == nil || !strings.Contains(err.Error(), "on /data/engine, /data/raft: 99 MiB < 100 MiB") {
		t.Fatalf("data filesystem low: got %v", err)
	}
	st := g.Status()
	if len(st.Dirs) != 3 || st.Dirs[0].Free != 99*mib || st.Dirs[2].Path != "/spool" || st.Dirs[2].Free != 1<<30 {
		t.Fatalf("status dirs %+v", st.Dirs)
	}
}

func TestGuard_Check_RecoversWhenSpaceReturns(t *testing.T) {
	fake := newInmemStatfs()
	fake.setFree(0, 1*mib)
	g := mustGuard(t, fake, 8*mib, 20*time.Millisecond, "/d")
	if err := g.Check(); err == nil {
		t.Fatal("1 MiB free: accepted")
	}
	fake.setFree(0, 9*mib)
	deadline := time.Now().Add(5 * time.Second)
	for g.Check() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still refusing 5 s after space returned: %v", g.Check())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !g.Status().OK {
		t.Fatal("status not OK after space returned")
	}
}

func TestGuard_Check_ReadsAtMostOncePerMaxAge(t *testing.T) {
	fake := newInmemStatfs()
	fake.setFree(0, 1<<30)
	g := mustGuard(t, fake, mib, time.Hour, "/a", "/b")
	base := fake.callCount() // New's first reading: one call per directory
	if base != 2 {
		t.Fatalf("New read %d directories, want 2", base)
	}
	for range 1000 {
		if err := g.Check(); err != nil {
			t.Fatal(err)
		}
	}
	if got := fake.callCount(); got != base {
		t.Fatalf("1000 checks within MaxAge called Statfs %d more times, want 0", got-base)
	}
	// A stale reading is replaced: the change is seen.
	g2 := mustGuard(t, fake, mib, time.Nanosecond, "/a")
	fake.setFree(0, 0)
	time.Sleep(time.Millisecond)
	if err := g2.Check(); err == nil {
		t.Fatal("a stale reading was used past MaxAge")
	}
}

func TestGuard_Admit_CountsBytesInFlight(t *testing.T) {
	fake := newInmemStatfs()
	fake.setFree(0, 110*mib)
	g := mustGuard(t, fake, 100*mib, time.Hour, "/d")
	release1, err := g.Admit(6 * mib)
	if err != nil {
		t.Fatalf("first 6 MiB: %v", err)
	}
	// The first write is not on disk yet (the reading is unchanged), but
	// it counts: 110 - 6 - 6 < 100.
	_, err = g.Admit(6 * mib)
	if !errors.Is(err, diskspace.ErrBelowReserve) || !strings.Contains(err.Error(), "more being written") {
		t.Fatalf("second 6 MiB on the same reading: got %v, want refused with the bytes in flight named", err)
	}
	// Only the first write's bytes are still counted: the refused one took
	// its own back.
	if st := g.Status(); st.OK || !strings.HasSuffix(st.Reason, "(6 MiB more being written)") {
		t.Fatalf("status after a refused Admit: %+v, want the 6 MiB of the first write alone counted", st)
	}
	release1()
	release1() // twice is harmless
	if err := g.Check(); err != nil {
		t.Fatalf("110 MiB free, nothing in flight: %v", err)
	}
	release2, err := g.Admit(6 * mib)
	if err != nil {
		t.Fatalf("6 MiB after the first was released: %v", err)
	}
	release2()
	if _, err := g.Admit(11 * mib); err == nil {
		t.Fatal("11 MiB into a 10 MiB margin: accepted")
	}
}

// A filesystem found below the reserve is refused until it has the
// reserve plus ResumeBytes free, so a disk hovering at the reserve does not
// take every other write, and /health does not say OK between refusals.
func TestGuard_Check_ResumesAboveTheReservePlusMargin(t *testing.T) {
	fake := newInmemStatfs()
	fake.place("/a", 1)
	fake.place("/b", 2)
	fake.setFree(1, 101*mib)
	fake.setFree(2, 1<<30)
	g, err := diskspace.New(diskspace.Options{Dirs: []string{"/a", "/b"}, MinFreeBytes: 100 * mib, ResumeBytes: 10 * mib,
		MaxAge: time.Nanosecond, Statfs: fake.Statfs})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check(); err != nil {
		t.Fatalf("101 MiB free, never short: %v", err)
	}
	fake.setFree(1, 99*mib)
	if err := g.Check(); err == nil {
		t.Fatal("99 MiB free: accepted")
	}
	fake.setFree(1, 109*mib)
	err = g.Check()
	want := "free space below reserve on /a: 109 MiB free, writes resume at 110 MiB (the reserve of 100 MiB plus 10 MiB after a shortage)"
	if !errors.Is(err, diskspace.ErrBelowReserve) || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("109 MiB free after a shortage: got %v, want %q", err, want)
	}
	if st := g.Status(); st.OK || st.Reason != want {
		t.Fatalf("status %+v, want not OK with %q", st, want)
	}
	// The other filesystem was never short.
	fake.setFree(1, 110*mib)
	if err := g.Check(); err != nil {
		t.Fatalf("110 MiB free: %v", err)
	}
	// Cleared: the plain reserve applies again.
	fake.setFree(1, 100*mib)
	if err := g.Check(); err != nil {
		t.Fatalf("100 MiB free after recovering: %v", err)
	}
	// Each filesystem has its own mark.
	fake.setFree(2, 99*mib)
	if err := g.Check(); err == nil || !strings.Contains(err.Error(), "on /b: 99 MiB < 100 MiB") {
		t.Fatalf("/b short: %v", err)
	}
	fake.setFree(2, 105*mib)
	if err := g.Check(); err == nil || !strings.Contains(err.Error(), "on /b: 105 MiB free") {
		t.Fatalf("/b at 105 MiB after a shortage: %v", err)
	}
}

func TestOptions_DefaultResumeBytes(t *testing.T) {
	o := diskspace.Options{Dirs: []string{"/d"}, MinFreeBytes: 512 * mib}
	o.EnsureDefaults()
	if o.ResumeBytes != 32*mib {
		t.Fatalf("default ResumeBytes for a 512 MiB reserve: %d, want 32 MiB", o.ResumeBytes)
	}
}

func TestGuard_Check_ZeroReserveRefusesNothing(t *testing.T) {
	fake := newInmemStatfs()
	fake.setFree(0, 0)
	g := mustGuard(t, fake, 0, time.Nanosecond, "/d")
	if _, err := g.Admit(1 << 30); err != nil {
		t.Fatalf("guard off: %v", err)
	}
	if st := g.Status(); !st.OK || len(st.Dirs) != 1 {
		t.Fatalf("guard off: status %+v, want OK with the directory still reported", st)
	}
}

func TestGuard_Status_UnreadableDirectoryRefusesNothing(t *testing.T) {
	fake := newInmemStatfs()
	fake.place("/ok", 1)
	fake.place("/gone", 2)
	fake.setFree(1, 1<<30)
	fake.fail["/gone"] = errors.New("no such directory")
	g := mustGuard(t, fake, mib, time.Nanosecond, "/ok", "/gone")
	if err := g.Check(); err != nil {
		t.Fatalf("one unreadable directory: %v", err)
	}
	st := g.Status()
	if st.Dirs[1].Err == nil || st.Dirs[1].Free != 0 || st.Dirs[0].Err != nil {
		t.Fatalf("status dirs %+v, want /gone with its error", st.Dirs)
	}
}

func TestOptions_Validate(t *testing.T) {
	for _, o := range []diskspace.Options{
		{},
		{Dirs: []string{""}},
		{Dirs: []string{"/d"}, MaxAge: -1},
	} {
		if _, err := diskspace.New(o); !errors.Is(err, diskspace.ErrInvalidOptions) {
			t.Errorf("New(%+v): got %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestGuard_Status_RealFilesystem(t *testing.T) {
	dir := t.TempDir()
	g, err := diskspace.New(diskspace.Options{Dirs: []string{dir, dir + "/missing"}, MinFreeBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := g.Status()
	if st.Dirs[0].Err != nil || st.Dirs[0].Free == 0 {
		t.Fatalf("statfs of a temp dir: %+v", st.Dirs[0])
	}
	if st.Dirs[1].Err == nil {
		t.Fatalf("statfs of a missing dir: no error")
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {64 << 10, "64 KiB"}, {40 * mib, "40 MiB"},
		{3 << 29, "1.5 GiB"}, {12 << 30, "12 GiB"}, {2 << 40, "2.0 TiB"},
	} {
		if got := diskspace.FormatBytes(c.n); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
