package raft_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// trust is what a node's transport is given: TLS, a secret, both or none.
type trust struct {
	tls    func(name string, host string) *tls.Config
	secret string
}

func (tr trust) apply(name, host string) func(*raft.Options) {
	return func(o *raft.Options) {
		if tr.tls != nil {
			o.TLS = tr.tls(name, host)
		}
		o.ClusterSecret = tr.secret
	}
}

// openTrusted opens n nodes on loopback TCP with static peers and the given
// trust, and waits for their leader.
func openTrusted(t *testing.T, n int, tr trust) []*raft.Node {
	t.Helper()
	addrs := rafttest.FreeAddrs(t, n)
	var peers []raft.Peer
	for i, a := range addrs {
		peers = append(peers, raft.Peer{ID: fmt.Sprintf("n%d", i+1), Addr: a})
	}
	base := t.TempDir()
	var nodes []*raft.Node
	for _, p := range peers {
		adjust := tr.apply(p.ID, "127.0.0.1")
		nodes = append(nodes, rafttest.OpenTCP(t, p.ID, filepath.Join(base, p.ID), p.Addr, func(o *raft.Options) {
			o.Peers = peers
			adjust(o)
		}))
	}
	rafttest.WaitLeader(t, nodes...)
	return nodes
}

func TestNode_Open_ReplicatesOverProtectedTransport(t *testing.T) {
	t.Parallel()
	ca := rafttest.NewCA(t, "cluster")
	for _, tc := range []struct {
		name string
		tr   trust
	}{
		{"mutual TLS", trust{tls: func(n, h string) *tls.Config { return ca.TLS(n, h) }}},
		{"secret without TLS", trust{secret: "correct horse battery staple"}},
		{"mutual TLS and secret", trust{tls: func(n, h string) *tls.Config { return ca.TLS(n, h) }, secret: "correct horse battery staple"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := openTrusted(t, 3, tc.tr)
			for i := range 20 {
				pushVia(t, nodes, "q", fmt.Sprintf("t%d", i))
			}
			rafttest.WaitApplied(t, rafttest.WaitLeader(t, nodes...).Status().Applied, nodes...)
			for _, n := range nodes {
				qs, err := n.Queues()
				if err != nil || len(qs) != 1 || qs[0].Partitions[0].Next != 20 {
					t.Fatalf("%s: queues %+v, %v; want q with 20 messages", n.Status().ID, qs, err)
				}
			}
		})
	}
}

// An untrusted node configured to be one of the cluster's voters campaigns
// against it over and over. Each attempt must fail at the transport: the
// cluster's term, leader and applied index stay as they were, and the
// untrusted node never learns a leader.
func TestNode_Open_RefusesUntrustedPeer(t *testing.T) {
	t.Parallel()
	cluster := rafttest.NewCA(t, "cluster")
	other := rafttest.NewCA(t, "other")
	tlsFrom := func(ca *rafttest.CA) func(string, string) *tls.Config {
		return func(n, h string) *tls.Config { return ca.TLS(n, h) }
	}
	const secret = "correct horse battery staple"
	// An intruder with TLS or a secret fails its own Dial; a plaintext one
	// has no set-up to fail, and sees its requests fail instead.
	const dialFailed, rpcFailed = "connection set-up failed", "failed to make requestVote RPC"
	for _, tc := range []struct {
		name           string
		good, intruder trust
		intruderSees   string
	}{
		{"certificate of another CA", trust{tls: tlsFrom(cluster)}, trust{tls: tlsFrom(other)}, dialFailed},
		{"another CA and the right secret", trust{tls: tlsFrom(cluster), secret: secret}, trust{tls: tlsFrom(other), secret: secret}, dialFailed},
		{"wrong secret", trust{secret: secret}, trust{secret: "guess"}, dialFailed},
		{"wrong secret over TLS", trust{tls: tlsFrom(cluster), secret: secret}, trust{tls: tlsFrom(cluster), secret: "guess"}, dialFailed},
		{"no secret", trust{secret: secret}, trust{}, rpcFailed},
		{"plaintext to TLS", trust{tls: tlsFrom(cluster)}, trust{}, rpcFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addrs := rafttest.FreeAddrs(t, 2)
			var logs, intruderLogs rafttest.Logs
			base := t.TempDir()
			good := rafttest.OpenTCP(t, "n1", filepath.Join(base, "n1"), addrs[0], func(o *raft.Options) {
				o.Bootstrap = true
				o.Logger = logs.Logger()
				tc.good.apply("n1", "127.0.0.1")(o)
			})
			rafttest.WaitLeader(t, good)
			push(t, good, "q", "before")
			// The new leader announces its HTTP address in a command of its
			// own: let it land before the state is taken as the baseline.
			for deadline := time.Now().Add(30 * time.Second); good.Status().LeaderHTTP == ""; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the leader did not announce its HTTP address within 30s")
				}
			}
			before := good.Status()

			intruder := rafttest.OpenTCP(t, "n2", filepath.Join(base, "n2"), addrs[1], func(o *raft.Options) {
				o.Peers = []raft.Peer{{ID: "n1", Addr: addrs[0]}, {ID: "n2", Addr: addrs[1]}}
				o.Logger = intruderLogs.Logger()
				tc.intruder.apply("n2", "127.0.0.1")(o)
			})
			// Wait for several refused attempts. The intruder's Raft reports
			// its failure once per repeat window (hclog.go), the cluster's
			// stream layer every refusal.
			deadline := time.Now().Add(30 * time.Second)
			for logs.Count("raft: refused a connection") < 3 || intruderLogs.Count(tc.intruderSees) < 1 {
				if time.Now().After(deadline) {
					t.Fatalf("after 30s: the cluster logged %d refusals and the intruder %d %q, want 3 and 1",
						logs.Count("raft: refused a connection"), intruderLogs.Count(tc.intruderSees), tc.intruderSees)
				}
				time.Sleep(20 * time.Millisecond)
			}
			after := good.Status()
			if after.Term != before.Term || after.Leader != "n1" || after.Applied != before.Applied || after.Voters != 1 {
				t.Fatalf("the cluster changed under an intruder's attempts: before %+v, after %+v", before, after)
			}
			if st := intruder.Status(); st.Leader != "" || st.Applied != 0 {
				t.Fatalf("the intruder got somewhere: %+v", st)
			}
			// And the cluster will not take it in either.
			if err := good.Join("n2", addrs[1], false); !errors.Is(err, raft.ErrQuorumRisk) {
				t.Fatalf("join of the intruder: %v, want ErrQuorumRisk", err)
			}
		})
	}
}

// A dialing node checks that the certificate of the node it dials names the
// host it dialed: a certificate of the cluster CA made out to another host
// does not pass.
func TestNode_Join_ChecksTheDialedHostName(t *testing.T) {
	t.Parallel()
	ca := rafttest.NewCA(t, "cluster")
	addrs := rafttest.FreeAddrs(t, 3)
	base := t.TempDir()
	leader := rafttest.OpenTCP(t, "n1", filepath.Join(base, "n1"), addrs[0], func(o *raft.Options) {
		o.Bootstrap = true
		o.TLS = ca.TLS("n1", "127.0.0.1")
	})
	rafttest.WaitLeader(t, leader)
	rafttest.OpenTCP(t, "n2", filepath.Join(base, "n2"), addrs[1], func(o *raft.Options) {
		o.TLS = ca.TLS("n2", "10.1.2.3", "n2.example")
	})
	err := leader.Join("n2", addrs[1], false)
	if !errors.Is(err, raft.ErrQuorumRisk) || !strings.Contains(err.Error(), "not 127.0.0.1") {
		t.Fatalf("join of a node whose certificate names another host: %v, want ErrQuorumRisk from the host check", err)
	}
	if got := leader.Status().Voters; got != 1 {
		t.Fatalf("voters = %d after a refused join, want 1", got)
	}
	// The same CA's certificate naming the right host passes.
	n3 := rafttest.OpenTCP(t, "n3", filepath.Join(base, "n3"), addrs[2], func(o *raft.Options) {
		o.TLS = ca.TLS("n3", "127.0.0.1")
	})
	if err := leader.Join("n3", addrs[2], false); err != nil {
		t.Fatalf("join of a node whose certificate names its host: %v", err)
	}
	rafttest.WaitLeader(t, leader, n3)
}

func TestLoadTLS_Errors(t *testing.T) {
	t.Parallel()
	ca := rafttest.NewCA(t, "cluster")
	other := rafttest.NewCA(t, "other")
	cert, key := ca.Issue("n1", "127.0.0.1")
	serverOnly, serverOnlyKey := ca.IssueServerOnly("s1", "127.0.0.1")
	_, otherKey := other.Issue("x", "127.0.0.1")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name          string
		cert, key, ca string
		want          string
	}{
		{"missing certificate", missing, key, ca.CertFile, "missing.pem"},
		{"missing CA", cert, key, missing, "missing.pem"},
		{"key of another certificate", cert, otherKey, ca.CertFile, "private key does not match"},
		{"CA file is not PEM", cert, key, key, "holds no PEM certificate"},
		{"certificate of another CA", cert, key, other.CertFile, "does not verify against the CA"},
		{"server authentication only", serverOnly, serverOnlyKey, ca.CertFile, "for client authentication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := raft.LoadTLS(tc.cert, tc.key, tc.ca)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadTLS: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	conf, err := raft.LoadTLS(cert, key, ca.CertFile)
	if err != nil {
		t.Fatalf("LoadTLS of good files: %v", err)
	}
	if conf.MinVersion < tls.VersionTLS12 || conf.ClientAuth != tls.RequireAndVerifyClientCert || conf.RootCAs == nil {
		t.Fatalf("LoadTLS config: MinVersion %x, ClientAuth %v, RootCAs %v", conf.MinVersion, conf.ClientAuth, conf.RootCAs)
	}
}
