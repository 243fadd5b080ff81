package raft

import (
	"fmt"
	"sync"

	hraft "github.com/hashicorp/raft"
)

// logCache keeps the newest Raft log entries in memory, bounded by their
// bytes, so the leader replicates and every node applies recent entries
// without reading them back from the log store.
//
// hashicorp/raft's LogCache bounds entries by count. Under group commit an
// entry holds up to MaxBatchCommands requests, so 512 entries were 100 MB
// of live heap in a loaded three-node run (and could be gigabytes with
// larger payloads): every GC cycle marked it, and the mark phases were the
// spikes in push latency. The entries it serves are the newest ones (a
// follower at the tip, the FSM a few entries behind the log), which a few
// MiB cover; a follower that fell further behind reads from the store.
//
// Entries are kept in index order in a ring. A DeleteRange drops the
// entries it covers (log compaction after a snapshot covers older ones,
// which keeps the run; a follower's conflicting suffix drops the tail), and
// an append that does not continue the cached run empties it.
type logCache struct {
	store    hraft.LogStore
	maxBytes int

	mu    sync.RWMutex
	ring  []*hraft.Log // ring[(head+i)%len(ring)] has index first+i
	head  int
	n     int
	first uint64
	bytes int
}

// logCacheEntries caps the entries kept whatever their size.
const logCacheEntries = 512

func newLogCache(store hraft.LogStore, maxBytes int) *logCache {
	return &logCache{store: store, maxBytes: maxBytes, ring: make([]*hraft.Log, logCacheEntries)}
}

// IsMonotonic implements hraft.MonotonicLogStore when the store does.
func (c *logCache) IsMonotonic() bool {
	m, ok := c.store.(hraft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (c *logCache) GetLog(idx uint64, log *hraft.Log) error {
	c.mu.RLock()
	if c.n > 0 && idx >= c.first && idx < c.first+uint64(c.n) {
		*log = *c.ring[(c.head+int(idx-c.first))%len(c.ring)]
		c.mu.RUnlock()
		return nil
	}
	c.mu.RUnlock()
	return c.store.GetLog(idx, log)
}

func (c *logCache) StoreLog(log *hraft.Log) error { return c.StoreLogs([]*hraft.Log{log}) }

// StoreLogs writes logs to the store and, once they are durable there,
// keeps them. The error keeps the text hashicorp/raft's cache gave it
// (Node.mapError reads it) and now wraps the store's error too.
func (c *logCache) StoreLogs(logs []*hraft.Log) error {
	if err := c.store.StoreLogs(logs); err != nil {
		return fmt.Errorf("unable to store logs within log store, err: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range logs {
		if c.n > 0 && l.Index != c.first+uint64(c.n) {
			c.reset()
		}
		if c.n == 0 {
			c.first = l.Index
		}
		if c.n == len(c.ring) {
			c.dropOldest()
		}
		c.ring[(c.head+c.n)%len(c.ring)] = l
		c.n++
		c.bytes += len(l.Data) + len(l.Extensions)
		for c.bytes > c.maxBytes && c.n > 1 {
			c.dropOldest()
		}
	}
	return nil
}

func (c *logCache) dropOldest() {
	l := c.ring[c.head]
	c.bytes -= len(l.Data) + len(l.Extensions)
	c.ring[c.head] = nil
	c.head = (c.head + 1) % len(c.ring)
	c.n--
	c.first++
}

func (c *logCache) reset() {
	clear(c.ring)
	c.head, c.n, c.first, c.bytes = 0, 0, 0, 0
}

func (c *logCache) FirstIndex() (uint64, error) { return c.store.FirstIndex() }
func (c *logCache) LastIndex() (uint64, error)  { return c.store.LastIndex() }

// DeleteRange drops [min, max] from the cache and the store. The usual
// call, compaction after a snapshot, deletes entries older than the cached
// run and keeps the run; a follower's conflicting suffix drops the tail.
func (c *logCache) DeleteRange(min, max uint64) error {
	c.mu.Lock()
	last := c.first + uint64(c.n) - 1
	switch {
	case c.n == 0 || max < c.first || min > last:
	case min <= c.first && max >= last:
		c.reset()
	case min <= c.first:
		for c.n > 0 && c.first <= max {
			c.dropOldest()
		}
	case max >= last:
		for c.n > 0 && c.first+uint64(c.n)-1 >= min {
			c.dropNewest()
		}
	default:
		c.reset() // a hole in the middle: raft never asks for one
	}
	c.mu.Unlock()
	return c.store.DeleteRange(min, max)
}

func (c *logCache) dropNewest() {
	i := (c.head + c.n - 1) % len(c.ring)
	l := c.ring[i]
	c.bytes -= len(l.Data) + len(l.Extensions)
	c.ring[i] = nil
	c.n--
	if c.n == 0 {
		c.reset()
	}
}
