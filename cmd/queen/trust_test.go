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

	"github.com/queenmq/queen/raft/rafttest"
)

// TestCluster_TLSAndSecret: three nodes replicate over mutual TLS with a
// cluster secret read from a file; a node with the right certificates but
// another secret asks to join and is refused, and the cluster stays three.
func TestCluster_TLSAndSecret(t *testing.T) {
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
	waitFor(t, 60*time.Second, "the intruder's join to be refused twice", func() (bool, string) {
		n := strings.Count(intruder.logTail(1<<20), "cluster_secret_invalid")
		return n >= 2, fmt.Sprintf("%d refusals in its log", n)
	})
	intruder.kill()
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
