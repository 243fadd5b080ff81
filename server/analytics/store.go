package analytics

import (
	"slices"
	"strconv"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// PostgresStats writes the answer to GET /api/v1/analytics/postgres-stats with this
// node's Pebble figures under Queen's keys (docs/api.md §11): what has a
// true counterpart is filled, the rest is empty; no PostgreSQL figure is
// imitated. Each node answers for its own store.
func (a *Analytics) PostgresStats(w *wire.Writer) error {
	var (
		st  engine.StoreStats
		has bool
	)
	if a.store != nil {
		var err error
		if st, err = a.store(); err != nil {
			return err
		}
		has = true
	}
	ratio := func(hits, misses int64) float64 {
		if hits+misses == 0 {
			return 0
		}
		return round2(float64(hits) * 100 / float64(hits+misses))
	}
	w.Object("")
	w.TimeMillis("timestamp", a.now().UnixMicro())
	w.Str("database", "pebble")
	w.Str("engine", "pebble")
	w.Str("node", a.broker.Status().ID)
	w.Object("databaseCache")
	if has {
		w.Str("database", "pebble")
		w.Int("diskReads", st.BlockCacheMisses)
		w.Int("cacheHits", st.BlockCacheHits)
		w.Float("cacheHitRatio", ratio(st.BlockCacheHits, st.BlockCacheMisses))
	}
	w.EndObject()
	w.Array("tableCache")
	w.EndArray()
	w.Array("indexCache")
	w.EndArray()
	w.Object("cacheSummary")
	if has { // one block cache holds data, index and filter blocks alike
		w.Object("tables")
		w.Int("diskReads", st.BlockCacheMisses)
		w.Int("cacheHits", st.BlockCacheHits)
		w.Float("hitRatio", ratio(st.BlockCacheHits, st.BlockCacheMisses))
		w.EndObject()
		w.Object("indexes")
		w.EndObject()
	}
	w.EndObject()
	w.Array("deadTuples")
	if has {
		w.Object("")
		w.Str("schema", "pebble")
		w.Str("table", "store")
		w.Int("tombstones", int64(st.Tombstones))
		w.EndObject()
	}
	w.EndArray()
	w.Array("hotUpdates")
	w.EndArray()
	w.Array("activeQueries")
	w.EndArray()
	w.Array("autovacuumStatus")
	if has {
		w.Object("")
		w.Str("table", "store")
		w.Int("compactionDebtBytes", int64(st.CompactionDebt))
		w.Int("compactionsRunning", st.CompactionsRunning)
		w.EndObject()
	}
	w.EndArray()
	w.Object("bufferConfig")
	if has {
		w.Int("sharedBuffers", st.BlockCacheBytes)
		w.Str("sharedBuffersSize", prettySize(st.BlockCacheBytes))
		w.Int("blockCacheInUseBytes", st.BlockCacheInUse)
	}
	w.EndObject()
	w.Array("bufferUsage")
	w.EndArray()
	w.Array("tableSizes")
	for _, k := range storeTables(&st, has) {
		w.Object("")
		w.Str("table", k.Name)
		w.Str("totalSize", prettySize(int64(k.Bytes)))
		w.Int("totalSizeBytes", int64(k.Bytes))
		w.Str("tableSize", prettySize(int64(k.Bytes)))
		w.Int("tableSizeBytes", int64(k.Bytes))
		w.Str("indexSize", prettySize(0))
		w.Int("indexSizeBytes", 0)
		w.EndObject()
	}
	w.EndArray()
	if has {
		w.Object("store")
		w.Int("diskBytes", int64(st.DiskBytes))
		w.Int("blobBytes", int64(st.BlobBytes))
		w.Int("walBytes", int64(st.WALBytes))
		w.Int("walPhysicalBytes", int64(st.WALPhysicalBytes))
		w.Int("memtableBytes", int64(st.MemTableBytes))
		w.Int("memtables", st.MemTables)
		w.Int("compactionDebtBytes", int64(st.CompactionDebt))
		w.Int("tombstones", int64(st.Tombstones))
		w.Array("levels")
		for _, l := range st.Levels {
			w.Object("")
			w.Int("level", int64(l.Level))
			w.Int("tables", l.Tables)
			w.Int("bytes", l.Bytes)
			w.Float("score", round2(l.Score))
			w.EndObject()
		}
		w.EndArray()
		w.EndObject()
	}
	w.EndObject()
	return nil
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
