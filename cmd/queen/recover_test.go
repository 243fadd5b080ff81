package main

// Process-level tests of the way back from a lost quorum: real `queen
// serve` processes on 127.0.0.1.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecover_SingleNodeServesAgain: a forced join of a voter that does not
// exist leaves a single node without a quorum; stopped, recovered from
// peers.json with itself as the only peer, it elects itself and serves its
// data.
func TestRecover_SingleNodeServesAgain(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ports := freePorts(t, 3)
	httpAddr, raftAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	ghost := fmt.Sprintf("127.0.0.1:%d", ports[2]) // nothing listens there
	n := c.addNode("n1", httpAddr, nil, "--http", httpAddr, "--raft", raftAddr, "--retention-interval", "0",
		"--cluster-secret-file", writeSecret(t, "recover secret"))
	c.header.Set("X-Queen-Cluster-Secret", "recover secret")
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	for i := range 10 {
		c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "keep", TransactionID: fmt.Sprintf("k%d", i), Payload: i}})
	}

	// Unforced, the join is refused with the table's code.
	join := func(force bool) (int, []byte) {
		body := fmt.Sprintf(`{"id":"ghost","addr":%q,"force":%t}`, ghost, force)
		code, b, err := c.do(30*time.Second, "POST", n.url("/internal/v1/cluster/join"), []byte(body))
		if err != nil {
			t.Fatalf("join: %v", err)
		}
		return code, b
	}
	code, b := join(false)
	if e, ok := c2(b); code != http.StatusConflict || !ok || e.Code != "quorum_at_risk" || !strings.Contains(e.Error, "force") {
		t.Fatalf("unforced join of an unreachable voter: %d %s, want 409 quorum_at_risk naming force", code, b)
	}
	join(true) // its answer does not matter: the entry can never commit
	waitFor(t, 30*time.Second, "2 voters and no leader", func() (bool, string) {
		h, err := c.health(n)
		return err == nil && h.Voters == 2 && h.Leader == "", fmt.Sprintf("%v %v", h, err)
	})

	runRecover := func(args ...string) (string, error) {
		out, err := exec.Command(queenBinary(t), append([]string{"recover"}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := runRecover("--data", n.dir, "--peers", "n1@"+raftAddr); err == nil || !strings.Contains(out, "in use by a running node") {
		t.Fatalf("recover under a running node: %v: %s", err, out)
	}
	n.stop()
	if out, err := runRecover("--data", n.dir); err == nil || !strings.Contains(out, "peers.json") {
		t.Fatalf("recover without --peers or peers.json: %v: %s", err, out)
	}
	if out, err := runRecover("--data", t.TempDir(), "--peers", "n1@"+raftAddr); err == nil || !strings.Contains(out, "nothing to recover") {
		t.Fatalf("recover of an empty directory: %v: %s", err, out)
	}
	peers, _ := json.Marshal([]map[string]any{{"id": "n1", "address": raftAddr, "non_voter": false}})
	peersFile := filepath.Join(n.dir, "peers.json")
	if err := os.WriteFile(peersFile, peers, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runRecover("--data", n.dir)
	if err != nil || !strings.Contains(out, "n1@"+raftAddr+" (voter)") {
		t.Fatalf("queen recover: %v: %s", err, out)
	}
	t.Logf("queen recover: %s", strings.TrimSpace(out))
	if _, err := os.Stat(peersFile); !os.IsNotExist(err) {
		t.Fatalf("peers.json is still there after the recovery (%v)", err)
	}
	if _, err := os.Stat(peersFile + ".applied"); err != nil {
		t.Fatalf("peers.json.applied: %v", err)
	}

	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	if h, err := c.health(n); err != nil || h.Voters != 1 {
		t.Fatalf("after recovery: %v %v, want 1 voter", h, err)
	}
	c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "keep", TransactionID: "after", Payload: 10}})
	code, b, err = c.do(10*time.Second, "GET", n.url("/api/v1/pop/queue/keep?batch=100&autoAck=true"), nil)
	var pop popResponse
	if err != nil || code != http.StatusOK || json.Unmarshal(b, &pop) != nil {
		t.Fatalf("pop after recovery: %d %v %s", code, err, b)
	}
	var got []string
	for _, m := range pop.Messages {
		got = append(got, m.TransactionID)
	}
	if want := "k0 k1 k2 k3 k4 k5 k6 k7 k8 k9 after"; strings.Join(got, " ") != want {
		t.Fatalf("messages after recovery: %v, want %s", got, want)
	}
	n.stop()
	if _, err := runCheck(t, n.dir); err != nil {
		t.Fatal(err)
	}
}
