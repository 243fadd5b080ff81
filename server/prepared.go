package server

import (
	"errors"
)

// A follower prepares the pushes it is sent (ARCHITECTURE.md, "Forwarding"):
// it decodes, validates and seals them as the leader would, and its
// proposer (cluster.Proxy, with one group) prepares and compresses the
// command (raft.RelayEntry) and sends it to the leader on the one path
// between nodes (package cluster; clusterpath.go's proposeRelayed is the
// leader's end). The leader writes its time over the entry's and proposes
// the bytes it got; the follower writes the client's answer from the
// results it gets back, as it would from its own proposal.

// errLeaderSpools is the leader's answer to a prepared push during push
// maintenance: the follower that prepared it buffers it in its own spool,
// as it would have had its applied state shown the switch already.
var errLeaderSpools = errors.New("server: push maintenance is on; buffer the push where it was received")

// codeLeaderSpools is errLeaderSpools' code in the error table.
const codeLeaderSpools = "push_maintenance"
