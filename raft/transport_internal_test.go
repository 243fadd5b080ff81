package raft

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// tcpPair returns the two ends of a loopback TCP connection: hellos are
// written by both sides at once, which needs a real socket's buffers.
func tcpPair(t *testing.T) (dialer, acceptor net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { d.Close(); a.Close() })
	d.SetDeadline(time.Now().Add(20 * time.Second))
	a.SetDeadline(time.Now().Add(20 * time.Second))
	return d, a
}

// both runs the dialer's and the acceptor's side of the hello at once.
func both(t *testing.T, dialerSecret, acceptorSecret []byte) (dialerErr, acceptorErr error) {
	d, a := tcpPair(t)
	errc := make(chan error, 1)
	go func() {
		err := hello(a, false, 0, acceptorSecret, nil, nil)
		if err != nil {
			a.Close() // as the stream layer does: the dialer then reads EOF
		}
		errc <- err
	}()
	dialerErr = hello(d, true, helloVersion, dialerSecret, nil, nil)
	if dialerErr != nil {
		d.Close()
	}
	return dialerErr, <-errc
}

func TestHello_Exchange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		dialer, acceptor string
		dialerErr        string // "" means success
		acceptorErr      string
	}{
		{"same secret", "s3cret", "s3cret", "", ""},
		{"no secret (TLS only)", "", "", "", ""},
		{"other secret", "s3cret", "guess", "did not accept this node's proof", "proof is wrong"},
		{"dialer without secret", "", "s3cret", "has a cluster secret and this node has none", "has no cluster secret"},
		{"acceptor without secret", "s3cret", "", "has no cluster secret", "has a cluster secret and this node has none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := func(s string) []byte {
				if s == "" {
					return nil
				}
				return []byte(s)
			}
			dErr, aErr := both(t, secret(tc.dialer), secret(tc.acceptor))
			check := func(side string, err error, want string) {
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want success", side, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want an error containing %q", side, err, want)
				}
			}
			check("dialer", dErr, tc.dialerErr)
			check("acceptor", aErr, tc.acceptorErr)
		})
	}
}

// A peer that sends each of a node's messages straight back (same nonce,
// same proof) does not pass: the proofs' labels differ by direction.
func TestHello_ReflectionFails(t *testing.T) {
	t.Parallel()
	d, a := tcpPair(t)
	go func() {
		var h [helloLen]byte
		if _, err := io.ReadFull(a, h[:]); err != nil {
			return
		}
		a.Write(h[:])
		var p [proofLen]byte
		if _, err := io.ReadFull(a, p[:]); err != nil {
			return
		}
		a.Write(p[:])
	}()
	err := hello(d, true, helloVersion, []byte("s3cret"), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "proof is wrong") {
		t.Fatalf("dialer against a reflecting peer: %v, want a wrong proof", err)
	}
}

// A peer that speaks first without proving (an old plain raft node, a
// scanner) is refused without learning a proof.
func TestHello_NotAHello(t *testing.T) {
	t.Parallel()
	d, a := tcpPair(t)
	errc := make(chan error, 1)
	go func() {
		err := hello(a, false, 0, []byte("s3cret"), nil, nil)
		a.Close() // as the stream layer does
		errc <- err
	}()
	d.Write([]byte(strings.Repeat("\x00", helloLen)))
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "not a queen Raft hello") {
		t.Fatalf("acceptor: %v, want a bad hello", err)
	}
	d.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _ := d.Read(make([]byte, 1)); n != 0 {
		t.Fatal("the acceptor sent a byte to a peer whose hello failed: it answers only a hello")
	}
}

func TestStreamLayer_Accept_SkipsFailedPeers(t *testing.T) {
	t.Parallel()
	s, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := hraft.ServerAddress(s.Addr().String())
	wrong, err := newStreamLayer("127.0.0.1:0", nil, "guess", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.Dial(addr, 5*time.Second); !errors.Is(err, ErrHandshake) {
		t.Fatalf("dial with another secret: %v, want ErrHandshake", err)
	}
	// A peer that connects and says nothing holds up no one.
	silent, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// Garbage is refused too.
	junk, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("x", 64)))
	defer junk.Close()

	right, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer right.Close()
	c, err := right.Dial(addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial with the right secret: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("raft")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer got.Close()
	got.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(got, buf); err != nil || string(buf) != "raft" {
		t.Fatalf("the accepted connection reads %q, %v: it is not the one that passed", buf, err)
	}
}

// One host holding connections open without a word takes at most
// maxHandshakesPerHost of the places for set-ups: its next connection is
// closed before the hello (no byte sent), and a peer elsewhere still gets
// in.
func TestStreamLayer_Accept_CapsHandshakesPerHost(t *testing.T) {
	t.Parallel()
	s, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addr().String()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	for i := range maxHandshakesPerHost {
		c, err := d.Dial("tcp", addr)
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			t.Skipf("dial from 127.0.0.2: %v (not a local address here)", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Its set-up has begun once the layer counts it (the acceptor
		// waits for the dialer's hello before it sends its own).
		deadline := time.Now().Add(10 * time.Second)
		for {
			s.mu.Lock()
			k := s.perHost["127.0.0.2"]
			s.mu.Unlock()
			if k == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("silent connection %d: the layer counts %d set-ups from its host", i, k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	extra, err := d.Dial("tcp", addr)
	if err == nil {
		defer extra.Close()
		extra.SetReadDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(extra); len(b) > 0 || isTimeout(err) {
			t.Fatalf("connection %d from one host: read %d bytes, %v; want it closed before the hello", maxHandshakesPerHost+1, len(b), err)
		}
	}

	peer, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := peer.Dial(hraft.ServerAddress(addr), 5*time.Second)
	if err != nil {
		t.Fatalf("a peer on another host, while one host holds its set-ups: %v", err)
	}
	c.Close()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestStreamLayer_Close_UnblocksAccept(t *testing.T) {
	t.Parallel()
	s, err := newStreamLayer("127.0.0.1:0", nil, "s3cret", quiet)
	if err != nil {
		t.Fatal(err)
	}
	// A connection stuck in its set-up must not hold Close up either.
	stuck, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Accept()
		errc <- err
	}()
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept after close: %v, want net.ErrClosed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Accept still blocked 20s after Close")
	}
	if _, err := s.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("accept on a closed layer: %v", err)
	}
}

func TestNewStreamLayer_RefusesUnspecifiedAddress(t *testing.T) {
	t.Parallel()
	if s, err := newStreamLayer("0.0.0.0:0", nil, "", quiet); err == nil {
		s.Close()
		t.Fatal("listening on 0.0.0.0 was accepted: peers cannot dial the address it would advertise")
	}
}

func TestExposed(t *testing.T) {
	t.Parallel()
	lan := &net.TCPAddr{IP: net.ParseIP("10.0.0.7"), Port: 7001}
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 7001}
	for _, tc := range []struct {
		name string
		addr net.Addr
		opts Options
		want bool
	}{
		{"LAN address, nothing set", lan, Options{}, true},
		{"LAN address with a secret", lan, Options{ClusterSecret: "s"}, false},
		{"LAN address with TLS", lan, Options{TLS: &tls.Config{}}, false},
		{"loopback, nothing set", loop, Options{}, false},
	} {
		if got := exposed(tc.addr, tc.opts); got != tc.want {
			t.Errorf("%s: exposed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNetworkTransport_NoPipeline: Raft's transport refuses pipelined
// replication, whose pipeline can deadlock a leader's replication to a
// follower and hang Shutdown (transportInFlight); replication then uses one
// AppendEntries at a time.
func TestNetworkTransport_NoPipeline(t *testing.T) {
	t.Parallel()
	s, err := newStreamLayer("127.0.0.1:0", nil, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	tr := newNetworkTransport(s, hclog.NewNullLogger())
	defer tr.Close()
	p, err := tr.AppendEntriesPipeline("peer", hraft.ServerAddress(s.Addr().String()))
	if !errors.Is(err, hraft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want ErrPipelineReplicationNotSupported", err)
	}
}
