// Package backup writes and reads backup files: a manifest, then the engine
// snapshot stream (engine.Snapshot.WriteTo) of each Raft group, compressed
// in checksummed chunks, then a trailer that marks the file complete. It
// knows nothing of what the streams hold: restoring one is
// engine.Engine.Restore's job. It imports no project package.
//
// # Layout
//
// Fixed-width integers are big-endian.
//
//	+--------+---------+----------------+--------------------------+---------------+
//	| "QBAK" | version | manifest frame | per group: G, D…, E      | trailer frame |
//	|  4 B   | u8 = 1  | kind 'M'       | frames, in manifest order| kind 'T'      |
//	+--------+---------+----------------+--------------------------+---------------+
//
// Every frame:
//
//	+------+--------------+----------------+--------------+
//	| kind | length u32BE | payload        | crc32c u32BE |
//	| 1 B  |     4 B      | length bytes   |     4 B      |
//	+------+--------------+----------------+--------------+
//
// The CRC-32C (Castagnoli) covers kind, length and payload: a flipped byte
// anywhere in a frame is found before its payload is used. A payload is at
// most MaxFrame bytes.
//
//	kind  payload
//	'M'   the manifest, JSON (Manifest); the first frame, exactly once
//	'G'   a group starts: group u32BE | Raft index u64BE (as in the manifest)
//	'D'   one zstd frame: the next ChunkSize bytes or fewer of the group's
//	      engine snapshot stream
//	'E'   the group ends: stream bytes u64BE | 'D' frames u64BE
//	'T'   the file is complete: groups u32BE | frames before it u64BE |
//	      stream bytes of every group u64BE; nothing may follow it
//
// A file is complete and intact only if every frame's CRC checks, the groups
// come in the manifest's order with its indexes, each 'E' and the trailer
// count what came before them, and the file ends right after the trailer. A
// truncated file has no trailer; a file cut exactly after a frame still
// lacks one. The engine stream inside carries its own CRC, checked again by
// the restore.
//
// The magic and the version are part of the on-disk format — never change.
// A reader refuses a version newer than its own with ErrNewer, naming both,
// in the header or in the manifest's "format" (which must equal the header's);
// a layout change takes a new version, and readers keep reading the old ones.
package backup
