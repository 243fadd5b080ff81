// Package engine is the broker's deterministic state machine on Pebble:
// queues, partitions and their messages, consumer-group cursors and leases,
// the dead-letter queue, retention. It knows nothing of Raft or HTTP.
//
// # Commands
//
// Every mutation is a Command (command.go): a value such as PushCmd or
// PopCmd carrying everything it needs, whose Apply runs it in a Batch with
// the leader's Stamp and returns a Result: the answer (Result.Value, of one
// type per command, documented on its Apply), the command's own refusal
// (Result.Err), the queues whose parked pops it may have made deliverable,
// and what is read only after the commit. Applying reads only the command,
// the stamp and the store: no clock, no random source, no map order (ids
// are minted from the stamp's seed; wildcard pops shuffle with a PCG seeded
// by it). Two engines that apply the same commands with the same stamps
// hold the same bytes (Digest).
//
// Two optional steps run before a command is stamped, in the proposer's
// goroutine: a Preparer (PushCmd) does the work that needs no state,
// minting message ids and compressing frames, and proposes the result (a
// *PreparedPush) in its place; a Skipper (PopCmd) answers at once what the
// applied state shows would change nothing.
//
// # The Batch contract
//
// Begin takes the engine's write lock and returns a Batch; Apply runs
// commands in it, each seeing the writes of those before it; Commit writes
// them as one Pebble batch together with the Raft index they end at, so a
// restart skips what is already applied and never applies a command twice.
// A Batch must always be committed. A command that refuses writes nothing;
// a storage error anywhere fails the whole batch, faults the engine (it then
// refuses writes, and reads while its model may be ahead of its disk) until
// Recover reopens it. One Raft apply batch is one engine batch (group
// commit): the cost of a commit is shared by every command in it.
//
// After Commit, Finish completes a Result: a pop decides its leases in the
// serial apply but its messages are read (zstd segments decoded) only by
// Finish, which the node that answers the pop calls outside the apply loop.
// A replica never calls it and never reads.
//
// # State
//
// Small records (queues, partitions, cursor rows, subscriptions) live in
// memory, loaded at Open and written through on every change; segments,
// the transaction-id index and dead letters stay on disk. The key families
// and record layouts are documented in package keyspace, segments in
// package segment, the ack clamp in package cursor. Check walks the whole
// store against the model; with the invariants build tag every commit
// checks what it touched (invariants.go).
//
// # Moving a queue
//
// A queue leaves one store and arrives in another as its keys, verbatim
// (move.go): Snapshot.ExportQueue reads them in chunks, ImportQueueCmd
// writes them through the log of the group that receives the queue, and
// DropQueueCmd removes every key of it from the group it left.
//
// # Snapshots
//
// Snapshot streams the whole keyspace for a follower that is too far
// behind; Restore replaces the store with one. Package raft files only
// references to the synced engine as its own snapshots (see its doc), so a
// stream is made only when a follower needs one.
package engine
