// Package fault is what the broker's two Pebble stores (the engine and the
// Raft log) share to survive I/O errors: a monitored file system, a Pebble
// logger whose Fatalf does not kill the process on a failed commit, a
// commit wrapper, a probe that tells whether a directory takes writes, and
// a back-off.
//
// The contract, and the reasons for it, are in ARCHITECTURE.md under
// "Storage faults". In short: a failed commit ends one Pebble instance, not
// the process. The store marks itself faulted, refuses writes wrapping
// ErrFaulted, and reopens the instance once Probe passes, which replays the
// WAL exactly as a restart would. Pebble's fatal errors outside a commit
// (a MANIFEST write failing in a background flush, with Pebble's locks
// held) cannot be unwound in process: the store calls its OnFatal, whose
// default, Exit, ends the process with a clear message.
//
// Monitor.Configure stacks, from the top: the monitor (counts errors,
// throttles the file creations of a failing flush or compaction, retries
// the writes Pebble cannot survive failing, notes a failed WAL fsync),
// vfs.OnDiskFull (pauses and retries a write once on ENOSPC), and the given
// file system.
// The monitor adds no allocation per read or write: a file is wrapped once,
// when it is opened.
package fault
