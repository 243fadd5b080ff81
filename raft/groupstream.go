package raft

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// Several Raft groups over one listener (ARCHITECTURE.md, "Scale-out"):
// every group of a node reaches its peers through the node's one stream
// layer, so TLS and the cluster secret cover every group with nothing more
// to configure. Group 1 is the stream layer itself and its connections are
// byte for byte what they were before there were groups. A connection of
// any other group g, once set up (TLS and the hello, or nothing), starts
// with a group frame from the dialer, answered by one byte:
//
//	dialer   → acceptor: "QGRP" | g u32 BE     (8 B)
//	acceptor → dialer:   0x01                  (1 B; the acceptor hosts g)
//
// An acceptor that does not host g closes the connection, and the dialer's
// Dial fails with ErrHandshake. Raft's own stream starts with an RPC type
// byte (0 to 4), never 'Q', so an acceptor tells the two apart by the first
// byte (and a status probe, "QSTA", from both: identity.go). Part of the
// wire format — never change.
const (
	groupMagic    = "QGRP"
	groupFrameLen = len(groupMagic) + 4
	groupAck      = 0x01
)

// holdGroupOne refuses group 1's connections until Group(1) is called: a
// Store opens group 1 only where the node holds a replica of it.
func (s *streamLayer) holdGroupOne() { s.heldOne.Store(true) }

// Group returns group id's stream layer over s: its Accept returns the
// connections peers dialed for id, its Dial names id to the peer. Group 1
// is s. Closing a group's layer closes only its own Accept.
func (s *streamLayer) Group(id uint32) (hraft.StreamLayer, error) {
	if id == 1 {
		s.heldOne.Store(false)
		return s, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil, net.ErrClosed
	}
	if s.groups == nil {
		s.groups = map[uint32]*groupLayer{}
	}
	if g := s.groups[id]; g != nil && !g.isClosed() {
		return g, nil
	}
	g := &groupLayer{s: s, id: id, conns: make(chan net.Conn), closed: make(chan struct{})}
	s.groups[id] = g
	return g, nil
}

// route reads which group an accepted, set-up connection is for and
// returns the channel its Accept takes it from, with the connection to
// hand over (the first byte put back for group 1).
func (s *streamLayer) route(conn net.Conn) (chan net.Conn, <-chan struct{}, net.Conn, error) {
	if err := conn.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return nil, nil, nil, err
	}
	r := bufio.NewReaderSize(conn, 16)
	first, err := r.Peek(1)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the first byte: %w", err)
	}
	if first[0] != groupMagic[0] {
		if s.heldOne.Load() {
			return nil, nil, nil, fmt.Errorf("%w: group 1", errNotOpen)
		}
		if err := conn.SetDeadline(time.Time{}); err != nil {
			return nil, nil, nil, err
		}
		return s.conns, s.closed, &peekedConn{Conn: conn, r: r}, nil
	}
	var frame [groupFrameLen]byte
	if _, err := io.ReadFull(r, frame[:len(statusMagic)]); err != nil {
		return nil, nil, nil, fmt.Errorf("read the group frame: %w", err)
	}
	if string(frame[:len(statusMagic)]) == statusMagic {
		if err := s.answerStatus(conn); err != nil {
			return nil, nil, nil, fmt.Errorf("answer a status probe: %w", err)
		}
		return nil, nil, nil, errAnswered
	}
	if _, err := io.ReadFull(r, frame[len(statusMagic):]); err != nil {
		return nil, nil, nil, fmt.Errorf("read the group frame: %w", err)
	}
	if string(frame[:len(groupMagic)]) != groupMagic {
		return nil, nil, nil, errors.New("not a group frame")
	}
	id := binary.BigEndian.Uint32(frame[len(groupMagic):])
	s.mu.Lock()
	g := s.groups[id]
	s.mu.Unlock()
	if g == nil || g.isClosed() {
		return nil, nil, nil, fmt.Errorf("%w: group %d", errNotOpen, id)
	}
	if _, err := conn.Write([]byte{groupAck}); err != nil {
		return nil, nil, nil, fmt.Errorf("acknowledge group %d: %w", id, err)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, nil, nil, err
	}
	return g.conns, g.closed, &peekedConn{Conn: conn, r: r}, nil
}

// errNotOpen refuses a connection for a group not open here: a node
// opens only the groups it holds a replica of (package cluster), and a
// peer may dial one a moment before it opens (a start, a replica step)
// or after it closed. The dialer retries; the refusal is logged at debug
// level, as it is no fault.
var errNotOpen = errors.New("the peer dialed a group this node does not hold open")

// errAnswered is route's word for a connection it has served itself (a
// status probe): closed, and nothing to report.
var errAnswered = errors.New("answered")

// peekedConn is a connection whose first bytes went through r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// groupLayer is one group's view of a stream layer (streamLayer.Group).
type groupLayer struct {
	s      *streamLayer
	id     uint32
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

var _ hraft.StreamLayer = (*groupLayer)(nil)

// Accept returns the next connection a peer dialed for the group.
func (g *groupLayer) Accept() (net.Conn, error) {
	select {
	case c := <-g.conns:
		return c, nil
	case <-g.closed:
		return nil, net.ErrClosed
	case <-g.s.closed:
		return nil, net.ErrClosed
	}
}

// Dial connects to a peer's stream layer, sets the connection up as group
// 1's are, and names the group; a peer that does not host it gives an
// error wrapping ErrHandshake.
func (g *groupLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := g.s.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if err := nameGroup(conn, g.id); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrHandshake, address, err)
	}
	return conn, nil
}

func nameGroup(conn net.Conn, id uint32) error {
	if err := conn.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return err
	}
	frame := binary.BigEndian.AppendUint32([]byte(groupMagic), id)
	if _, err := conn.Write(frame); err != nil {
		return fmt.Errorf("send the group frame: %w", err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil || ack[0] != groupAck {
		return fmt.Errorf("the peer does not host group %d", id)
	}
	return conn.SetDeadline(time.Time{})
}

// Close ends the group's Accept; the shared listener stays open. The
// group stays known, so that while a node shuts its groups down one by one
// a peer's connection for a closed one is read as such and dropped, never
// taken for group 1's.
func (g *groupLayer) Close() error {
	g.once.Do(func() { close(g.closed) })
	return nil
}

func (g *groupLayer) isClosed() bool {
	select {
	case <-g.closed:
		return true
	default:
		return false
	}
}

// Addr is the shared listener's address.
func (g *groupLayer) Addr() net.Addr { return g.s.Addr() }
