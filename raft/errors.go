package raft

import (
	"errors"

	hraft "github.com/hashicorp/raft"
)

// Sentinel errors. The HTTP edge maps each to 503 with a stable code, so
// clients retry (a retried push is made safe by transaction-id dedup).
var (
	// ErrNoLeader is returned when the cluster has no leader (no quorum, or
	// an election in progress): the command was not applied and will not be
	// applied later.
	ErrNoLeader = errors.New("raft: no leader")
	// ErrNotLeader is returned when this node is not the leader and nothing
	// was proposed: the caller may forward the request to the leader.
	ErrNotLeader = errors.New("raft: not the leader")
	// ErrLeadershipLost is returned when leadership was lost while a command
	// was in flight: its outcome is unknown (it may still be applied).
	ErrLeadershipLost = hraft.ErrLeadershipLost
	// ErrTimeout is returned when a command was not committed in time. Its
	// outcome is unknown: it may still be applied.
	ErrTimeout = errors.New("raft: command timed out")
	// ErrShutdown is returned by a node that is shutting down.
	ErrShutdown = errors.New("raft: node is shutting down")
	// ErrForward is returned when forwarding a command to the leader failed.
	ErrForward = errors.New("raft: forward to leader failed")
	// ErrHandshake is wrapped by a Raft connection's Dial when the peer
	// failed its set-up: TLS (certificate not signed by the cluster CA, or
	// not naming the dialed host) or the cluster-secret handshake.
	ErrHandshake = errors.New("raft: connection set-up failed")
	// ErrInUse is returned by Open when another node (in this
	// process or another) holds the data directory.
	ErrInUse = errors.New("raft: data directory in use by a running node")
)
