// Package relay is the glue between nodes at the HTTP edge: what a node
// does for a request that another node must answer, and what it measures
// of the commands it has answered wherever they were proposed.
//
// It is named for its one job, relaying: a follower relays a client's
// request (or the command decoded from it) to its leader and copies the
// answer back, notes what the leader had applied when it answered (so the
// client's next read here sees its write), and asks the leader for a read
// index before a linearizable read.
// A name after the nodes ("nodes", "peers") would say who is talked to;
// this says what is done for them, and package cluster already owns the
// node-to-node command path (cluster.ProposePath) this package relays over.
//
// It is apart from package server because none of it is a route's logic:
// it is the same few steps (the leader's status, the cluster client, the
// applied index to catch up with) whichever route needs them, and it is where the
// at-most-once rules live, so they are read in one place. The package never
// imports package server: the server hands it what it needs (its broker's
// status, its options) and keeps the route handlers. The relay sends on
// package cluster's Transport, the one HTTP client, TLS dialer and request
// builder a node reaches the others with, which the cluster client's
// commands share.
//
// # Read consistency
//
// Reads through any node see every write answered before them
// (docs/api.md §1, "Read consistency"). Two mechanisms, both in Reads:
//
//   - A linearizable read (the default on every read route) first learns
//     the read index of each Raft group it reads that this node holds a
//     replica of: the leader confirms it still leads and answers the
//     index it has applied (raft.Node.ReadIndex); a follower asks it (the
//     server's read-index route, /internal/v1/read-index). The node then
//     waits until its own replica has applied that far, and answers from
//     its own state. A read of one queue waits for the directory, then for
//     the group the directory places the queue in (Reads.BarrierGroups),
//     so a group with no leader holds up only the reads of its own queues
//     and those across queues; any other read waits for every replica of
//     the node (Reads.Barrier).
//     Concurrent reads share one ask per group, and the leader shares one
//     confirmation among concurrent asks (internal/rounds), so a burst of
//     reads costs a round trip, not one each. ?consistency=stale skips all
//     of it.
//   - A write this node relayed to a leader is answered as soon as the
//     leader answers; the node notes what the leader had applied then
//     (cluster.AppliedHeader, "group:index" for each of the answering
//     node's replicas, comma-separated, written and read by package
//     cluster's AppendApplied and ParseApplied; a command sent on the
//     cluster path carries the index in its answer) as its replica's
//     floor (raft.Node.NoteWritten). A linearizable read waits for its
//     read index, which is never below the floor; a stale read waits for
//     the floor alone (Settle, by cluster.AwaitApplied, the wait the
//     Host's forward uses too), at once when this node relayed no write
//     lately. So the client's next read here sees its write whatever it
//     asks for, a stale read never goes backwards on one node, and the
//     write does not wait for this follower to learn that its entry
//     committed (the leader's next message: 50-100 ms in a group with no
//     other traffic). Only a read right after a write pays for that.
//
// # Command time
//
// TimedProposer times each command answered, in
// queen_command_duration_seconds{command}; EntryMetrics is
// raft.Options.OnEntry recording where each log entry's time went on the
// leader (queued, then committed), per Raft group.
package relay
