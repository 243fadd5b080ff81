package main

// Process-level test of backup and restore: real `queen serve` processes on
// 127.0.0.1 and the `queen backup` and `queen restore` commands.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A backup taken through a follower of a three-node cluster restores into
// a new single-node cluster with the same state (queen check's digest at
// the same index), which serves it and takes writes; a truncated file and
// a non-empty directory are refused, leaving nothing.
func TestBackup_ThroughAFollowerRestoresANewCluster(t *testing.T) {
	c := startLoopback(t, 3)
	leader := c.waitLeader(c.nodes, 30*time.Second)
	for i := range 20 {
		c.mustPush(c.nodes, 10*time.Second, []pushItem{{Queue: "keep", TransactionID: fmt.Sprintf("k%d", i), Payload: i}})
	}
	follower := c.others(leader)[0]
	queen := func(args ...string) (string, error) {
		out, err := exec.Command(queenBinary(t), args...).CombinedOutput()
		return string(out), err
	}
	file := filepath.Join(t.TempDir(), "b.qbak")
	if out, err := queen("backup", "--url", follower.url(""), "--out", file); err != nil {
		t.Fatalf("queen backup: %v: %s", err, out)
	}
	if _, err := os.Stat(file + ".partial"); !os.IsNotExist(err) {
		t.Fatalf("the .partial file is left: %v", err)
	}
	out, err := queen("backup", "--verify", file, "--json")
	if err != nil {
		t.Fatalf("queen backup --verify: %v: %s", err, out)
	}
	var m struct {
		Node   string
		Groups []struct{ Index uint64 }
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || len(m.Groups) != 1 || m.Node != leader.id {
		t.Fatalf("manifest %s (%v): want one group, written by the leader %s", out, err, leader.id)
	}
	c.stopAndCompare(c.nodes, 30*time.Second)
	orig, err := runCheck(t, leader.dir)
	if err != nil {
		t.Fatal(err)
	}

	ports := freePorts(t, 1)
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	r := c.addNode("r1", addr, nil, "--http", addr, "--retention-interval", "0")
	data, _ := os.ReadFile(file)
	cut := filepath.Join(t.TempDir(), "cut.qbak")
	os.WriteFile(cut, data[:len(data)-7], 0o600)
	if out, err := queen("restore", "--in", cut, "--data", r.dir, "--node-id", "r1"); err == nil || !strings.Contains(out, "truncated") {
		t.Fatalf("restore of a truncated file: %v: %s", err, out)
	}
	if left, _ := os.ReadDir(r.dir); len(left) != 0 {
		t.Fatalf("a refused restore left %v", left)
	}
	if out, err := queen("restore", "--in", file, "--data", leader.dir); err == nil || !strings.Contains(out, "not empty") {
		t.Fatalf("restore over a store: %v: %s", err, out)
	}
	if out, err := queen("restore", "--in", file, "--data", r.dir, "--node-id", "r1"); err != nil {
		t.Fatalf("queen restore: %v: %s", err, out)
	}
	got, err := runCheck(t, r.dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.applied != m.Groups[0].Index || got.digest != orig.digest || got.applied != orig.applied {
		t.Fatalf("restored: applied %d digest %s; original applied %d digest %s; backup at %d",
			got.applied, got.digest, orig.applied, orig.digest, m.Groups[0].Index)
	}
	r.start()
	c.waitLeader([]*qnode{r}, 30*time.Second)
	res := c.mustPush([]*qnode{r}, 10*time.Second, []pushItem{{Queue: "keep", TransactionID: "k3", Payload: 3},
		{Queue: "keep", TransactionID: "new", Payload: "after"}})
	if res[0].Status != "duplicate" || res[1].Status != "queued" {
		t.Fatalf("restored node answered %+v, want k3 a duplicate and new queued", res)
	}
}
