package main

// Process-level test of backup and restore: real `queen serve` processes on
// 127.0.0.1 and the `queen backup` and `queen restore` commands.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
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
	t.Parallel()
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

// queen restore --queue brings a deleted queue back under a new name into
// the running cluster: its messages in their partitions and order, with
// their transaction ids and payloads, and each consumer group where it
// was; run again with --resume it adds nothing; an existing name without
// --resume, and a queue the backup lacks, are refused.
func TestRestore_OneQueueIntoTheRunningCluster(t *testing.T) {
	t.Parallel()
	c := startLoopback(t, 1)
	n := c.waitLeader(c.nodes, 30*time.Second)
	for i := range 30 {
		part := []string{"a", "b"}[i%2]
		c.mustPush(c.nodes, 10*time.Second, []pushItem{{Queue: "orders", Partition: part, TransactionID: fmt.Sprintf("o%d", i), Payload: map[string]int{"n": i}}})
	}
	c.mustPush(c.nodes, 10*time.Second, []pushItem{{Queue: "other", TransactionID: "x", Payload: 1}})
	// Group g consumes the first 4 messages of partition a (o0 o2 o4 o6).
	st, b, err := c.do(10*time.Second, "GET", n.url("/api/v1/pop/queue/orders/partition/a?batch=4&consumerGroup=g&autoAck=true"), nil)
	if err != nil || st != 200 || !strings.Contains(string(b), `"o6"`) {
		t.Fatalf("pop as g: %d %s %v", st, b, err)
	}
	queen := func(args ...string) (string, error) {
		out, err := exec.Command(queenBinary(t), args...).CombinedOutput()
		return string(out), err
	}
	file := filepath.Join(t.TempDir(), "b.qbak")
	if out, err := queen("backup", "--url", n.url(""), "--out", file); err != nil {
		t.Fatalf("queen backup: %v: %s", err, out)
	}
	if st, b, err := c.do(10*time.Second, "DELETE", n.url("/api/v1/resources/queues/orders"), nil); err != nil || st/100 != 2 {
		t.Fatalf("delete orders: %d %s %v", st, b, err)
	}

	restore := func(extra ...string) (string, error) {
		return queen(append([]string{"restore", "--in", file, "--url", n.url("")}, extra...)...)
	}
	if out, err := restore("--queue", "missing", "--as", "m2"); err == nil || !strings.Contains(out, `"missing" is not in`) {
		t.Fatalf("restore of a queue the backup lacks: %v: %s", err, out)
	}
	if out, err := restore("--queue", "orders", "--as", "other"); err == nil || !strings.Contains(out, "exists") {
		t.Fatalf("restore onto an existing queue without --resume: %v: %s", err, out)
	}
	out, err := restore("--queue", "orders", "--as", "orders2")
	if err != nil || !strings.Contains(out, "30 messages pushed (0 already there), 4 acknowledged") {
		t.Fatalf("queen restore --queue: %v: %s", err, out)
	}
	if out, err := restore("--queue", "orders", "--as", "orders2", "--resume"); err != nil || !strings.Contains(out, "0 messages pushed (30 already there)") {
		t.Fatalf("queen restore --queue --resume: %v: %s", err, out)
	}

	// Every message is back, in its partition and order; g resumes at o8.
	for _, part := range []string{"a", "b"} {
		var got []string
		for {
			st, b, err := c.do(10*time.Second, "GET", n.url("/api/v1/pop/queue/orders2/partition/"+part+"?batch=100&autoAck=true"), nil)
			if err != nil || (st != 200 && st != 204) {
				t.Fatalf("pop %s: %d %s %v", part, st, b, err)
			}
			var res struct {
				Messages []struct {
					TransactionID string         `json:"transactionId"`
					Data          map[string]int `json:"data"`
				} `json:"messages"`
			}
			if st == 204 || json.Unmarshal(b, &res) != nil || len(res.Messages) == 0 {
				break
			}
			for _, m := range res.Messages {
				if want := fmt.Sprintf("o%d", m.Data["n"]); m.TransactionID != want {
					t.Fatalf("message %s carries payload %v", m.TransactionID, m.Data)
				}
				got = append(got, m.TransactionID)
			}
		}
		var want []string
		for i := range 30 {
			if []string{"a", "b"}[i%2] == part {
				want = append(want, fmt.Sprintf("o%d", i))
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("partition %s of orders2: %v, want %v", part, got, want)
		}
	}
	st, b, err = c.do(10*time.Second, "GET", n.url("/api/v1/pop/queue/orders2/partition/a?batch=1&consumerGroup=g"), nil)
	if err != nil || st != 200 || !strings.Contains(string(b), `"transactionId":"o8"`) {
		t.Fatalf("group g on orders2/a: %d %s %v; want o8 next", st, b, err)
	}
}

// A backup whose manifest says a format newer than this binary reads (as a
// newer queen's would) is refused by `queen backup --verify` and by
// `queen restore`, which name the version found and the one they read and
// write nothing; before, a header of 1 under a manifest of 2 verified as
// intact and restored with exit 0.
func TestBackup_NewerFormatRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "future.qbak")
	data, err := os.ReadFile("../../engine/backup/testdata/v1.qbak")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, manifestFormat(t, data, 2), 0o600); err != nil {
		t.Fatal(err)
	}
	queen := func(args ...string) (string, error) {
		out, err := exec.Command(queenBinary(t), args...).CombinedOutput()
		return string(out), err
	}
	says := func(out string) bool {
		return strings.Contains(out, "format version 2") && strings.Contains(out, "reads up to 1")
	}
	if out, err := queen("backup", "--verify", file); err == nil || !says(out) {
		t.Fatalf("queen backup --verify of a format-2 file: %v: %s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "data")
	if out, err := queen("restore", "--in", file, "--data", dir, "--node-id", "r1"); err == nil || !says(out) {
		t.Fatalf("queen restore of a format-2 file: %v: %s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s: %v", dir, err)
	}
	// The fixture itself restores, and the serve line it prints listens
	// on loopback, not on serve's default of every interface.
	good := filepath.Join(t.TempDir(), "v1.qbak")
	if err := os.WriteFile(good, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := queen("restore", "--in", good, "--data", dir, "--node-id", "r1")
	if err != nil || !strings.Contains(out, "queen serve --data "+dir+" --node-id r1 --http 127.0.0.1:6632") {
		t.Fatalf("queen restore of the v1 fixture: %v: %s", err, out)
	}
}

// manifestFormat returns the backup file b with its manifest's "format"
// set to f, the frame's length and CRC made to match (engine/backup/doc.go).
func manifestFormat(t *testing.T, b []byte, f int) []byte {
	t.Helper()
	const at = 5 // "QBAK" and the version byte
	n := int(binary.BigEndian.Uint32(b[at+1:]))
	js := bytes.Replace(b[at+5:at+5+n], []byte(`"format":1`), []byte(fmt.Sprintf(`"format":%d`, f)), 1)
	head := binary.BigEndian.AppendUint32([]byte{'M'}, uint32(len(js)))
	tab := crc32.MakeTable(crc32.Castagnoli)
	out := append(bytes.Clone(b[:at]), head...)
	out = append(out, js...)
	out = binary.BigEndian.AppendUint32(out, crc32.Update(crc32.Checksum(head, tab), tab, js))
	return append(out, b[at+5+n+4:]...)
}
