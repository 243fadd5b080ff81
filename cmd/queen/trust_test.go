package main

// Process-level tests of the Raft plane's protections: real `queen serve`
// processes on 127.0.0.1.

import (
	"fmt"
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
		n := strings.Count(intruder.logTail(1<<20), "quorum_at_risk")
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
