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
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "restore test secret")
	c := startLoopback(t, 4, "--groups", "4", "--replicas", "3", "--cluster-secret-file", secret)
	c.waitROfN(4, 3)
	pushed := map[string]bool{}
	var queues []string
	for g := 1; g <= 4; g++ {
		q := fmt.Sprintf("kept-%d", g)
		body, _ := json.Marshal(map[string]any{"queue": q, "raftGroup": g})
		waitFor(t, 30*time.Second, "configure "+q, func() (bool, string) {
			code, b, err := c.do(10*time.Second, "POST", c.nodes[g%4].url("/api/v1/configure"), body)
			return err == nil && code == http.StatusOK, fmt.Sprint(code, err, string(b))
		})
		queues = append(queues, q)
		var items []pushItem
		for k := range 3 * g {
			items = append(items, pushItem{Queue: q, TransactionID: fmt.Sprintf("%s-%d", q, k), Payload: k})
			pushed[items[k].TransactionID] = true
		}
		c.mustPush(c.nodes, 30*time.Second, items)
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
	c.drainOnce([]*qnode{r}, queues, pushed)
	if t.Failed() {
		t.Logf("r1's log:\n%s", r.logTail(6000))
	}
}
