// Package diskspace keeps a node's data directories clear of a full disk. A
// Guard reads the free space of the filesystems that hold them (statfs(2),
// each distinct filesystem once, however many directories it holds) and
// tells the HTTP edge whether a write that adds data may go ahead; it knows
// nothing of HTTP or Raft and imports no package of the project.
//
// # Use
//
//	g, err := diskspace.New(diskspace.Options{Dirs: dirs, MinFreeBytes: 512 << 20})
//	// on the write path of a request that adds n bytes:
//	release, err := g.Admit(n) // errors.Is(err, diskspace.ErrBelowReserve): answer 507
//	defer release()
//	// for /health and the metrics:
//	st := g.Status()
//
// # The reserve
//
// A filesystem is below its reserve when its free bytes, less the bytes of
// the writes admitted and not yet finished, are fewer than
// Options.MinFreeBytes. Writes that add data are then refused, and
// everything else (pops, acks, deletes, retention) goes on writing inside
// the reserve, because that is how space comes back. A filesystem once
// found below the reserve stays refused until it has the reserve plus
// Options.ResumeBytes free (1/16 of the reserve by default): the node's own
// flushes and truncations move free space by tens of MiB, and without the
// margin a disk at the reserve would take every other write while /health
// said OK between the refusals. The reserve must
// hold what the node writes while it refuses data, which is not little:
// Pebble's bookkeeping, not the messages, is what needs room (see
// DefaultMinFreeBytes).
//
// # Freshness
//
// A reading is taken by New and then whenever Admit, Check or Status finds
// the last one older than Options.MaxAge; the callers that find it stale
// while another is reading use the old one rather than wait. Writes
// admitted since a reading are counted against it (Admit's n, until
// release), so a burst of large requests cannot all pass on one reading
// taken before any of them was written.
package diskspace
