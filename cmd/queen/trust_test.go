package main

// Process-level tests of the Raft plane's protections: real `queen serve`
// processes on 127.0.0.1.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queenmq/queen/raft/rafttest"
)

// TestCluster_TLSAndSecret: three nodes replicate over mutual TLS with a
// cluster secret read from a file; a node with the right certificates but
// another secret asks to join and is refused, and the cluster stays three.
func TestCluster_TLSAndSecret(t *testing.T) {
	t.Parallel()
	ca := rafttest.NewCA(t, "cluster")
	cert, key := ca.Issue("node", "127.0.0.1") // every node listens on 127.0.0.1
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	wrong := filepath.Join(dir, "wrong")
	os.WriteFile(secret, []byte("correct horse battery staple\n"), 0o600)
	os.WriteFile(wrong, []byte("guess\n"), 0o600)
	trust := []string{"--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", ca.CertFile}

	c := startLoopback(t, 3, append(append([]string{}, trust...), "--cluster-secret-file", secret)...)
	members := append([]*qnode{}, c.nodes...)
	c.waitConverged(members, 60*time.Second)
	for i := range 5 {
		c.mustPush(members, 20*time.Second, []pushItem{{Queue: "tls", TransactionID: fmt.Sprintf("m%d", i), Payload: i}})
	}

	ports := freePorts(t, 2)
	intruderHTTP := fmt.Sprintf("127.0.0.1:%d", ports[0])
	intruder := c.addNode("x", intruderHTTP, nil, append([]string{"--http", intruderHTTP,
		"--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--join", "http://" + c.nodes[0].http,
		"--retention-interval", "0", "--cluster-secret-file", wrong}, trust...)...)
	intruder.start()
	// A refused secret is final: the intruder says so and exits at once.
	waitFor(t, 60*time.Second, "the intruder's join to be refused and the intruder to exit", func() (bool, string) {
		n := strings.Count(intruder.logTail(1<<20), "cluster_secret_invalid")
		return n >= 1 && !intruder.running(), fmt.Sprintf("%d refusals in its log, running %v", n, intruder.running())
	})
	if intruder.cmd.ProcessState.Success() {
		t.Fatalf("the intruder exited 0 after its secret was refused:\n%s", intruder.logTail(3000))
	}
	hs, errs, desc := c.healths(members)
	for i, h := range hs {
		if errs[i] != nil || h.Voters != 3 {
			t.Fatalf("after the intruder's attempts: %s", desc)
		}
	}
	c.stopAndCompare(members, 60*time.Second)
}

// TestSingleNode_AnonymousJoinRefused: the report's attack on the embedded
// default (one node, no flags): an anonymous join of a voter that does not
// exist is refused, and the node keeps serving as a single voter, across a
// restart too.
func TestSingleNode_AnonymousJoinRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	n := c.addNode("n1", httpAddr, nil, "--http", httpAddr)
	n.start()
	c.waitLeader([]*qnode{n}, 30*time.Second)
	for _, route := range []string{"join", "leave"} {
		code, b, err := c.do(10*time.Second, "POST", n.url("/internal/v1/cluster/"+route), []byte(`{"id":"evil","addr":"127.0.0.1:17099","force":true}`))
		if e, ok := c2(b); err != nil || code != http.StatusForbidden || !ok || e.Code != "cluster_closed" || !strings.Contains(e.Error, "--cluster-secret") {
			t.Fatalf("anonymous %s: %d %s %v, want 403 cluster_closed naming --cluster-secret", route, code, b, err)
		}
	}
	c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "q", TransactionID: "after", Payload: 1}})
	n.stop()
	n.start()
	h := c.waitLeader([]*qnode{n}, 30*time.Second)
	if hs, _, desc := c.healths([]*qnode{h}); hs[0].Voters != 1 {
		t.Fatalf("after a restart: %s, want 1 voter", desc)
	}
	c.mustPush([]*qnode{n}, 10*time.Second, []pushItem{{Queue: "q", TransactionID: "restarted", Payload: 2}})
}

// TestCluster_AllTrustUnderLoad: three nodes with everything on: HTTPS for
// the API and the relays between nodes, mutual TLS and the cluster secret
// on Raft, JWT on every request. A node whose Raft certificate another CA
// signed asks to join with the right secret and is refused; then the
// leader is killed (kill -9) under push/pop/ack load, and nothing
// acknowledged is lost and the replicas converge.
func TestCluster_AllTrustUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level load test (about 40 s); skipped with -short")
	}
	t.Parallel()
	const jwtSecret = "a-cluster-wide-hs256-secret-32-bytes!!"
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "load-test", "role": "admin", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	ca := rafttest.NewCA(t, "cluster")
	cert, key := ca.Issue("node", "127.0.0.1")
	secret := writeSecret(t, "all trust, under load")
	trust := []string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", ca.CertFile,
		"--raft-tls-cert", cert, "--raft-tls-key", key, "--raft-tls-ca", ca.CertFile, "--cluster-secret-file", secret,
		"--snapshot-threshold", "256", "--trailing-logs", "64", "--snapshot-interval", "1s"}

	c := newCluster(t)
	c.env = []string{"JWT_ENABLED=true", "JWT_ALGORITHM=HS256", "JWT_SECRET=" + jwtSecret}
	c.useTLS(ca.ClientTLS())
	c.header.Set("Authorization", "Bearer "+token)
	c.startLoopback(3, trust...)
	c.waitLeader(c.nodes, 60*time.Second)

	// Without a token nothing is served, through a follower's relay either.
	for _, n := range c.nodes {
		c.header.Del("Authorization")
		code, b, err := c.do(10*time.Second, "POST", n.url("/api/v1/push"), []byte(`{"items":[{"queue":"q","payload":1}]}`))
		c.header.Set("Authorization", "Bearer "+token)
		if e, ok := c2(b); err != nil || code != http.StatusUnauthorized || !ok || e.Code != "unauthorized" {
			t.Fatalf("push without a token via %s: %d %s %v, want 401 unauthorized", n.id, code, b, err)
		}
	}

	other := rafttest.NewCA(t, "other")
	xCert, xKey := other.Issue("x", "127.0.0.1")
	ports := freePorts(t, 2)
	xHTTP := fmt.Sprintf("127.0.0.1:%d", ports[0])
	intruder := c.addNode("x", xHTTP, nil, "--http", xHTTP, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--join", c.nodes[0].url(""), "--retention-interval", "0", "--cluster-secret-file", secret, "--tls-ca", ca.CertFile,
		"--tls-cert", cert, "--tls-key", key, "--raft-tls-cert", xCert, "--raft-tls-key", xKey, "--raft-tls-ca", other.CertFile)
	intruder.start()
	waitFor(t, 60*time.Second, "the foreign-CA node's join to be refused twice", func() (bool, string) {
		n := strings.Count(intruder.logTail(1<<20), "quorum_at_risk")
		return n >= 2, fmt.Sprintf("%d refusals in its log", n)
	})
	intruder.kill()
	c.nodes = c.nodes[:3]
	hs, errs, desc := c.healths(c.nodes)
	for i, h := range hs {
		if errs[i] != nil || h.Voters != 3 {
			t.Fatalf("after the foreign node's attempts: %s", desc)
		}
	}

	killLeaderUnderLoad(t, c)
}
