package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// pushPaused is a broker with push maintenance on: every push goes to the
// spool. Nothing else of it is called.
type pushPaused struct{ Broker }

func (pushPaused) Maintenance() (push, pop bool) { return true, false }

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

func (f *faultFS) Create(name string) (spoolFile, error) {
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
	file spoolFile
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

// spoolServer serves a push-paused broker over loopback HTTP with its
// spool's operations going through fs; it returns the push URL.
func spoolServer(t *testing.T, dir string, fs *faultFS) (*Server, string) {
	t.Helper()
	s, err := New(pushPaused{}, Options{SpoolDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.spool.fs = fs
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	return s, "http://" + ln.Addr().String() + "/api/v1/push"
}

type answer struct {
	status int
	body   string
	err    error
}

func postPush(url string) answer {
	resp, err := http.Post(url, "application/json", strings.NewReader(
		`{"items":[{"queue":"q","payload":{"n":1},"transactionId":"t1"},{"queue":"q","payload":{"n":2}}]}`))
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(b), err: err}
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

// TestSpool_Write_BufferedOnlyAfterSyncs: a push during push maintenance is
// answered "buffered" only after its file was written, fsynced, closed and
// renamed and the directory fsynced, in that order. The directory sync is
// held open: no answer may arrive meanwhile.
func TestSpool_Write_BufferedOnlyAfterSyncs(t *testing.T) {
	dir := t.TempDir()
	fs := newFaultFS()
	s, url := spoolServer(t, dir, fs)
	fs.hold = true
	answers := make(chan answer, 1)
	go func() { answers <- postPush(url) }()
	select {
	case <-fs.entered:
	case a := <-answers:
		t.Fatalf("answered before the directory sync began: %+v", a)
	case <-time.After(30 * time.Second):
		t.Fatal("the spool never synced its directory")
	}
	select {
	case a := <-answers:
		t.Fatalf("answered while the directory sync was still running: %+v", a)
	case <-time.After(300 * time.Millisecond):
	}
	close(fs.release)
	var a answer
	select {
	case a = <-answers:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer after the directory sync finished")
	}
	if a.err != nil || a.status != 201 || strings.Count(a.body, `"status":"buffered"`) != 2 {
		t.Fatalf("answer: %+v", a)
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
	var first spooledItem
	if err := json.Unmarshal([]byte(strings.SplitN(string(b), "\n", 2)[0]), &first); err != nil || first.TransactionID != "t1" {
		t.Fatalf("spool file %q: %v", b, err)
	}
	if got := s.spool.pending.Load(); got != 2 {
		t.Fatalf("pending = %d, want 2", got)
	}
}

// TestSpool_Write_FailureIsNeverBuffered: when any step of making the file
// durable fails, the push is answered 500 spool_write_failed, never
// "buffered"; no file is left for a replay, and the server goes on
// buffering once the fault is gone.
func TestSpool_Write_FailureIsNeverBuffered(t *testing.T) {
	for _, op := range []string{"create", "write", "sync", "close", "rename", "syncdir"} {
		t.Run(op, func(t *testing.T) {
			dir := t.TempDir()
			fs := newFaultFS()
			s, url := spoolServer(t, dir, fs)
			fs.fail = op
			a := postPush(url)
			if a.err != nil || a.status != 500 || !strings.Contains(a.body, `"code":"spool_write_failed"`) || strings.Contains(a.body, `"buffered"`) {
				t.Fatalf("push with %s failing: %+v", op, a)
			}
			if !slices.ContainsFunc(fs.log(), func(e string) bool { return strings.HasPrefix(e, op+" ") }) {
				t.Fatalf("the fault was never reached: %q", fs.log())
			}
			if files := spoolFiles(t, dir); len(files) != 0 {
				t.Fatalf("after a failed %s the spool holds %v", op, files)
			}
			if got := s.spool.pending.Load(); got != 0 {
				t.Fatalf("pending = %d after a failed write", got)
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
			if a := postPush(url); a.status != 201 || strings.Count(a.body, `"status":"buffered"`) != 2 {
				t.Fatalf("push after the fault cleared: %+v", a)
			}
		})
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
	sp, err := openSpool(dir, fs)
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
	if _, err := openSpool(dir, fs); !errors.Is(err, errInjected) {
		t.Fatalf("open with a failing directory sync: %v", err)
	}
}
