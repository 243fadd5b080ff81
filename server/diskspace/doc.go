// Package diskspace keeps a node's data directories clear of a full disk. A
// Guard reads the free space of the filesystems that hold them (statfs(2),
// each distinct filesystem once, however many directories it holds) and
// tells the HTTP edge whether a write that adds data may go ahead; Reports
// keeps what the other nodes of a cluster last said of their own guards. It
// knows nothing of HTTP or Raft and imports no package of the project.
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
//
// # At the edge
//
// Each route of the server's table also says whether it adds data (its
// storage.go). While a filesystem of this node, or of a node that reports to
// it as leader, has less free space than Options.Storage's
// reserve, those routes (push, configure, transaction, the replays) answer
// 507 insufficient_storage with Retry-After: 5 and a message naming the
// node, the directories and the numbers; nothing is proposed. Pops, acks,
// lease extensions, seeks and every delete go on inside the reserve, since
// they are how space comes back, and so do the leader's retention sweeps.
// A request's body counts against free space while it is written, so a
// burst cannot pass on one reading. /health's "storage" says why, and
// /metrics/prometheus has queen_storage_free_bytes{dir},
// queen_storage_reserve_bytes, queen_storage_below_reserve,
// queen_storage_nodes_below_reserve and queen_insufficient_storage_total.
// A View is what those say: NewView reads the guard and the reports once,
// and WriteJSON writes /health's "storage" through a small JSONWriter
// interface (server/wire's Writer), so this package renders its own state
// without importing the edge.
//
// # Reports from other nodes
//
// A Guard knows only this node's disks. The leader proposes, so its edge
// decides for the cluster; but every follower appends the same log, and a
// follower whose disk fills would stop appending and, with another one down,
// stall every commit. So each follower reports its guard's verdict to the
// leader every half second (package server's storageReportInterval; POST
// /internal/v1/cluster/storage, to the leader address it already relays to;
// with queues spread over groups, to the leader of each group it holds a
// replica of), and the leader refuses data while any report younger than
// ReportTTL says a node is below its reserve. A node that stops reporting (down, cut off,
// removed) stops counting when its last report expires: a node that cannot
// append anything holds up no commit once it is gone, and Raft's quorum
// covers it as it covers any crash. A follower's own edge checks its own
// guard too, which also covers its spool.
//
// Reports go over HTTP, node to node, like relays, because the leader knows
// its followers only by their Raft addresses. They carry the cluster secret,
// the node credential: the route is a cluster route like join and leave, so a
// cluster without a secret does not hear its followers' disks (each follower
// says so in its log), and a forged report cannot turn a cluster's writes
// off.
package diskspace
