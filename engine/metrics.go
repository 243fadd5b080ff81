package engine

import (
	"fmt"

	"github.com/queenmq/queen/engine/keyspace"
)

// StoreStats are the figures Pebble keeps about the engine's store, as
// Pebble reports them (its Metrics and disk-usage estimates): nothing here
// is derived or guessed. The HTTP edge shows them where Queen shows
// PostgreSQL's statistics (docs/api.md §11, postgres-stats).
type StoreStats struct {
	// BlockCacheBytes is the configured block cache (Options.BlockCacheBytes);
	// BlockCacheInUse the bytes it holds. Hits and misses count block
	// lookups since the store opened; a miss reads the block from disk.
	BlockCacheBytes, BlockCacheInUse int64
	BlockCacheHits, BlockCacheMisses int64
	// CompactionDebt is Pebble's estimate of the bytes to compact before
	// the LSM is stable; CompactionsRunning the compactions in progress.
	CompactionDebt     uint64
	CompactionsRunning int64
	// Tombstones is the approximate count of deletion tombstones (point and
	// range) not yet compacted away.
	Tombstones uint64
	// MemTableBytes is the memory the memtables hold, MemTables their count.
	MemTableBytes uint64
	MemTables     int64
	// WALBytes is the live data in the WAL files, WALPhysicalBytes their
	// size on disk (larger: files are preallocated and recycled).
	WALBytes, WALPhysicalBytes uint64
	// DiskBytes is the store's whole footprint on disk: tables, blob files,
	// WAL, manifest, obsolete files not yet deleted.
	DiskBytes uint64
	// BlobBytes is the size of the live blob files (message bodies live
	// there, ARCHITECTURE.md "Key decisions").
	BlobBytes uint64
	// Levels are L0..L6 of the LSM.
	Levels []LevelStats
	// Keyspaces are the estimated on-disk bytes of each key family group,
	// in a fixed order.
	Keyspaces []KeyspaceStats
}

// LevelStats is one LSM level.
type LevelStats struct {
	Level  int
	Tables int64 // sstables in the level
	Bytes  int64 // their size (without the blob values they reference)
	Score  float64
}

// KeyspaceStats is the on-disk size of a group of key families, as
// Pebble estimates it from the sstables overlapping their key range (the
// memtables and the WAL are not counted).
type KeyspaceStats struct {
	Name  string
	Bytes uint64
}

// keyspaceGroups name the key families by what they hold. Each group is a
// range of family bytes [from, to); "other" is every family after the
// transaction index, whatever later families (streams, traces) hold.
var keyspaceGroups = [...]struct {
	name     string
	from, to keyspace.Family
}{
	{"metadata", keyspace.FamilyMeta, keyspace.FamilySegment}, // meta, queues, partitions
	{"messages", keyspace.FamilySegment, keyspace.FamilyTxn},  // segments
	{"transaction_index", keyspace.FamilyTxn, keyspace.FamilyCursor},
	{"cursors", keyspace.FamilyCursor, keyspace.FamilyDLQ}, // cursors, subscriptions
	{"dead_letters", keyspace.FamilyDLQ, keyspace.FamilyTxnExpiry},
	{"transaction_expiry", keyspace.FamilyTxnExpiry, keyspace.FamilyTxnExpiry + 1},
	{"other", keyspace.FamilyTxnExpiry + 1, 0xff},
}

// StoreStats reads the store's figures. It takes the read lock, so it
// waits for a batch being applied.
func (e *Engine) StoreStats() (StoreStats, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return StoreStats{}, err
	}
	if e.db == nil {
		return StoreStats{}, e.Fault()
	}
	m := e.db.Metrics()
	st := StoreStats{
		BlockCacheBytes:    e.opts.BlockCacheBytes,
		BlockCacheInUse:    m.BlockCache.Size,
		BlockCacheHits:     m.BlockCache.Hits,
		BlockCacheMisses:   m.BlockCache.Misses,
		CompactionDebt:     m.Compact.EstimatedDebt,
		CompactionsRunning: m.Compact.NumInProgress,
		Tombstones:         m.Keys.TombstoneCount,
		MemTableBytes:      m.MemTable.Size,
		MemTables:          m.MemTable.Count,
		WALBytes:           m.WAL.Size,
		WALPhysicalBytes:   m.WAL.PhysicalSize,
		DiskBytes:          m.DiskSpaceUsage(),
		BlobBytes:          m.BlobFiles.LiveSize,
	}
	for i := range m.Levels {
		l := &m.Levels[i]
		st.Levels = append(st.Levels, LevelStats{Level: i, Tables: l.TablesCount, Bytes: l.TablesSize, Score: l.Score})
	}
	for _, g := range keyspaceGroups {
		n, err := e.db.EstimateDiskUsage([]byte{byte(g.from)}, []byte{byte(g.to)})
		if err != nil {
			return StoreStats{}, fmt.Errorf("engine: estimate disk usage of %s: %w", g.name, err)
		}
		st.Keyspaces = append(st.Keyspaces, KeyspaceStats{Name: g.name, Bytes: n})
	}
	return st, nil
}
