package spool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
)

// faultFS is the real file system with a record of the spool's operations
// (by base name) and faults on demand: fail names the operation that
// errors ("create", "write", "sync", "close", "rename", "syncdir"), and
// with hold set, SyncDir signals entered and waits for release.
type faultFS struct {
	osFS
	fail string
	hold bool

	mu      sync.Mutex
	events  []string
	entered chan struct{}
	release chan struct{}
}

var errInjected = errors.New("injected fault")

func newFaultFS() *faultFS {
	return &faultFS{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (f *faultFS) record(op, name string) error {
	f.mu.Lock()
	f.events = append(f.events, op+" "+filepath.Base(name))
	f.mu.Unlock()
	if f.fail == op {
		return errInjected
	}
	return nil
}

func (f *faultFS) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

func (f *faultFS) Create(name string) (file, error) {
	if err := f.record("create", name); err != nil {
		return nil, err
	}
	file, err := f.osFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultFile{fs: f, name: name, file: file}, nil
}

func (f *faultFS) Rename(oldname, newname string) error {
	if err := f.record("rename", oldname+" -> "+filepath.Base(newname)); err != nil {
		return err
	}
	return f.osFS.Rename(oldname, newname)
}

func (f *faultFS) Remove(name string) error {
	f.record("remove", name)
	return f.osFS.Remove(name)
}

func (f *faultFS) SyncDir(dir string) error {
	if f.hold {
		f.entered <- struct{}{}
		<-f.release
	}
	if err := f.record("syncdir", dir); err != nil {
		return err
	}
	return f.osFS.SyncDir(dir)
}

type faultFile struct {
	fs   *faultFS
	name string
	file file
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.record("write", f.name); err != nil {
		return 0, err
	}
	return f.file.Write(p)
}

func (f *faultFile) Sync() error {
	if err := f.fs.record("sync", f.name); err != nil {
		return err
	}
	return f.file.Sync()
}

func (f *faultFile) Close() error {
	err := f.file.Close()
	if ferr := f.fs.record("close", f.name); ferr != nil {
		return ferr
	}
	return err
}

// twoItems is a request's items: one with a transaction id, one without.
func twoItems() []engine.PushItem {
	return []engine.PushItem{
		{Queue: "q", Payload: []byte(`{"n":1}`), TransactionID: "t1"},
		{Queue: "q", Payload: []byte(`{"n":2}`)},
	}
}

// spoolFiles lists the spool directory's entries.
func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestSpool_Write_ReturnsOnlyAfterSyncs: Write returns (and the edge
// answers "buffered") only after its file was written, fsynced, closed and
// renamed and the directory fsynced, in that order. The directory sync is
// held open: Write may not return meanwhile.
func TestSpool_Write_ReturnsOnlyAfterSyncs(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	sp, err := open(dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	fs.events = nil
	fs.hold = true
	done := make(chan error, 1)
	go func() { done <- sp.Write(twoItems()) }()
	select {
	case <-fs.entered:
	case err := <-done:
		t.Fatalf("Write returned before the directory sync began: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the spool never synced its directory")
	}
	select {
	case err := <-done:
		t.Fatalf("Write returned while the directory sync was still running: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(fs.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Write did not return after the directory sync finished")
	}

	files := spoolFiles(t, dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], ".jsonl") {
		t.Fatalf("spool directory holds %v, want one .jsonl file", files)
	}
	name := files[0]
	tmp := name + tmpSuffix
	want := []string{"create " + tmp, "write " + tmp, "sync " + tmp, "close " + tmp,
		"rename " + tmp + " -> " + name, "syncdir " + filepath.Base(dir)}
	if got := fs.log(); !slices.Equal(got, want) {
		t.Fatalf("operations:\n got %q\nwant %q", got, want)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var first, second item
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("spool file %q: want two JSON lines", b)
	}
	if first.TransactionID != "t1" || second.TransactionID == "" {
		t.Fatalf("transaction ids %q, %q: want t1 and a minted one", first.TransactionID, second.TransactionID)
	}
	if got := sp.Pending(); got != 2 {
		t.Fatalf("Pending = %d, want 2", got)
	}
}

// TestSpool_Write_FailureLeavesNothing: when any step of making the file
// durable fails, Write returns ErrWrite (the edge answers 500
// spool_write_failed, never "buffered"); no file is left for a replay, and
// the spool goes on writing once the fault is gone.
func TestSpool_Write_FailureLeavesNothing(t *testing.T) {
	for _, op := range []string{"create", "write", "sync", "close", "rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			fs := newFaultFS()
			sp, err := open(dir, fs)
			if err != nil {
				t.Fatal(err)
			}
			fs.fail = op
			if err := sp.Write(twoItems()); !errors.Is(err, ErrWrite) || !errors.Is(err, errInjected) {
				t.Fatalf("Write with %s failing: %v, want ErrWrite wrapping the fault", op, err)
			}
			if !slices.ContainsFunc(fs.log(), func(e string) bool { return strings.HasPrefix(e, op+" ") }) {
				t.Fatalf("the fault was never reached: %q", fs.log())
			}
			if files := spoolFiles(t, dir); len(files) != 0 {
				t.Fatalf("after a failed %s the spool holds %v", op, files)
			}
			if got := sp.Pending(); got != 0 {
				t.Fatalf("Pending = %d after a failed write", got)
			}
			if op == "syncdir" {
				// The file taken back is followed by another try at
				// making the directory durable.
				log := fs.log()
				i := slices.IndexFunc(log, func(e string) bool { return strings.HasPrefix(e, "remove ") })
				if i < 0 || !slices.ContainsFunc(log[i:], func(e string) bool { return strings.HasPrefix(e, "syncdir ") }) {
					t.Fatalf("want the removal of the renamed file, then a directory sync: %q", log)
				}
			}
			fs.fail = ""
			if err := sp.Write(twoItems()); err != nil || sp.Pending() != 2 {
				t.Fatalf("Write after the fault cleared: %v, Pending = %d", err, sp.Pending())
			}
		})
	}
}

// TestSpool_Drain: files are replayed in the order written, each removed
// once its replay succeeded; a failed replay keeps its file and those after
// it, and is counted.
func TestSpool_Drain(t *testing.T) {
	dir := t.TempDir()
	sp, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"a", "b", "c"} {
		if err := sp.Write([]engine.PushItem{{Queue: q, Payload: []byte(`1`), Sealed: q == "b", TraceID: engine.ID{9}, HasTrace: true}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	refuse := errors.New("refused")
	err = sp.Drain(func(items []engine.PushItem) error {
		if len(items) != 1 || items[0].TraceID != (engine.ID{9}) || !items[0].HasTrace || items[0].Sealed != (items[0].Queue == "b") {
			t.Fatalf("replayed %+v: not as written", items)
		}
		got = append(got, items[0].Queue)
		if items[0].Queue == "b" {
			return refuse
		}
		return nil
	})
	if !errors.Is(err, refuse) || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Drain = %v after replaying %v, want refused after a, b", err, got)
	}
	if sp.Pending() != 2 || sp.Failed() != 1 || len(spoolFiles(t, dir)) != 2 {
		t.Fatalf("Pending %d, Failed %d, files %v: want 2, 1, two files", sp.Pending(), sp.Failed(), spoolFiles(t, dir))
	}
	got = nil
	if err := sp.Drain(func(items []engine.PushItem) error { got = append(got, items[0].Queue); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"b", "c"}) || sp.Pending() != 0 || len(spoolFiles(t, dir)) != 0 {
		t.Fatalf("second drain replayed %v, Pending %d: want b, c and an empty spool", got, sp.Pending())
	}
}

// TestSpool_Open_DiscardsTempFiles: open removes the temporary file of a
// write a crash cut short (it was never answered "buffered"), syncs the
// directory after, and counts the complete files.
func TestSpool_Open_DiscardsTempFiles(t *testing.T) {
	dir := t.TempDir()
	complete := "00000000000000000001-000001.jsonl"
	half := "00000000000000000002-000002.jsonl" + tmpSuffix
	lines := `{"queue":"q","transactionId":"a","payload":1}` + "\n" + `{"queue":"q","transactionId":"b","payload":2}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, complete), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, half), []byte(`{"queue":"q","transac`), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := newFaultFS()
	sp, err := open(dir, fs)
	if err != nil {
		t.Fatal(err)
	}
	if files := spoolFiles(t, dir); !slices.Equal(files, []string{complete}) {
		t.Fatalf("after open the spool holds %v, want only %s", files, complete)
	}
	if got := sp.pending.Load(); got != 2 {
		t.Fatalf("pending = %d, want 2", got)
	}
	log := fs.log()
	i, j := slices.Index(log, "remove "+half), slices.Index(log, "syncdir "+filepath.Base(dir))
	if i < 0 || j < i {
		t.Fatalf("want the removal of %s, then a directory sync: %q", half, log)
	}
	names, err := sp.files()
	if err != nil || !slices.Equal(names, []string{complete}) {
		t.Fatalf("files() = %v, %v", names, err)
	}

	fs = newFaultFS()
	fs.fail = "syncdir"
	if err := os.WriteFile(filepath.Join(dir, half), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := open(dir, fs); !errors.Is(err, errInjected) {
		t.Fatalf("open with a failing directory sync: %v", err)
	}
}
