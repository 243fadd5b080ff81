package server

import (
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
)

// postgresStats answers GET /api/v1/analytics/postgres-stats with this
// node's Pebble figures under Queen's keys (docs/api.md §11): what has a
// true counterpart is filled, the rest is empty; no PostgreSQL figure is
// imitated. Each node answers for its own store.
func (s *Server) postgresStats(ctx *fasthttp.RequestCtx, _ *params) {
	var (
		st  engine.StoreStats
		has bool
	)
	if s.an.store != nil {
		var err error
		if st, err = s.an.store(); err != nil {
			s.writeError(ctx, err)
			return
		}
		has = true
	}
	ratio := func(hits, misses int64) float64 {
		if hits+misses == 0 {
			return 0
		}
		return round2(float64(hits) * 100 / float64(hits+misses))
	}
	w := startBody(ctx)
	w.object("")
	w.timeMillis("timestamp", s.an.now().UnixMicro())
	w.str("database", "pebble")
	w.str("engine", "pebble")
	w.str("node", s.nodeID())
	w.object("databaseCache")
	if has {
		w.str("database", "pebble")
		w.int("diskReads", st.BlockCacheMisses)
		w.int("cacheHits", st.BlockCacheHits)
		w.float("cacheHitRatio", ratio(st.BlockCacheHits, st.BlockCacheMisses))
	}
	w.endObject()
	w.array("tableCache")
	w.endArray()
	w.array("indexCache")
	w.endArray()
	w.object("cacheSummary")
	if has { // one block cache holds data, index and filter blocks alike
		w.object("tables")
		w.int("diskReads", st.BlockCacheMisses)
		w.int("cacheHits", st.BlockCacheHits)
		w.float("hitRatio", ratio(st.BlockCacheHits, st.BlockCacheMisses))
		w.endObject()
		w.object("indexes")
		w.endObject()
	}
	w.endObject()
	w.array("deadTuples")
	if has {
		w.object("")
		w.str("schema", "pebble")
		w.str("table", "store")
		w.int("tombstones", int64(st.Tombstones))
		w.endObject()
	}
	w.endArray()
	w.array("hotUpdates")
	w.endArray()
	w.array("activeQueries")
	w.endArray()
	w.array("autovacuumStatus")
	if has {
		w.object("")
		w.str("table", "store")
		w.int("compactionDebtBytes", int64(st.CompactionDebt))
		w.int("compactionsRunning", st.CompactionsRunning)
		w.endObject()
	}
	w.endArray()
	w.object("bufferConfig")
	if has {
		w.int("sharedBuffers", st.BlockCacheBytes)
		w.str("sharedBuffersSize", prettySize(st.BlockCacheBytes))
		w.int("blockCacheInUseBytes", st.BlockCacheInUse)
	}
	w.endObject()
	w.array("bufferUsage")
	w.endArray()
	w.array("tableSizes")
	for _, k := range storeTables(&st, has) {
		w.object("")
		w.str("table", k.Name)
		w.str("totalSize", prettySize(int64(k.Bytes)))
		w.int("totalSizeBytes", int64(k.Bytes))
		w.str("tableSize", prettySize(int64(k.Bytes)))
		w.int("tableSizeBytes", int64(k.Bytes))
		w.str("indexSize", prettySize(0))
		w.int("indexSizeBytes", 0)
		w.endObject()
	}
	w.endArray()
	if has {
		w.object("store")
		w.int("diskBytes", int64(st.DiskBytes))
		w.int("blobBytes", int64(st.BlobBytes))
		w.int("walBytes", int64(st.WALBytes))
		w.int("walPhysicalBytes", int64(st.WALPhysicalBytes))
		w.int("memtableBytes", int64(st.MemTableBytes))
		w.int("memtables", st.MemTables)
		w.int("compactionDebtBytes", int64(st.CompactionDebt))
		w.int("tombstones", int64(st.Tombstones))
		w.array("levels")
		for _, l := range st.Levels {
			w.object("")
			w.int("level", int64(l.Level))
			w.int("tables", l.Tables)
			w.int("bytes", l.Bytes)
			w.float("score", round2(l.Score))
			w.endObject()
		}
		w.endArray()
		w.endObject()
	}
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// storeTables are postgres-stats' tableSizes: the key family groups'
// bytes in sstables, then the two places Pebble keeps data outside them
// that no key range estimate sees: "blob_files", the values of 1 KiB and
// more (message segments, mostly) that flushes and compactions write apart
// from their keys, and "unflushed", the writes still in the memtables (the
// live bytes of the WAL). Their sum is the store's data, so a young store
// whose writes are all in memory does not read as empty.
func storeTables(st *engine.StoreStats, has bool) []engine.KeyspaceStats {
	if !has {
		return nil
	}
	return append(slices.Clone(st.Keyspaces),
		engine.KeyspaceStats{Name: "blob_files", Bytes: st.BlobBytes},
		engine.KeyspaceStats{Name: "unflushed", Bytes: st.WALBytes})
}

// prettySize writes a size as PostgreSQL's pg_size_pretty does: bytes
// below 10 kB, then the largest unit that leaves at least 10, rounded.
func prettySize(n int64) string {
	units := []string{"bytes", "kB", "MB", "GB", "TB", "PB"}
	u := 0
	for ; u < len(units)-1 && n >= 10*1024; u++ {
		n = (n + 512) / 1024 // half rounds up, as pg_size_pretty does
	}
	return strconv.FormatInt(n, 10) + " " + units[u]
}
