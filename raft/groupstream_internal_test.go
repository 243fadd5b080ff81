package raft

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// selfSignedTLS is a mutual-TLS configuration whose one certificate, for
// 127.0.0.1, is its own CA.
func selfSignedTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs: pool, MinVersion: tls.VersionTLS13}
}

// exchange dials to over from and checks that the connection reaches
// accept and carries bytes both ways.
func exchange(t *testing.T, from hraft.StreamLayer, to net.Addr, accept hraft.StreamLayer, what string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		c, err := accept.Accept()
		if err != nil {
			got <- err
			return
		}
		defer c.Close()
		buf := make([]byte, len(what))
		if _, err := io.ReadFull(c, buf); err != nil {
			got <- err
			return
		}
		if string(buf) != what {
			got <- errors.New("read " + string(buf))
			return
		}
		_, err = c.Write([]byte("re:" + what))
		got <- err
	}()
	c, err := from.Dial(hraft.ServerAddress(to.String()), 5*time.Second)
	if err != nil {
		t.Fatalf("%s: dial: %v", what, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(what)); err != nil {
		t.Fatalf("%s: write: %v", what, err)
	}
	buf := make([]byte, len("re:"+what))
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "re:"+what {
		t.Fatalf("%s: answer %q, %v", what, buf, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: accepting side: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: nothing accepted", what)
	}
}

func mustGroup(t *testing.T, s *streamLayer, id uint32) hraft.StreamLayer {
	t.Helper()
	g, err := s.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Every group's connections go through the one listener, set up as group
// 1's are (plain, secret, TLS and secret), and reach the Accept of the
// group they name; a group the peer does not host is refused at Dial.
// Group 1 connections still reach a node that hosts no other group.
func TestStreamLayer_Groups(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		tls    bool
		secret string
	}{{"plain", false, ""}, {"secret", false, "s3cret"}, {"tls+secret", true, "s3cret"}} {
		t.Run(c.name, func(t *testing.T) {
			var conf *tls.Config
			if c.tls {
				conf = selfSignedTLS(t)
			}
			open := func() *streamLayer {
				s, err := newStreamLayer("127.0.0.1:0", conf, c.secret, quiet)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				return s
			}
			a, b, one := open(), open(), open()
			b2, b5 := mustGroup(t, b, 2), mustGroup(t, b, 5)
			exchange(t, a, b.Addr(), b, "group 1")
			exchange(t, mustGroup(t, a, 2), b.Addr(), b2, "group 2")
			exchange(t, mustGroup(t, a, 5), b.Addr(), b5, "group 5")
			exchange(t, mustGroup(t, a, 0), b.Addr(), mustGroup(t, b, 0), "group 0")
			exchange(t, a, one.Addr(), one, "group 1 to a node of one group")
			for _, to := range []*streamLayer{b, one} {
				if _, err := mustGroup(t, a, 9).Dial(hraft.ServerAddress(to.Addr().String()), 5*time.Second); !errors.Is(err, ErrHandshake) {
					t.Errorf("dial group 9, which the peer does not host: %v, want ErrHandshake", err)
				}
			}
			// A closed group's connections are refused; the others go on.
			b5.Close()
			if _, err := mustGroup(t, a, 5).Dial(hraft.ServerAddress(b.Addr().String()), 5*time.Second); !errors.Is(err, ErrHandshake) {
				t.Errorf("dial group 5 after its layer closed: %v, want ErrHandshake", err)
			}
			exchange(t, mustGroup(t, a, 2), b.Addr(), b2, "group 2 again")
			exchange(t, a, b.Addr(), b, "group 1 again")
		})
	}
}

// Raft runs over the groups of shared stream layers: two nodes, each hosting
// groups 1 and 2 on one listener, elect a leader in each group and commit
// in each.
func TestStreamLayer_GroupsCarryRaft(t *testing.T) {
	t.Parallel()
	layers := make([]*streamLayer, 2)
	for i := range layers {
		s, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		layers[i] = s
	}
	groups := map[uint32][]*hraft.Raft{}
	for _, id := range []uint32{1, 2} {
		var servers []hraft.Server
		for i, s := range layers {
			servers = append(servers, hraft.Server{ID: hraft.ServerID([]string{"a", "b"}[i]), Address: hraft.ServerAddress(s.Addr().String())})
		}
		var rafts []*hraft.Raft
		for i, s := range layers {
			layer := mustGroup(t, s, id)
			tr := hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{Stream: layer, MaxPool: 2, Timeout: 5 * time.Second})
			defer tr.Close()
			conf := hraft.DefaultConfig()
			conf.LocalID = servers[i].ID
			conf.LogOutput = io.Discard
			store := hraft.NewInmemStore()
			snaps := hraft.NewInmemSnapshotStore()
			if err := hraft.BootstrapCluster(conf, store, store, snaps, tr, hraft.Configuration{Servers: servers}); err != nil {
				t.Fatal(err)
			}
			r, err := hraft.NewRaft(conf, &countFSM{}, store, store, snaps, tr)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { r.Shutdown().Error() }()
			rafts = append(rafts, r)
		}
		groups[id] = rafts
	}
	// Both groups commit once both run (group 1's connections now pass
	// the first-byte check).
	for _, id := range []uint32{1, 2} {
		rafts := groups[id]
		deadline := time.Now().Add(30 * time.Second)
		for {
			var leader *hraft.Raft
			for _, r := range rafts {
				if r.State() == hraft.Leader {
					leader = r
				}
			}
			if leader != nil {
				if err := leader.Apply([]byte("x"), 10*time.Second).Error(); err != nil {
					t.Fatalf("group %d: apply: %v", id, err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %d elected no leader in 30 s", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// countFSM counts applied entries.
type countFSM struct{ n int }

func (f *countFSM) Apply(*hraft.Log) any                 { f.n++; return nil }
func (f *countFSM) Snapshot() (hraft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (f *countFSM) Restore(io.ReadCloser) error          { return nil }
