package raft

import (
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Handshake version 2: the cluster ids, and the nodes of an earlier
// release, which speak version 1 only (transport.go, "Versions").

func TestHello_ClusterIDs(t *testing.T) {
	t.Parallel()
	a := []byte("aaaaaaaaaaaaaaaa")
	b := []byte("bbbbbbbbbbbbbbbb")
	for _, tc := range []struct {
		name             string
		dialer, acceptor []byte
		foreign          bool
	}{
		{"same cluster", a, a, false},
		{"other clusters", a, b, true},
		{"the dialer knows none yet", nil, b, false},
		{"the acceptor knows none yet", a, nil, false},
	} {
		for _, secret := range [][]byte{nil, []byte("s3cret")} {
			t.Run(tc.name, func(t *testing.T) {
				d, c := tcpPair(t)
				errc := make(chan error, 1)
				go func() {
					err := hello(c, false, 0, secret, nil, tc.acceptor)
					if err != nil {
						c.Close()
					}
					errc <- err
				}()
				dErr := hello(d, true, helloVersion, secret, nil, tc.dialer)
				aErr := <-errc
				for side, err := range map[string]error{"dialer": dErr, "acceptor": aErr} {
					if got := errors.Is(err, errForeignCluster); got != tc.foreign {
						t.Errorf("%s: %v; want a foreign-cluster refusal: %v", side, err, tc.foreign)
					}
					if tc.foreign && !strings.Contains(err.Error(), "6161") {
						t.Errorf("%s: %v does not name the ids", side, err)
					}
				}
			})
		}
	}
}

// oldAcceptor serves one connection as a node of an earlier release does:
// it sends its version 1 hello at once, ends a connection whose hello names
// another version, and otherwise runs the proofs. It reports whether it
// served a connection to the end.
func oldAcceptor(t *testing.T, ln net.Listener, secret []byte) <-chan bool {
	served := make(chan bool, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			var own, peer [helloLen]byte
			copy(own[:], helloMagic)
			own[len(helloMagic)] = helloVersion1
			own[len(helloMagic)+1] = flagSecret
			nonce := own[len(helloMagic)+2:]
			rand.Read(nonce)
			c.Write(own[:])
			if _, err := io.ReadFull(c, peer[:]); err != nil || peer[len(helloMagic)] != helloVersion1 {
				c.Close()
				served <- false
				continue
			}
			err = proofs(c, false, secret, nil, nonce, peer[len(helloMagic)+2:])
			served <- err == nil
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	return served
}

// A node dialing one of an earlier release is answered in version 1 and
// dials again in version 1, which that node accepts; the next dial goes
// in version 1 at once. A node of an earlier release dialing this one (it
// sends version 1 without waiting) is answered in version 1.
func TestStreamLayer_VersionOnePeers(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := oldAcceptor(t, ln, secret)
	s, err := newStreamLayer("127.0.0.1:0", nil, string(secret), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.setCluster("00112233445566778899aabbccddeeff")
	for i := range 2 {
		c, err := s.Dial(hraft.ServerAddress(ln.Addr().String()), 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d to a version 1 node: %v", i, err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, _ := io.ReadAll(c); string(b) != "ok" {
			t.Fatalf("dial %d: read %q after the set-up", i, b)
		}
		c.Close()
	}
	var got []bool
	for len(got) < 3 {
		select {
		case ok := <-served:
			got = append(got, ok)
		case <-time.After(10 * time.Second):
			t.Fatalf("the old node served %v, want a refused version 2 then two version 1 set-ups", got)
		}
	}
	if got[0] || !got[1] || !got[2] {
		t.Fatalf("the old node served %v, want a refused version 2 then two version 1 set-ups", got)
	}

	// The other way: an old dialer.
	d, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.SetDeadline(time.Now().Add(10 * time.Second))
	if err := hello(d, true, helloVersion1, secret, nil, nil); err != nil {
		t.Fatalf("a version 1 dialer: %v", err)
	}
}

// Two nodes of different clusters never exchange a Raft message: the dial
// fails on both sides and both count it.
func TestStreamLayer_RefusesAnotherCluster(t *testing.T) {
	t.Parallel()
	layer := func(cluster string) *streamLayer {
		s, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.setCluster(cluster)
		return s
	}
	ours, theirs := layer("00112233445566778899aabbccddeeff"), layer("ffeeddccbbaa99887766554433221100")
	if _, err := ours.Dial(hraft.ServerAddress(theirs.Addr().String()), 5*time.Second); !errors.Is(err, ErrHandshake) ||
		!errors.Is(err, errForeignCluster) {
		t.Fatalf("dial a node of another cluster: %v, want a refusal naming the clusters", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ours.ForeignPeers() != 1 || theirs.ForeignPeers() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("refusals counted: dialer %d, acceptor %d; want 1 each", ours.ForeignPeers(), theirs.ForeignPeers())
		}
		time.Sleep(10 * time.Millisecond)
	}
	same := layer("ffeeddccbbaa99887766554433221100")
	c, err := same.Dial(hraft.ServerAddress(theirs.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("dial a node of the same cluster: %v", err)
	}
	c.Close()
}
