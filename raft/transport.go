package raft

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// Raft connections.
//
// A node's Raft transport is hashicorp/raft's NetworkTransport over a stream
// layer of ours (streamLayer): TCP, optionally inside mutual TLS
// (Options.TLS), optionally opened with a cluster-secret handshake
// (Options.ClusterSecret). Both run before Raft sees the connection: a peer
// that fails them is closed by the accepting side, which goes on to the next
// connection, and the dialing side's Dial returns ErrHandshake.
//
// With neither set, a connection carries Raft's own stream from its first
// byte, as hashicorp/raft's TCP transport does. With either set, each side
// first sends a hello, both at once:
//
//	+--------+---------+-------+--------+
//	| "QRFT" | version | flags | nonce  |
//	|  4 B   | u8 = 1  |  u8   |  32 B  |
//	+--------+---------+-------+--------+
//
// flags bit 0 (flagSecret) says that secret proofs follow; the other bits are
// zero and reserved. The nonce is fresh random bytes. A hello whose magic or
// flags differ from this side's own ends the connection: the peer is not a
// queen node, or one side has a cluster secret and the other none.
//
// Versions. The dialer's hello names the version it speaks, 2 (or 1, to a
// peer that refused 2 within versionMemory); the acceptor reads it before it
// answers and answers in the same version, 1 or 2, so a node of an earlier
// release (which sends version 1 without waiting, and ends a connection whose
// hello names another) dials this one as before. A dialer whose version 2 is
// answered by a version 1 hello has met such a node: it dials again in
// version 1. Version 1 is the exchange below and nothing more.
//
// With a secret, the dialer then sends its proof; the acceptor checks it and
// only then sends its own, which the dialer checks. Each proof is 32 bytes:
//
//	dialer   → acceptor: HMAC-SHA256(secret, "queen raft dialer"   ‖ dialer nonce   ‖ acceptor nonce ‖ binding)
//	acceptor → dialer:   HMAC-SHA256(secret, "queen raft acceptor" ‖ acceptor nonce ‖ dialer nonce   ‖ binding)
//
// binding is empty on plain TCP. Over TLS it is 32 bytes of keying material
// exported from the TLS session (label "EXPORTER-queen-raft-secret", no
// context), so a proof is worth nothing outside the TLS session it was made
// in. The labels differ by direction, so a node's own proof reflected back at
// it does not pass; each side's nonce is fresh, so a recorded proof cannot be
// replayed; and the acceptor proves nothing to a dialer that has not proved
// first. Proofs are compared with hmac.Equal. Every read has a fixed length,
// and the whole set-up, TLS included, must end within handshakeTimeout.
//
// Version 2 then exchanges the nodes' cluster ids, both at once, once the
// proofs (if any) have passed:
//
//	dialer   ↔ acceptor: cluster id (16 B; zero while the node knows none)
//
// The id is the one identity.go derives (hex-decoded). Two non-zero ids that
// differ end the connection on both sides, each logging the two ids, and
// count in Status.ForeignPeers (queen_raft_foreign_peers_refused_total): a
// node of another cluster (a data directory restored on the wrong machine,
// an address reused) never exchanges a Raft message with this one. A node
// that knows no id yet (a founder before its round, a joiner before it
// joined, a cluster from before there were ids) is not refused.
//
// Part of the wire format — never change; a new layout takes a new version.
//
// The secret authenticates who opens a connection. On plain TCP it does not
// hide or protect what follows: someone on the network path can read and
// alter the stream, and from one recorded handshake can try to guess a weak
// secret offline. TLS is what protects the stream; the secret is then a
// second key, independent of the certificates.
const (
	helloMagic    = "QRFT"
	helloVersion1 = 1
	helloVersion  = 2 // what this node dials with
	clusterIDLen  = 16
	flagSecret    = 1 << 0
	nonceLen      = 32
	helloLen      = len(helloMagic) + 1 + 1 + nonceLen
	proofLen      = sha256.Size
	dialerLabel   = "queen raft dialer"
	acceptorLabel = "queen raft acceptor"
	exporterLabel = "EXPORTER-queen-raft-secret"
	bindingLen    = 32
)

const (
	// handshakeTimeout bounds a connection's set-up: TLS, hello and proofs.
	handshakeTimeout = 5 * time.Second
	// maxHandshakes bounds the connections being set up at once; the
	// accepting side closes any beyond it at once.
	maxHandshakes = 256
	// maxHandshakesPerHost bounds those from one remote IP, so that a host
	// holding connections open without a word (each for handshakeTimeout)
	// cannot take every place and lock the peers out: it takes four
	// addresses to fill them. It is the total there was before it: a node
	// of many groups dials a peer for each at once (and in tests every
	// node is 127.0.0.1), and a burst that passed then passes now.
	maxHandshakesPerHost = 64
	// warnEvery is how often a refused peer's host is logged at warning
	// level; refusals in between are logged at debug level.
	warnEvery = 10 * time.Second
	// versionMemory is how long a peer that answered version 2 with
	// version 1 is dialed in version 1 (it may be upgraded meanwhile).
	versionMemory = time.Minute
)

// Transport pool size and I/O timeout, as hashicorp/raft's TCP transport
// was used with before the stream layer.
const (
	transportPool    = 3
	transportTimeout = 10 * time.Second
	// transportInFlight = 1 turns off hashicorp/raft's pipelined
	// replication. Its pipeline (v1.8.0) can deadlock: when a follower
	// answers a pipelined AppendEntries with a higher term or a failure,
	// the response reader stops, the pipeline's decoder blocks handing it
	// the next response, and the next send blocks handing the decoder its
	// request. The replication goroutine never ends, so the leader never
	// sends that follower another entry while it leads, and Raft.Shutdown,
	// which waits for it, never returns (the fault-schedule test, seed 1001,
	// saw SIGTERM hang this way twice in ten minutes). Without the pipeline
	// each AppendEntries waits for its answer; group commit keeps entries
	// large, so the cost is one round trip per entry per follower.
	transportInFlight = 1
)

// NewLocalTransport returns the transport of a node that replicates to no
// one: a single voter needs no network, and this keeps it on the same code
// path as a cluster.
func NewLocalTransport(id string) hraft.Transport {
	_, t := hraft.NewInmemTransport(hraft.ServerAddress(id))
	return t
}

// streamLayer is a hraft.StreamLayer over TCP that sets every connection up
// (TLS, secret handshake) before handing it to Raft.
type streamLayer struct {
	ln        net.Listener
	server    *tls.Config // nil: no TLS
	client    *tls.Config // cloned per dial with ServerName set
	secret    []byte      // nil: no secret handshake
	log       *slog.Logger
	conns     chan net.Conn // set up, waiting for Accept
	closed    chan struct{}
	slots     chan struct{} // one per connection being set up (maxHandshakes)
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu      sync.Mutex
	done    bool                   // Close has run
	pending map[net.Conn]struct{}  // accepted, being set up; closed by Close
	perHost map[string]int         // remote IP -> connections of pending from it
	warned  map[string]time.Time   // remote host -> last warning
	groups  map[uint32]*groupLayer // the other groups hosted (groupstream.go)
	v1      map[string]time.Time   // peer address -> when it answered version 2 with version 1

	cluster atomic.Pointer[[clusterIDLen]byte] // this node's cluster id, nil while it knows none (setCluster)
	foreign atomic.Uint64                      // connections refused for another cluster id

	identity atomic.Pointer[func() identity] // what status probes are answered (identity.go)

	// heldOne is set while group 1 (the connections with no group frame)
	// is not open on a Store: they are refused until it is (Group(1)).
	heldOne atomic.Bool
}

var _ hraft.StreamLayer = (*streamLayer)(nil)

// newStreamLayer listens on addr. The address must be one peers can dial
// (not 0.0.0.0): it is what the node advertises. It serves group 1 from
// its first connection on (unless holdGroupOne), and groups from theirs.
func newStreamLayer(addr string, tlsConf *tls.Config, secret string, log *slog.Logger, groups ...uint32) (*streamLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft: transport: %w", err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("raft: transport: %s is not an address peers can dial: bind a specific IP", addr)
	}
	s := &streamLayer{ln: ln, log: log, conns: make(chan net.Conn), closed: make(chan struct{}),
		slots: make(chan struct{}, maxHandshakes), pending: map[net.Conn]struct{}{}, perHost: map[string]int{},
		warned: map[string]time.Time{}, v1: map[string]time.Time{}}
	if tlsConf != nil {
		s.server = tlsConf.Clone()
		s.server.ClientAuth = tls.RequireAndVerifyClientCert
		if s.server.ClientCAs == nil {
			s.server.ClientCAs = s.server.RootCAs
		}
		s.client = tlsConf.Clone()
	}
	if secret != "" {
		s.secret = []byte(secret)
	}
	// Groups other than 1 are known before the first connection is
	// accepted, so that none of theirs is taken for group 1's.
	for _, g := range groups {
		if _, err := s.Group(g); err != nil {
			ln.Close()
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// newNetworkTransport is Raft's network transport over s.
func newNetworkTransport(s hraft.StreamLayer, logger hclog.Logger) *hraft.NetworkTransport {
	return hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream: s, MaxPool: transportPool, Timeout: transportTimeout, Logger: logger, MaxRPCsInFlight: transportInFlight,
	})
}

// protected reports whether connections start with a hello (TLS or secret).
func (s *streamLayer) protected() bool { return s.server != nil || s.secret != nil }

// acceptLoop accepts TCP connections and sets each up in a goroutine of its
// own, so a slow or hostile peer holds up no one else.
func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() {
				return
			}
			// Out of descriptors or the like: back off and go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("raft: accept", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
				continue
			case <-s.closed:
				return
			}
		}
		delay = 0
		select {
		case s.slots <- struct{}{}:
		default:
			c.Close()
			s.refused(c.RemoteAddr().String(), fmt.Errorf("%d connections already being set up", maxHandshakes))
			continue
		}
		switch s.track(c) {
		case tracked:
			go s.setUpAccepted(c)
		case hostFull:
			<-s.slots
			c.Close()
			s.refused(c.RemoteAddr().String(), fmt.Errorf("%d connections from its host already being set up", maxHandshakesPerHost))
		case layerClosed:
			c.Close()
			return
		}
	}
}

// What track did with a connection.
const (
	tracked     = iota
	hostFull    // maxHandshakesPerHost from its host are being set up
	layerClosed // Close has run
)

// track registers a connection being set up.
func (s *streamLayer) track(c net.Conn) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return layerClosed
	}
	host := remoteHost(c)
	if s.perHost[host] >= maxHandshakesPerHost {
		return hostFull
	}
	s.perHost[host]++
	s.pending[c] = struct{}{}
	s.wg.Add(1)
	return tracked
}

func (s *streamLayer) untrack(c net.Conn) {
	host := remoteHost(c)
	s.mu.Lock()
	delete(s.pending, c)
	if s.perHost[host]--; s.perHost[host] <= 0 {
		delete(s.perHost, host)
	}
	s.mu.Unlock()
}

// remoteHost is the IP c comes from (its whole address when it has no
// port).
func remoteHost(c net.Conn) string {
	host := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return host
}

// setUpAccepted runs the accepting side's set-up and queues the connection
// for Accept, or closes it.
func (s *streamLayer) setUpAccepted(c net.Conn) {
	defer s.wg.Done()
	conn, err := s.setUp(c, false, "", 0)
	var (
		to     chan net.Conn
		closed <-chan struct{}
	)
	if err == nil {
		to, closed, conn, err = s.route(conn)
	}
	s.untrack(c)
	<-s.slots
	if err != nil {
		c.Close()
		switch {
		case s.isClosed() || errors.Is(err, errAnswered): // after Close, failures are Close's doing
		case errors.Is(err, errNotOpen):
			s.log.Debug("raft: refused a connection", "remote", c.RemoteAddr().String(), "err", err)
		default:
			s.refused(c.RemoteAddr().String(), err)
		}
		return
	}
	select {
	case to <- conn:
	case <-closed:
		conn.Close()
	case <-s.closed:
		conn.Close()
	}
}

// refused logs a peer that failed the set-up: at warning level once per
// host every warnEvery, at debug level in between, so a misconfigured node
// retrying all day is seen without filling the log.
func (s *streamLayer) refused(remote string, err error) {
	host := remote
	if h, _, splitErr := net.SplitHostPort(host); splitErr == nil {
		host = h
	}
	now := time.Now()
	s.mu.Lock()
	warn := now.Sub(s.warned[host]) >= warnEvery
	if warn {
		if len(s.warned) >= 1024 {
			clear(s.warned)
		}
		s.warned[host] = now
	}
	s.mu.Unlock()
	level := slog.LevelDebug
	if warn {
		level = slog.LevelWarn
	}
	s.log.Log(context.Background(), level, "raft: refused a connection", "remote", remote, "err", err)
}

// Accept returns the next connection that passed the set-up. It returns
// net.ErrClosed once Close has run.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		if s.isClosed() {
			c.Close()
			return nil, net.ErrClosed
		}
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Dial connects to a peer and sets the connection up; a peer that fails the
// set-up gives an error wrapping ErrHandshake. A peer that speaks handshake
// version 1 only is dialed again in version 1 (see the format above).
func (s *streamLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr := string(address)
	version := byte(helloVersion)
	s.mu.Lock()
	if at, ok := s.v1[addr]; ok && time.Since(at) < versionMemory {
		version = helloVersion1
	}
	s.mu.Unlock()
	conn, err := s.dial(addr, timeout, version)
	if errors.Is(err, errPeerSpeaksV1) {
		s.mu.Lock()
		if len(s.v1) >= 1024 {
			clear(s.v1)
		}
		s.v1[addr] = time.Now()
		s.mu.Unlock()
		conn, err = s.dial(addr, timeout, helloVersion1)
	}
	if errors.Is(err, errForeignCluster) {
		s.refused(addr, err) // the dialing side's word on it; the acceptor logs its own
	}
	return conn, err
}

// dial is one attempt of Dial in handshake version.
func (s *streamLayer) dial(addr string, timeout time.Duration, version byte) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	conn, err := s.setUp(c, true, addr, version)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrHandshake, addr, err)
	}
	return conn, nil
}

// setCluster sets the cluster id this node's connections carry (identity.go;
// "" while it knows none).
func (s *streamLayer) setCluster(id string) {
	if id == "" {
		s.cluster.Store(nil)
		return
	}
	var b [clusterIDLen]byte
	if raw, err := hex.DecodeString(id); err == nil && len(raw) == clusterIDLen {
		copy(b[:], raw)
	} else {
		sum := sha256.Sum256([]byte(id)) // not one identity.go derived: compared all the same
		copy(b[:], sum[:])
	}
	s.cluster.Store(&b)
}

// ForeignPeers counts the connections refused because the peer belongs to
// another cluster (queen_raft_foreign_peers_refused_total).
func (s *streamLayer) ForeignPeers() uint64 { return s.foreign.Load() }

// probe dials addr through the whole set-up and hangs up: it proves that a
// node listens there and passes TLS and the secret handshake.
func (s *streamLayer) probe(addr string) error {
	c, err := s.Dial(hraft.ServerAddress(addr), handshakeTimeout)
	if err != nil {
		return err
	}
	return c.Close()
}

// Close stops accepting, unblocks Accept and closes the connections being
// set up.
func (s *streamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.done = true
		close(s.closed)
		for c := range s.pending {
			c.Close()
		}
		s.mu.Unlock()
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

func (s *streamLayer) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Addr is the address the node listens on and advertises.
func (s *streamLayer) Addr() net.Addr { return s.ln.Addr() }

// setUp runs TLS and the hello on c, within handshakeTimeout. dialer says
// which side this is; address is the dialed peer (its host is the name its
// certificate must carry) and version the handshake version the dialer
// speaks (the acceptor answers the dialer's).
func (s *streamLayer) setUp(c net.Conn, dialer bool, address string, version byte) (net.Conn, error) {
	if !s.protected() {
		return c, nil
	}
	if err := c.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return nil, err
	}
	conn := c
	var binding []byte
	if s.server != nil {
		var tc *tls.Conn
		if dialer {
			cfg := s.client.Clone()
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			cfg.ServerName = host
			tc = tls.Client(c, cfg)
		} else {
			tc = tls.Server(c, s.server)
		}
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		conn = tc
		if s.secret != nil {
			st := tc.ConnectionState()
			b, err := st.ExportKeyingMaterial(exporterLabel, nil, bindingLen)
			if err != nil {
				return nil, fmt.Errorf("tls: export keying material: %w", err)
			}
			binding = b
		}
	}
	var cluster []byte
	if id := s.cluster.Load(); id != nil {
		cluster = id[:]
	}
	if err := hello(conn, dialer, version, s.secret, binding, cluster); err != nil {
		if errors.Is(err, errForeignCluster) {
			s.foreign.Add(1)
		}
		return nil, err
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return conn, nil
}

// errPeerSpeaksV1 is a dialer's hello answered in version 1 when it spoke
// version 2: the peer runs an earlier release (Dial dials again).
var errPeerSpeaksV1 = errors.New("the peer speaks handshake version 1 only")

// errForeignCluster is a peer whose cluster id differs from this node's.
var errForeignCluster = errors.New("the peer belongs to another cluster")

// hello exchanges hellos, with a secret proofs, and in version 2 cluster
// ids (see the format above). version is the dialer's; the acceptor
// answers in the dialer's. cluster is this node's id, nil when it knows
// none.
func hello(conn io.ReadWriter, dialer bool, version byte, secret, binding, cluster []byte) error {
	var own, peer [helloLen]byte
	copy(own[:], helloMagic)
	if secret != nil {
		own[len(helloMagic)+1] = flagSecret
	}
	nonce := own[len(helloMagic)+2:]
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("draw nonce: %w", err)
	}
	send := func() error {
		own[len(helloMagic)] = version
		if _, err := conn.Write(own[:]); err != nil {
			return fmt.Errorf("send hello: %w", err)
		}
		return nil
	}
	if dialer {
		if err := send(); err != nil {
			return err
		}
	}
	if _, err := io.ReadFull(conn, peer[:]); err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	if string(peer[:len(helloMagic)]) != helloMagic {
		return errors.New("the peer's hello is not a queen Raft hello: it is not a queen node with TLS or a cluster secret")
	}
	switch pv := peer[len(helloMagic)]; {
	case !dialer && (pv == helloVersion1 || pv == helloVersion):
		version = pv
		if err := send(); err != nil {
			return err
		}
	case !dialer:
		return fmt.Errorf("the peer speaks handshake version %d, this node %d and %d", pv, helloVersion1, helloVersion)
	case pv == helloVersion1 && version != helloVersion1:
		return errPeerSpeaksV1
	case pv != version:
		return fmt.Errorf("the peer answered handshake version %d to %d", pv, version)
	}
	if peer[len(helloMagic)+1] != own[len(helloMagic)+1] {
		if secret != nil {
			return errors.New("the peer has no cluster secret and this node has one")
		}
		return errors.New("the peer has a cluster secret and this node has none")
	}
	if err := proofs(conn, dialer, secret, binding, nonce, peer[len(helloMagic)+2:]); err != nil {
		return err
	}
	if version == helloVersion1 {
		return nil
	}
	return sameCluster(conn, cluster)
}

// sameCluster exchanges cluster ids (version 2) and refuses a peer whose id
// is not this node's, when both know one.
func sameCluster(conn io.ReadWriter, cluster []byte) error {
	var own, got [clusterIDLen]byte
	copy(own[:], cluster)
	if _, err := conn.Write(own[:]); err != nil {
		return fmt.Errorf("send cluster id: %w", err)
	}
	if _, err := io.ReadFull(conn, got[:]); err != nil {
		return fmt.Errorf("read cluster id: %w", err)
	}
	var none [clusterIDLen]byte
	if own != none && got != none && own != got {
		return fmt.Errorf("%w: it is in cluster %x, this node in cluster %x", errForeignCluster, got, own)
	}
	return nil
}

// proofs exchanges the secret proofs of a hello (none without a secret).
func proofs(conn io.ReadWriter, dialer bool, secret, binding, nonce, peerNonce []byte) error {
	if secret == nil {
		return nil
	}
	ownLabel, peerLabel := acceptorLabel, dialerLabel
	if dialer {
		ownLabel, peerLabel = dialerLabel, acceptorLabel
	}
	mine := proof(secret, ownLabel, nonce, peerNonce, binding)
	want := proof(secret, peerLabel, peerNonce, nonce, binding)
	var got [proofLen]byte
	if dialer {
		if _, err := conn.Write(mine); err != nil {
			return fmt.Errorf("send proof: %w", err)
		}
		if _, err := io.ReadFull(conn, got[:]); err != nil {
			return fmt.Errorf("the peer did not accept this node's proof (different cluster secret?): %w", err)
		}
		if !hmac.Equal(got[:], want) {
			return errors.New("the peer's proof is wrong: it has another cluster secret")
		}
		return nil
	}
	if _, err := io.ReadFull(conn, got[:]); err != nil {
		return fmt.Errorf("read proof: %w", err)
	}
	if !hmac.Equal(got[:], want) {
		return errors.New("the peer's proof is wrong: it has another cluster secret")
	}
	if _, err := conn.Write(mine); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	return nil
}

// proof is HMAC-SHA256(secret, label ‖ first ‖ second ‖ binding).
func proof(secret []byte, label string, first, second, binding []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(first)
	m.Write(second)
	m.Write(binding)
	return m.Sum(nil)
}
