// Package logstore keeps the Raft log and raft's stable state (current term,
// last vote) in a Pebble instance of its own, in its own directory, separate
// from the engine's. Store implements hashicorp/raft's LogStore,
// MonotonicLogStore and StableStore. The node wraps it in hraft.NewLogCache
// for the log, so recent entries are served from memory, and passes the
// Store itself as the StableStore (LogCache does not forward it).
//
// # Durability
//
// The Raft log is the broker's write-ahead log. StoreLogs writes all its
// entries in one Pebble batch committed with pebble.Sync, so each append
// batch is durable before it returns. DeleteRange, Set and SetUint64 sync
// too. Pebble's own WAL stays on: it is what a synced batch is written to.
// Options.NoSync turns the syncs off and is unsafe.
//
// # Keyspace
//
// One byte of family prefix, then fixed-width big-endian integers, so byte
// order is numeric order. Part of the on-disk format — never change; retired
// families stay reserved.
//
//	family  key                          value
//	0x01    0x01 | index u64 BE (9 B)    log entry, format below
//	0x02    0x02 | raft key bytes        Set: raw bytes; SetUint64: u64 BE (8 B)
//	0x03    0x03 | group u32 BE | a 0x01 or 0x02 key above
//	                                     that key's value, in Raft group `group`
//
// Families 0x01 and 0x02 are Raft group 1's, the only group a node ran
// before there were several, so a store written then reads as group 1's.
// Every other group (Store.Group) has the same two families behind its
// 0x03 prefix, and its own bounds, writes and reconcile after a reopen. The
// groups share the Pebble instance, its WAL and so the fsyncs of appends
// that commit together.
//
// # Log entry value, version 1
//
// All integers are big-endian. n = data length, m = extensions length.
//
//	 0       1       2               10              18
//	+-------+-------+---------------+---------------+
//	|version| type  | index u64     | term u64      |
//	+-------+-------+---------------+---------------+
//	18              26      30      34      38
//	+---------------+-------+-------+-------+
//	| appended sec  | nanos | n u32 | m u32 |
//	|  i64 (Unix)   |  u32  |       |       |
//	+---------------+-------+-------+-------+
//	38        38+n        38+n+m    42+n+m
//	+---------+-----------+---------+
//	| data    | extensions| crc u32 |
//	| n bytes | m bytes   |         |
//	+---------+-----------+---------+
//
// The fields:
//
//   - version is 1. A new layout gets a new version byte and a decoder for
//     it; the old decoder stays, so a log written before an upgrade still
//     reads. Unknown versions are corrupt.
//   - type is hraft.LogType, index and term are hraft.Log's.
//   - appended sec and nanos are AppendedAt as Unix seconds and nanoseconds
//     (0 ≤ nanos < 1e9). AppendedAt reads back as the same instant in UTC;
//     the zero time reads back as the zero time.
//   - crc is CRC-32C (Castagnoli) over every byte before it: bytes
//     [0, 38+n+m).
//
// A value must be exactly 42+n+m bytes, carry a good checksum, a known
// version and the index of the key it sits under; anything else is an error
// wrapping ErrCorrupt, never a panic. Stable values carry no checksum of
// their own (Pebble checksums its blocks), as in raft-boltdb and raft-wal.
//
// DESIGN.md beside this file explains the raft-contract choices: the
// "not found" stable errors, IsMonotonic, the cached bounds, concurrency, and
// how Pebble reclaims the prefixes raft deletes.
package logstore
