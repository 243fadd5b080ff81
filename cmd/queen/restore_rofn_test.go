package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestBackup_ROfNRestoresOneNode: a backup taken through one node of four
// (--groups 4 --replicas 3, so the node hosts three of the four groups)
// holds every group, and restores into a new cluster of one node that
// serves every message once.
func TestBackup_ROfNRestoresOneNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "restore test secret")
	c := startLoopback(t, 4, "--groups", "4", "--replicas", "3", "--cluster-secret-file", secret)
	c.waitROfN(4, 3)
	// Six messages in each group's queue, pushed through every node.
	load := c.roundsOver(c.groupQueues("kept", 4, c.nodes))
	for range 6 {
		load.push(c.nodes)
	}
	file := filepath.Join(t.TempDir(), "b.qbak")
	queen := func(args ...string) (string, error) {
		out, err := exec.Command(queenBinary(t), args...).CombinedOutput()
		return string(out), err
	}
	if out, err := queen("backup", "--url", c.nodes[3].url(""), "--out", file); err != nil {
		t.Fatalf("queen backup through %s: %v: %s", c.nodes[3].id, err, out)
	}
	for _, n := range c.nodes {
		n.stop()
	}
	ports := freePorts(t, 2)
	httpAddr, raftAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	r := c.addNode("r1", httpAddr, nil, "--http", httpAddr, "--raft", raftAddr, "--groups", "4",
		"--retention-interval", "0", "--cluster-secret-file", secret)
	if out, err := queen("restore", "--in", file, "--data", r.dir, "--node-id", "r1", "--raft", raftAddr); err != nil {
		t.Fatalf("queen restore: %v: %s", err, out)
	}
	r.start()
	// The old cluster's layout records are replaced: r1 leads every group.
	waitFor(t, 60*time.Second, "r1 on record as every group's only voter", func() (bool, string) {
		code, b, err := c.do(5*time.Second, "GET", r.url("/api/v1/system/placement"), nil)
		var p placementOf
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || code != http.StatusOK || len(p.Groups) != 5 {
			return false, fmt.Sprint(code, err, string(b))
		}
		for _, g := range p.Groups {
			if g.Leader != "r1" || len(g.Members) != 1 || g.Members[0] != "r1" {
				return false, string(b)
			}
		}
		return true, ""
	})
	c.drainOnce([]*qnode{r}, load.queues, load.pushed)
	if t.Failed() {
		t.Logf("r1's log:\n%s", r.logTail(6000))
	}
}
