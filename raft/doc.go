// Package raft is one replica of one Raft group: it replicates the
// engine's commands with hashicorp/raft (imported as hraft) and is the
// broker's command path. A Node proposes commands and applies the
// committed log to its engine; Local runs the same path on one engine
// without consensus. Running several groups on one node, and routing a
// command to its queue's group, is package cluster's (its Host), which
// holds each group's Node and reaches it only through what this package
// exports.
//
// # The command path
//
// A caller runs a command with Propose[T](ctx, node, cmd). The node, if it
// leads (else ErrNotLeader before anything happens, and the server forwards
// the request), skips or prepares the command (engine.Skipper,
// engine.Preparer), stamps it with the time and a UUIDv7 seed, and queues
// it. The proposer goroutine takes every queued command into one log entry
// (package command) and hands it to Raft; while MaxInFlight entries are in
// flight the queue fills and the next entry is larger (group commit, no
// timer). Once the entry is committed, the FSM (fsm.go) decodes it and
// applies every command of the whole Raft apply batch in one engine batch,
// with the applied index; then it wakes the queues the Results name. The
// await goroutine finishes each Result (a pop's messages are read there,
// in parallel with the next apply) and hands it to its caller, and Propose
// checks the answer's type.
//
// # Durability and snapshots
//
// The Raft log (package logstore, Pebble, synced appends) is the
// write-ahead log; the engine writes unsynced and records its applied
// index in each batch, so a restart skips what it has and never applies a
// command twice. A snapshot is a reference: taking one syncs the engine's
// WAL and files the index (snapstore.go), so it costs one fsync whatever
// the store holds; only when a follower needs a snapshot is the reference
// expanded into the engine's stream. A storage fault is reported and healed
// (heal.go), never skipped: the FSM re-applies from the log what a failed
// batch did not write.
//
// # The data directory
//
// A node's --data directory holds:
//
//	LOCK        flock held while a node (or queen recover) uses it; queen check takes it too
//	engine/     the engine's Pebble store
//	raft/       the Raft log and stable store (logstore, Pebble), with the store id and the founders
//	            seen empty at bootstrap in group 1's stable keys (identity.go: a lost disk never votes)
//	snapshots/  hraft's file snapshot store: references, or a stream a leader sent
//	spool/      pushes buffered during push maintenance (package server)
//	peers.json  optional: a configuration for queen recover (renamed peers.json.applied once used)
//	groups/<g>/ with --groups: the engine/ and snapshots/ of the directory (0) and of the data groups
//	            2..G this node holds a replica of (only those: package cluster opens them); group 1
//	            is the layout above, and every group's log is in raft/ (logstore's family 0x03)
//
// # Groups
//
// Every Node runs one group. A node of several groups opens them on one
// Store (store.go): the data directory's lock, one log store that holds
// every group's log (group 1 under logstore's first families, any other
// under family 0x03), one listener whose connections name their group
// (groupstream.go), and the store's identity. A Store opens no group by
// itself and refuses the connections of a group not open on it: package
// cluster opens the groups the node holds a replica of. A Node knows its own group
// only: its voters, its leader, its configuration. Which groups a node
// hosts, which voters each has and where queues live is the directory's,
// group 0 (Directory), and package cluster reads and changes it; for a
// manager that moves replicas between nodes a Node exports the reads and
// the unchecked membership steps it takes (replica.go). See
// ARCHITECTURE.md, "Scale-out".
//
// # Membership and the transport
//
// Membership (membership.go) refuses a change that would leave too few
// reachable voters for a quorum unless forced; the transport (transport.go)
// runs over mutual TLS and/or a cluster-secret handshake; Recover rewrites
// a stopped node's configuration after a quorum is lost for good. Every
// node reads the others' command versions, and none proposes a command
// above the lowest (version.go, the cluster version).
package raft
