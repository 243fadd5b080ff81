package main

// Process-level tests of `queen check`: it reads a stopped node's store
// and changes nothing, refuses a directory without a store, and names a
// running node's lock.

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
)

// runCheckOutput runs `queen check --data dir` and returns its output and
// whether it exited 0.
func runCheckOutput(t *testing.T, dir string) (string, bool) {
	t.Helper()
	out, err := exec.Command(queenBinary(t), "check", "--data", dir).CombinedOutput()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("run queen check: %v", err)
	}
	return string(out), err == nil
}

// tree lists every file under dir with its size and modification time
// (but a LOCK file's: taking a lock may touch it).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel] = fmt.Sprintf("%v %d", info.Mode(), info.Size())
		if d.Name() != "LOCK" {
			files[rel] += " " + info.ModTime().Format(time.RFC3339Nano)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestCheck_NoStore: a directory that does not exist, or exists without a
// store, is refused (exit 1, "no store"), and check creates nothing there.
func TestCheck_NoStore(t *testing.T) {
	base := t.TempDir()
	typo := filepath.Join(base, "typo")
	out, ok := runCheckOutput(t, typo)
	if ok || !strings.Contains(out, "no store in "+typo) || strings.Contains(out, "ok:") {
		t.Fatalf("check of a missing directory: ok=%v %q", ok, out)
	}
	if _, err := os.Stat(typo); !os.IsNotExist(err) {
		t.Fatalf("check created %s (%v)", typo, err)
	}
	empty := filepath.Join(base, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	out, ok = runCheckOutput(t, empty)
	if ok || !strings.Contains(out, "no store in "+empty) {
		t.Fatalf("check of an empty directory: ok=%v %q", ok, out)
	}
	if got := tree(t, empty); len(got) != 1 { // the directory itself
		t.Fatalf("check left files in an empty directory: %v", got)
	}
}

// TestCheck_RunningNodeThenStopped: on a running node's directory check
// refuses, naming the node's lock; once the node stopped it answers ok
// and leaves every file of the store as it was.
func TestCheck_RunningNodeThenStopped(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	port := freePorts(t, 1)[0]
	httpAddr := fmt.Sprintf("127.0.0.1:%d", port)
	n := c.addNode("n1", httpAddr, nil, "--http", httpAddr, "--retention-interval", "0")
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "q", TransactionID: "t1", Payload: 1}})

	out, ok := runCheckOutput(t, n.dir)
	if ok || !strings.Contains(out, "in use by a running node") || strings.Contains(out, "temporarily unavailable") {
		t.Fatalf("check under a running node: ok=%v %q", ok, out)
	}

	n.stop()
	before := tree(t, n.dir)
	r, err := runCheck(t, n.dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.applied == 0 {
		t.Fatalf("check of a store with a push reports applied index 0")
	}
	if after := tree(t, n.dir); !maps.Equal(before, after) {
		var diff []string
		for name := range maps.Keys(before) {
			if before[name] != after[name] {
				diff = append(diff, fmt.Sprintf("%s: %q -> %q", name, before[name], after[name]))
			}
		}
		for name := range maps.Keys(after) {
			if _, ok := before[name]; !ok {
				diff = append(diff, fmt.Sprintf("%s: created %q", name, after[name]))
			}
		}
		t.Fatalf("check changed the store:\n%s", strings.Join(diff, "\n"))
	}
}

// TestCheck_GroupedNodeWithoutSomeReplicas: a node on R of N holds only the
// groups placed on it and retires the ones moved away, group 1's engine
// (the data directory's own) included: check says which groups it holds
// no replica of and checks the others, rather than refusing the directory.
func TestCheck_GroupedNodeWithoutSomeReplicas(t *testing.T) {
	dir := t.TempDir()
	opts := engine.DefaultOptions()
	e, err := engine.Open(filepath.Join(dir, "groups", "2", "engine"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "groups", "3", "snapshots"), 0o755); err != nil { // retired: no engine
		t.Fatal(err)
	}
	out, ok := runCheckOutput(t, dir)
	for _, want := range []string{"group 1: no replica on this node", "ok: group 2 applied index 0", "group 3: no replica on this node"} {
		if !ok || !strings.Contains(out, want) {
			t.Fatalf("check of a grouped node: ok=%v, want %q in %q", ok, want, out)
		}
	}
}
