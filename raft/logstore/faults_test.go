package logstore_test

// I/O errors: a seeded schedule of injected write, sync and read errors
// (engine/fault/faulttest) under appends, prefix deletions, stable writes
// and reads, as raft issues them. Every call either succeeds or fails; the
// store heals itself in process; at the end it holds exactly what it
// acknowledged. Rerun a failure with
//
//	go test ./raft/logstore -run TestStore_Heal_ -seed=<seed>

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine/fault/faulttest"
	"github.com/queenmq/queen/raft/logstore"
)

// bounded runs fn and fails the test if it has not returned within a
// generous deadline: no call may hang on a fault.
func bounded(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return within 30s", what)
	}
}

func faultOptions(t *testing.T, inj *faulttest.Injector) logstore.Options {
	o := logstore.DefaultOptions()
	o.Logger = t.Logf
	o.MemTableSize = 256 << 10 // flushes and tables in a short run
	if inj != nil {
		o.FS = inj.FS(nil)
	}
	o.OnFatal = func(err error) {
		t.Errorf("fatal storage error (the injector leaves MANIFEST alone): %v", err)
		runtime.Goexit()
	}
	return o
}

// waitHealthy polls until the store reports no fault.
func waitHealthy(t *testing.T, s *logstore.Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.Fault() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("store still faulted after 30s: %v", s.Fault())
		}
		time.Sleep(time.Millisecond)
	}
}

type logDriver struct {
	t     *testing.T
	rng   *rand.Rand
	s     *logstore.Store
	group uint32 // the group the driver writes (logstore.Store.Group); 0 is the Store's own
	g     *logstore.Log
	dir   string
	opts  logstore.Options
	inj   *faulttest.Injector
	sched faulttest.Schedule
	// failSync makes the next append's WAL fsync fail. It is armed only
	// right after an open, when the memtable is empty and the append cannot
	// make Pebble rotate the WAL (see faulttest).
	failSync bool
	restarts int
	term     uint64
	next     uint64                // the index the next append starts at
	keep     uint64                // entries below keep may have been deleted
	acked    map[uint64]*hraft.Log // acknowledged entries
	stable   map[string]uint64
	// counts for the log
	appends, failed, deletes, sets, reads int
}

// log is the driver's group in the open store.
func (d *logDriver) log() *logstore.Log {
	if d.g == nil {
		d.g = groupOf(d.t, d.s, d.group)
	}
	return d.g
}

// groupOf returns group (0: the Store's own) of s, retrying reads that
// injected faults fail, as a node starting on a failing disk would.
func groupOf(t *testing.T, s *logstore.Store, group uint32) *logstore.Log {
	t.Helper()
	if group == 0 {
		return s.Log
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err := s.Group(group)
		if err == nil {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d: %v", group, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func (d *logDriver) entries(n int) []*hraft.Log {
	logs := make([]*hraft.Log, n)
	for i := range logs {
		logs[i] = &hraft.Log{Index: d.next + uint64(i), Term: d.term, Type: hraft.LogCommand,
			Data: bytes.Repeat([]byte{byte(d.rng.Uint32())}, 1+d.rng.IntN(3000)), Extensions: []byte("n1")}
	}
	return logs
}

// restart closes the store and opens it again under the same faults.
func (d *logDriver) restart() {
	d.restarts++
	bounded(d.t, "Close", func() {
		if err := d.s.Close(); err != nil {
			d.t.Errorf("close: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		bounded(d.t, "Open", func() { d.s, err = logstore.Open(d.dir, d.opts) })
		d.g = nil
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("store does not open after 30s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	waitHealthy(d.t, d.s) // it may have opened read-only
	if last, _ := d.log().LastIndex(); last != d.next-1 {
		d.t.Fatalf("restarted with LastIndex %d; the last acknowledged entry is %d", last, d.next-1)
	}
	d.failSync = d.restarts == 1 || d.rng.IntN(2) == 0
}

func (d *logDriver) step() {
	switch r := d.rng.IntN(100); {
	case r < 65:
		d.appends++
		logs := d.entries(1 + d.rng.IntN(8))
		var err error
		if d.failSync {
			d.inj.Fail(faulttest.Sync, syscall.EIO)
		}
		bounded(d.t, "StoreLogs", func() { err = d.log().StoreLogs(logs) })
		if d.failSync {
			d.failSync = false
			d.inj.Random(d.sched)
			if err == nil {
				d.t.Fatalf("append of %d-%d acknowledged though its WAL fsync failed", logs[0].Index, d.next+uint64(len(logs))-1)
			}
		}
		if err != nil {
			if !errors.Is(err, logstore.ErrFaulted) {
				d.t.Fatalf("StoreLogs failed with %v, want an error wrapping ErrFaulted", err)
			}
			d.failed++
			// As raft: the append failed, a new term writes those indexes
			// again once the store is back.
			d.term++
			waitHealthy(d.t, d.s)
			return
		}
		for _, l := range logs {
			d.acked[l.Index] = l
		}
		d.next += uint64(len(logs))
	case r < 70 && d.next-d.keep > 20:
		d.deletes++
		upto := d.keep + uint64(d.rng.IntN(10))
		var err error
		bounded(d.t, "DeleteRange", func() { err = d.log().DeleteRange(d.keep, upto) })
		// Succeeded or not, those entries may be gone: raft compacts again
		// later and never reads below its snapshot.
		for i := d.keep; i <= upto; i++ {
			delete(d.acked, i)
		}
		d.keep = upto + 1
		if err != nil {
			d.failed++
			waitHealthy(d.t, d.s)
		}
	case r < 80:
		d.sets++
		key := fmt.Sprintf("key%d", d.rng.IntN(3))
		val := d.rng.Uint64()
		var err error
		bounded(d.t, "SetUint64", func() { err = d.log().SetUint64([]byte(key), val) })
		if err != nil {
			d.t.Fatalf("SetUint64 on an open store failed: %v (it must wait for the store instead)", err)
		}
		d.stable[key] = val
	default:
		if d.next <= d.keep {
			return
		}
		d.reads++
		i := d.keep + uint64(d.rng.IntN(int(d.next-d.keep)))
		var (
			got hraft.Log
			err error
		)
		bounded(d.t, "GetLog", func() { err = d.log().GetLog(i, &got) })
		if err != nil {
			d.inj.Lift()
			var again hraft.Log
			err2 := d.log().GetLog(i, &again)
			d.t.Fatalf("GetLog(%d) of an acknowledged entry: %v; after lifting: %v %d bytes", i, err, err2, len(again.Data))
		}
		d.compare(&got, d.acked[i])
	}
}

func (d *logDriver) compare(got, want *hraft.Log) {
	d.t.Helper()
	if got.Index != want.Index || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) {
		d.t.Fatalf("entry %d reads as term %d, %d bytes; acknowledged term %d, %d bytes",
			want.Index, got.Term, len(got.Data), want.Term, len(want.Data))
	}
}

// verify reopens dir without faults: every acknowledged entry and stable
// value is there, and nothing above the last acknowledged append.
func (d *logDriver) verify(dir string) {
	t := d.t
	s, err := logstore.Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatalf("reopen without faults: %v", err)
	}
	defer s.Close()
	g := groupOf(t, s, d.group)
	if err := g.Check(); err != nil {
		t.Fatalf("Check after the faults: %v", err)
	}
	if last, _ := g.LastIndex(); last != d.next-1 {
		t.Errorf("LastIndex = %d, want %d, the last acknowledged entry", last, d.next-1)
	}
	for i := d.keep; i < d.next; i++ {
		var got hraft.Log
		if err := g.GetLog(i, &got); err != nil {
			t.Fatalf("acknowledged entry %d: %v", i, err)
		}
		d.compare(&got, d.acked[i])
	}
	var l hraft.Log
	if err := g.GetLog(d.next, &l); err != hraft.ErrLogNotFound {
		t.Errorf("GetLog above the last acknowledged entry = %v, want ErrLogNotFound", err)
	}
	for k, want := range d.stable {
		if got, err := g.GetUint64([]byte(k)); err != nil || got != want {
			t.Errorf("stable %s = %d, %v; want %d", k, got, err, want)
		}
	}
}

// Injected write, sync and read errors at random points: the store heals
// itself every time, and holds exactly what it acknowledged.
func TestStore_Heal_IOErrorsLoseNothingAcknowledged(t *testing.T) {
	for _, group := range []uint32{0, 2} {
		t.Run(map[uint32]string{0: "group1", 2: "group2"}[group], func(t *testing.T) { healIOErrors(t, group) })
	}
}

// healIOErrors is TestStore_Heal_IOErrorsLoseNothingAcknowledged on one
// group (0: the Store's own, group 1); another group's entries sit beside
// it and must come through the same faults and reopens intact.
func healIOErrors(t *testing.T, group uint32) {
	sd := seed(t)
	steps := 600
	if testing.Short() {
		steps = 200
	}
	inj := faulttest.New(sd)
	dir := t.TempDir()
	opts := faultOptions(t, inj)
	s, err := logstore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	other := s.Log
	if group == 0 {
		if other, err = s.Group(7); err != nil {
			t.Fatal(err)
		}
	}
	neighbours := []*hraft.Log{{Index: 1, Term: 1, Type: hraft.LogCommand, Data: []byte("beside")},
		{Index: 2, Term: 1, Type: hraft.LogCommand, Data: []byte("the driven group")}}
	if err := other.StoreLogs(neighbours); err != nil {
		t.Fatal(err)
	}
	d := &logDriver{t: t, rng: rand.New(rand.NewPCG(sd, 11)), s: s, group: group, dir: dir, opts: opts, inj: inj,
		sched: faulttest.Schedule{Kinds: faulttest.All, Rate: 0.3, Quiet: [2]int{30, 150}, Faulty: [2]int{3, 20}},
		term:  1, next: 1, keep: 1, acked: map[uint64]*hraft.Log{}, stable: map[string]uint64{}}
	inj.Random(d.sched)
	for i := range steps {
		if i%100 == 50 {
			d.restart()
		}
		d.step()
	}
	inj.Lift()
	s = d.s
	waitHealthy(t, s)
	if err := s.Check(); err != nil {
		t.Fatalf("Check before close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	t.Logf("%d appends, %d prefix deletions, %d stable writes, %d reads, %d restarts; %d failed and healed; %d entries acknowledged; %v",
		d.appends, d.deletes, d.sets, d.reads, d.restarts, d.failed, d.next-1, inj)
	if d.failed == 0 {
		t.Fatalf("no write failed: the schedule injected nothing that mattered (%v)", inj)
	}
	d.verify(dir)
	s, err = logstore.Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	o := s.Log
	if group == 0 {
		o = groupOf(t, s, 7)
	}
	if err := o.Check(); err != nil {
		t.Fatalf("Check of the other group: %v", err)
	}
	if first, last := mustBounds(t, o); first != 1 || last != 2 {
		t.Fatalf("the other group's log holds %d-%d after the faults, want 1-2", first, last)
	}
	for _, want := range neighbours {
		var got hraft.Log
		if err := o.GetLog(want.Index, &got); err != nil || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("the other group's entry %d: %q, %v", want.Index, got.Data, err)
		}
	}
}

func mustBounds(t *testing.T, g *logstore.Log) (first, last uint64) {
	t.Helper()
	first, err := g.FirstIndex()
	if err == nil {
		last, err = g.LastIndex()
	}
	if err != nil {
		t.Fatal(err)
	}
	return first, last
}

// A full disk: appends fail with ErrFaulted wrapping ENOSPC, Fault says so,
// a stable write waits instead of failing (raft panics when it cannot save
// its term), and once space returns the store heals itself with nothing
// acknowledged lost.
func TestStore_Heal_DiskFullThenSpace(t *testing.T) {
	inj := faulttest.New(1)
	dir := t.TempDir()
	s, err := logstore.Open(dir, faultOptions(t, inj))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := &logDriver{t: t, rng: rand.New(rand.NewPCG(1, 11)), s: s, term: 1, next: 1, keep: 1,
		acked: map[uint64]*hraft.Log{}, stable: map[string]uint64{}}
	for range 20 {
		logs := d.entries(3)
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			d.acked[l.Index] = l
		}
		d.next += 3
	}

	// The WAL's fsync fails with ENOSPC (a failed write would wait instead:
	// see package fault).
	inj.Fail(faulttest.Sync, syscall.ENOSPC)
	err = s.StoreLogs(d.entries(2))
	if !errors.Is(err, logstore.ErrFaulted) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("StoreLogs on a full disk = %v, want ErrFaulted wrapping ENOSPC", err)
	}
	if f := s.Fault(); !errors.Is(f, syscall.ENOSPC) {
		t.Errorf("Fault on a full disk = %v, want ENOSPC", f)
	}
	if err := s.StoreLogs(d.entries(2)); !errors.Is(err, logstore.ErrFaulted) {
		t.Errorf("second StoreLogs on a full disk = %v, want ErrFaulted at once", err)
	}
	set := make(chan error, 1)
	go func() { set <- s.SetUint64([]byte("CurrentTerm"), 7) }()
	select {
	case err := <-set:
		t.Fatalf("SetUint64 on a full disk returned %v; it must wait for space", err)
	case <-time.After(200 * time.Millisecond):
	}
	var got hraft.Log
	if err := s.GetLog(d.next-1, &got); err != nil {
		t.Errorf("read on a full disk: %v", err)
	}
	if n := s.StorageErrors(); n == 0 {
		t.Error("StorageErrors is 0 on a full disk")
	}

	inj.Lift()
	select {
	case err := <-set:
		if err != nil {
			t.Fatalf("SetUint64 once space returned: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SetUint64 still waiting 30s after space returned")
	}
	waitHealthy(t, s)
	d.term++
	logs := d.entries(2)
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs after healing: %v", err)
	}
	for _, l := range logs {
		d.acked[l.Index] = l
	}
	d.next += 2
	d.stable["CurrentTerm"] = 7
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d.verify(dir)
}

// Closing a faulted store neither hangs nor leaks its healer, and a stable
// write waiting for it returns.
func TestStore_Close_WhileFaulted(t *testing.T) {
	inj := faulttest.New(1)
	s, err := logstore.Open(t.TempDir(), faultOptions(t, inj))
	if err != nil {
		t.Fatal(err)
	}
	inj.Fail(faulttest.Sync, syscall.EIO)
	if err := s.StoreLogs([]*hraft.Log{{Index: 1, Term: 1, Data: []byte("x")}}); !errors.Is(err, logstore.ErrFaulted) {
		t.Fatalf("StoreLogs = %v, want ErrFaulted", err)
	}
	set := make(chan error, 1)
	go func() { set <- s.Set([]byte("k"), []byte("v")) }()
	bounded(t, "Close of a faulted store", func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if err := <-set; err == nil {
		t.Error("a stable write cut short by Close reported success")
	}
}
