package engine_test

// I/O errors: a seeded schedule of injected write, sync and read errors
// (engine/fault/faulttest) under a driver of pushes, pops and acks. Every
// operation either succeeds or fails; after a failure the engine recovers
// in process; at the end the store, reopened without faults, passes Check,
// holds every acknowledged push and ack, and has the digest of a fault-free
// engine that applied exactly the batches that reached the disk. Rerun a
// failure with
//
//	go test ./engine -run TestEngine_Recover_ -seed=<seed>

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/engine/fault"
	"github.com/queenmq/queen/engine/fault/faulttest"
)

func testSeed(t *testing.T, test string) uint64 {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun: go test ./engine -run %s -seed=%d)", seed, test, seed)
	return seed
}

// bounded runs fn and fails the test if it has not returned within a
// generous deadline: no operation may hang on a fault.
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

// faultOptions are engine options over inj's file system. Batches are
// synced: without Raft, that is what makes a commit durable.
func faultOptions(t *testing.T, inj *faulttest.Injector) engine.Options {
	o := enginetest.Options()
	o.Sync = true
	o.MemTableBytes = 1 << 20 // flushes and their tables happen in a short run
	o.BlockCacheBytes = 32 << 20
	if inj != nil {
		o.FS = inj.FS(nil)
	}
	o.OnFatal = func(err error) {
		t.Errorf("fatal storage error (the injector leaves MANIFEST alone): %v", err)
		runtime.Goexit()
	}
	return o
}

// faultOp is one command of the driver, kept to be replayed on the
// reference engine.
type faultOp struct {
	stamp engine.Stamp
	push  []engine.PushItem
	pop   *engine.PopCmd
	ack   []engine.AckItem
}

func (o *faultOp) apply(b *engine.Batch) engine.Result {
	switch {
	case o.push != nil:
		return b.Apply(o.stamp, engine.PushCmd{Items: o.push})
	case o.pop != nil:
		return b.Apply(o.stamp, *o.pop)
	default:
		return b.Apply(o.stamp, engine.AckCmd{Items: o.ack})
	}
}

type ackedAck struct {
	part   engine.ID
	group  string
	offset engine.Offset
}

type faultDriver struct {
	t     *testing.T
	rng   *rand.Rand
	h     *enginetest.Harness // clock and stamps only
	e     *engine.Engine
	dir   string
	opts  engine.Options
	inj   *faulttest.Injector
	sched faulttest.Schedule
	// failSync makes the next batch's WAL fsync fail. It is armed only
	// right after an open, when the memtable is empty and the batch cannot
	// make Pebble rotate the WAL (see faulttest).
	failSync bool
	restarts int
	index    uint64    // applied index of the last batch on disk
	landed   []faultOp // batches on disk, in order: landed[i] is index i+1
	pushed   map[string]engine.ID
	acked    []ackedAck
	leases   []engine.PopResult
	// pending are the messages of the ack op being tried.
	pending []ackedAck
	batches int // batches tried
	failed  int // batches that failed
	ghosts  int // failed batches found on disk after recovery
	reads   int
	readErr int
	recover int // Recover calls
}

func (d *faultDriver) next() faultOp {
	d.h.Advance(time.Millisecond)
	op := faultOp{stamp: d.h.Stamp()}
	d.pending = nil
	queue := fmt.Sprintf("q%d", d.rng.IntN(2))
	switch r := d.rng.IntN(10); {
	case r < 5 || len(d.pushed) == 0:
		for j := range 1 + d.rng.IntN(4) {
			payload := fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, d.batches, strings.Repeat("x", d.rng.IntN(3000)))
			op.push = append(op.push, engine.PushItem{Queue: queue, Partition: fmt.Sprintf("p%d", d.rng.IntN(3)),
				TransactionID: fmt.Sprintf("t%d-%d", d.batches, j), Payload: payload})
		}
	case r < 8 || len(d.leases) == 0:
		group := []string{"", "g1"}[d.rng.IntN(2)]
		op.pop = &engine.PopCmd{Queue: queue, Group: group, Batch: 1 + d.rng.IntN(5)}
	default:
		i := d.rng.IntN(len(d.leases))
		res := d.leases[i]
		d.leases = append(d.leases[:i], d.leases[i+1:]...)
		op.ack = enginetest.AckMessages(res, "completed")
		for _, m := range res.Messages {
			d.pending = append(d.pending, ackedAck{part: m.PartitionID, group: res.Group, offset: m.Offset})
		}
	}
	return op
}

// step runs one operation: a batch, or now and then a read or a restart.
func (d *faultDriver) step() {
	switch r := d.rng.IntN(50); {
	case r == 0:
		d.restart()
		return
	case r < 7 && len(d.pushed) > 0:
		d.read()
		return
	}
	op := d.next()
	d.batches++
	if d.failSync {
		d.inj.Fail(faulttest.Sync, syscall.EIO)
	}
	var (
		push  []engine.PushResult
		pop   engine.PopResult
		ack   []engine.AckResult
		res   engine.Result
		opErr error
		err   error
	)
	bounded(d.t, "a batch", func() {
		var b *engine.Batch
		if b, err = d.e.Begin(); err != nil {
			return
		}
		res = op.apply(b)
		if err = b.Commit(d.index + 1); err == nil {
			// A pop's messages are read after the commit; a read that
			// fails leaves them unknown (the lease expires).
			if d.e.Finish(&res) != nil {
				res = engine.Result{Value: engine.PopResult{}}
			}
		}
	})
	opErr = res.Err
	switch v := res.Value.(type) {
	case []engine.PushResult:
		push = v
	case engine.PopResult:
		pop = v
	case []engine.AckResult:
		ack = v
	}
	if d.failSync {
		d.failSync = false
		d.inj.Random(d.sched)
		if err == nil {
			d.t.Fatalf("batch %d committed though its WAL fsync failed", d.index+1)
		}
	}
	if err != nil {
		if !errors.Is(err, engine.ErrFaulted) {
			d.t.Fatalf("batch %d failed with %v, want an error wrapping ErrFaulted", d.index+1, err)
		}
		d.failed++
		d.recoverAfter(op)
		return
	}
	if opErr != nil {
		d.t.Fatalf("pop: %v", opErr)
	}
	d.index++
	d.landed = append(d.landed, op)
	for _, r := range push {
		if r.Status == engine.Queued {
			d.pushed[r.TransactionID] = r.PartitionID
		}
	}
	if len(pop.Messages) > 0 {
		d.leases = append(d.leases, pop)
	}
	for i, r := range ack {
		if r.Success && !r.Noop {
			d.acked = append(d.acked, d.pending[i])
		}
	}
}

// recoverAfter brings the engine back after a failed batch, polling Recover
// (the injector's faulty phase ends after a bounded number of operations),
// and learns from the applied index whether the failed batch reached the
// disk anyway (a batch whose fsync failed may have).
func (d *faultDriver) recoverAfter(op faultOp) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		bounded(d.t, "Recover", func() { err = d.e.Recover() })
		d.recover++
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("engine still faulted after 30s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	switch got := d.e.Applied(); got {
	case d.index:
	case d.index + 1:
		if op.stamp == (engine.Stamp{}) {
			d.t.Fatalf("recovered at index %d past the last acknowledged batch %d", got, d.index)
		}
		d.ghosts++
		d.index++
		d.landed = append(d.landed, op)
	default:
		d.t.Fatalf("after recovery the engine is at index %d; the last acknowledged batch is %d", got, d.index)
	}
}

// restart closes the engine and opens it again, under the same faults: the
// WAL replay, its flush and the reload of the model all meet them. Every
// acknowledged batch must be there.
func (d *faultDriver) restart() {
	d.restarts++
	bounded(d.t, "Close", func() {
		if err := d.e.Close(); err != nil {
			d.t.Errorf("close: %v", err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		bounded(d.t, "Open", func() { d.e, err = engine.Open(d.dir, d.opts) })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("engine does not open after 30s: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
	if d.e.Fault() != nil { // opened read-only
		d.recoverAfter(faultOp{})
	}
	if got := d.e.Applied(); got != d.index {
		d.t.Fatalf("restarted at index %d; the last acknowledged batch is %d", got, d.index)
	}
	d.failSync = d.restarts == 1 || d.rng.IntN(2) == 0
}

// read looks up an acknowledged push. A read may fail on an I/O error, but
// it must never say that an acknowledged message does not exist.
func (d *faultDriver) read() {
	d.reads++
	txn := fmt.Sprintf("t%d-0", d.rng.IntN(d.batches))
	part, ok := d.pushed[txn]
	if !ok {
		return
	}
	var err error
	bounded(d.t, "a read", func() { _, err = d.e.MessageAt(part, txn) })
	switch {
	case errors.Is(err, engine.ErrMessageNotFound):
		d.t.Fatalf("acknowledged push %s reads as not found", txn)
	case errors.Is(err, engine.ErrFaulted):
		d.t.Fatalf("read on a healthy engine: %v", err)
	case err != nil:
		d.readErr++
	}
}

// verify reopens dir without faults and checks it against everything
// acknowledged and against a reference engine that applied the batches on
// disk.
func (d *faultDriver) verify(dir string) {
	t := d.t
	e, err := engine.Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatalf("reopen without faults: %v", err)
	}
	defer e.Close()
	if err := e.Check(); err != nil {
		t.Fatalf("engine.Check after the faults: %v", err)
	}
	if got := e.Applied(); got != d.index {
		t.Fatalf("reopened at index %d, want %d", got, d.index)
	}
	for txn, part := range d.pushed {
		if _, err := e.MessageAt(part, txn); err != nil {
			t.Errorf("acknowledged push %s: %v", txn, err)
		}
	}
	cursors, err := e.Cursors(d.h.Now, "")
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		part  engine.ID
		group string
	}
	committed := map[key]int64{}
	for _, c := range cursors {
		committed[key{c.PartitionID, c.Group}] = c.Committed
	}
	for _, a := range d.acked {
		group := a.group
		if group == "" {
			group = engine.QueueMode
		}
		if got, ok := committed[key{a.part, group}]; !ok || got < int64(a.offset) {
			t.Errorf("acknowledged ack of offset %d (group %q) not committed: cursor at %d", a.offset, group, got)
		}
	}
	ref, err := engine.Open(t.TempDir(), faultOptions(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := range d.landed {
		b, err := ref.Begin()
		if err != nil {
			t.Fatal(err)
		}
		d.landed[i].apply(b)
		if err := b.Commit(uint64(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := ref.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("digest differs from a fault-free engine that applied the %d batches on disk", len(d.landed))
	}
}

// Injected write, sync and read errors at random points: nothing
// acknowledged is lost, nothing is applied twice, the engine recovers in
// process each time.
func TestEngine_Recover_IOErrorsLoseNothingAcknowledged(t *testing.T) {
	seed := testSeed(t, "TestEngine_Recover_IOErrorsLoseNothingAcknowledged")
	steps := 400
	if testing.Short() {
		steps = 150
	}
	inj := faulttest.New(seed)
	dir := t.TempDir()
	opts := faultOptions(t, inj)
	e, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	d := &faultDriver{t: t, rng: rand.New(rand.NewPCG(seed, 7)), h: enginetest.MustOpen(t), e: e,
		dir: dir, opts: opts, inj: inj, pushed: map[string]engine.ID{},
		sched: faulttest.Schedule{Kinds: faulttest.All, Rate: 0.3, Quiet: [2]int{30, 150}, Faulty: [2]int{3, 20}}}
	inj.Random(d.sched)
	for i := range steps {
		if i%100 == 50 {
			d.restart()
		}
		d.step()
	}
	inj.Lift()
	e = d.e
	if err := e.Recover(); err != nil {
		t.Fatalf("recover after lifting the faults: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	t.Logf("%d batches (%d failed, %d of those on disk anyway), %d reads (%d failed), %d restarts, %d Recover calls; %d acked pushes, %d acked acks; %v",
		d.batches, d.failed, d.ghosts, d.reads, d.readErr, d.restarts, d.recover, len(d.pushed), len(d.acked), inj)
	if d.failed == 0 || inj.Total() == 0 {
		t.Fatalf("no batch failed: the test proved nothing (%d restarts; %v)", d.restarts, inj)
	}
	if len(d.acked) == 0 || len(d.pushed) == 0 {
		t.Fatalf("nothing acknowledged to check (%d pushes, %d acks)", len(d.pushed), len(d.acked))
	}
	d.verify(dir)
}

// A store whose disk is full opens read-only: it serves what is on disk,
// refuses writes at once with ErrFaulted, and becomes writable in process
// when space returns.
func TestEngine_Open_ReadOnlyWhileDiskFull(t *testing.T) {
	inj := faulttest.New(1)
	dir := t.TempDir()
	opts := faultOptions(t, inj)
	h := enginetest.MustOpen(t) // clock and stamps
	e, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var pushed []engine.PushResult
	for i := range 20 {
		b, err := e.Begin()
		if err != nil {
			t.Fatal(err)
		}
		pushed = append(pushed, b.Apply(h.Stamp(), engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: fmt.Sprint("t", i), Payload: []byte(`{}`)}}}).Value.([]engine.PushResult)...)
		if err := b.Commit(uint64(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	// The disk fills and the WAL's fsync fails: the batch fails (a failed
	// write would wait instead, see package fault), and the faulted engine
	// closes without flushing, so its WAL must be replayed at the next open.
	inj.Fail(faulttest.Sync, syscall.ENOSPC)
	b, err := e.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b.Apply(h.Stamp(), engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "lost", Payload: []byte(`{}`)}}})
	if err := b.Commit(21); !errors.Is(err, engine.ErrFaulted) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk = %v, want ErrFaulted wrapping ENOSPC", err)
	}
	if _, err := e.Begin(); !errors.Is(err, engine.ErrFaulted) {
		t.Fatalf("Begin after a failed commit = %v, want ErrFaulted", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("close a faulted engine: %v", err)
	}

	inj.Fail(faulttest.Write|faulttest.Sync, syscall.ENOSPC)
	var ro *engine.Engine
	bounded(t, "open on a full disk", func() { ro, err = engine.Open(dir, opts) })
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer ro.Close()
	if err := ro.Fault(); !errors.Is(err, engine.ErrFaulted) || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Fault of a read-only engine = %v, want ErrFaulted wrapping ENOSPC", err)
	}
	for _, r := range pushed {
		if _, err := ro.MessageAt(r.PartitionID, r.TransactionID); err != nil {
			t.Errorf("read %s on a full disk: %v", r.TransactionID, err)
		}
	}
	if _, err := ro.Begin(); !errors.Is(err, engine.ErrFaulted) {
		t.Errorf("Begin on a full disk = %v, want ErrFaulted", err)
	}
	if err := ro.Recover(); !errors.Is(err, engine.ErrFaulted) {
		t.Errorf("Recover while the disk is still full = %v, want ErrFaulted", err)
	}

	inj.Lift()
	if err := ro.Recover(); err != nil {
		t.Fatalf("Recover once space returned: %v", err)
	}
	if ro.Fault() != nil {
		t.Errorf("Fault after recovery = %v", ro.Fault())
	}
	// The failed batch may have reached the file before its fsync failed;
	// the applied index says whether it did.
	applied := ro.Applied()
	if applied != 20 && applied != 21 {
		t.Fatalf("applied %d after recovery, want 20 or 21", applied)
	}
	b, err = ro.Begin()
	if err != nil {
		t.Fatal(err)
	}
	b.Apply(h.Stamp(), engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: "after", Payload: []byte(`{}`)}}})
	if err := b.Commit(applied + 1); err != nil {
		t.Fatalf("commit after recovery: %v", err)
	}
	if err := ro.Check(); err != nil {
		t.Fatal(err)
	}
}

// A fatal error Pebble raises outside a commit (here a MANIFEST write in the
// flush that Close asks for) cannot be unwound in process: the default
// OnFatal names it and exits with status 74, and a restart finds every
// acknowledged batch.
func TestEngine_OnFatal_ExitsAndRestartRecovers(t *testing.T) {
	dir := os.Getenv("QUEEN_ENGINE_FATAL_DIR")
	if dir != "" {
		fatalChild(dir)
		return
	}
	dir = t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEngine_OnFatal_ExitsAndRestartRecovers$")
	cmd.Env = append(os.Environ(), "QUEEN_ENGINE_FATAL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != fault.ExitCode {
		t.Fatalf("child ended with %v, want exit status %d; output:\n%s", err, fault.ExitCode, out)
	}
	if !strings.Contains(string(out), "unrecoverable error") || !strings.Contains(string(out), "MANIFEST") {
		t.Errorf("child's last words do not name the error:\n%s", out)
	}
	if strings.Contains(string(out), "goroutine ") {
		t.Errorf("child printed a stack trace:\n%s", out)
	}
	e, err := engine.Open(dir, faultOptions(t, nil))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer e.Close()
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if got := e.Applied(); got != 50 {
		t.Fatalf("restart at index %d, want the 50 acknowledged batches", got)
	}
	qs, err := e.Queues()
	if err != nil || len(qs) != 1 || qs[0].Partitions[0].Next != 50 {
		t.Fatalf("queues after restart = %+v, %v", qs, err)
	}
}

// fatalChild acknowledges 50 synced pushes, then fails MANIFEST writes and
// closes the engine, whose flush then hits them.
func fatalChild(dir string) {
	var manifest atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if manifest.Load() && op.Kind == errorfs.OpFileWrite && strings.Contains(filepath.Base(op.Path), "MANIFEST") {
			return syscall.EIO
		}
		return nil
	})
	o := enginetest.Options()
	o.Sync = true
	o.FS = errorfs.Wrap(vfs.Default, inj)
	e, err := engine.Open(dir, o)
	if err != nil {
		panic(err)
	}
	st := engine.Stamp{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMicro()}
	for i := range 50 {
		st.Time++
		st.Seed[15] = byte(i)
		b, err := e.Begin()
		if err != nil {
			panic(err)
		}
		b.Apply(st, engine.PushCmd{Items: []engine.PushItem{{Queue: "q", TransactionID: fmt.Sprint("t", i), Payload: []byte(`{}`)}}})
		if err := b.Commit(uint64(i + 1)); err != nil {
			panic(err)
		}
	}
	manifest.Store(true)
	e.Close()
	fmt.Println("close returned: the fatal error was not raised")
	os.Exit(0)
}
