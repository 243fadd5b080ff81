package engine

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
)

// A snapshot stream is the whole keyspace in key order:
//
//	+--------+---------+--------------------------------------------+------+-----------+
//	| "QSNP" | version | n × (klen uvarint | key | vlen uvarint | v) | 0x00 | crc32c BE |
//	|  4 B   | u8 = 1  |                                            | end  | 4 B       |
//	+--------+---------+--------------------------------------------+------+-----------+
//
// Keys are never empty, so a zero key length ends the entries. The CRC-32C
// covers every byte before it. Part of the on-disk format — never change;
// a new layout takes a new version.
const (
	snapshotMagic   = "QSNP"
	snapshotVersion = 1
	// restoringKey marks a restore in progress: a store found with it at
	// Open is half-written and is wiped (its node then restores again).
	restoringKey = "restoring"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a consistent, point-in-time view of the store, taken between
// two batches.
type Snapshot struct {
	e       *Engine
	snap    *pebble.Snapshot
	Applied uint64
	// export is the queue export in progress from this view (move.go).
	exportMu sync.Mutex
	export   *queueExport
}

// Snapshot grabs a consistent view; it does no I/O. Close it when done: a
// faulted engine does not recover while a snapshot is open.
func (e *Engine) Snapshot() (*Snapshot, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.usable(); err != nil {
		return nil, err
	}
	e.snapshots.Add(1)
	return &Snapshot{e: e, snap: e.db.NewSnapshot(), Applied: e.applied}, nil
}

// Close releases the view.
func (s *Snapshot) Close() error {
	err := s.snap.Close()
	s.e.snapshots.Add(-1)
	return err
}

// QueueCounts counts the messages each queue retains in the view (Start
// to Next of its partitions, acked or not): a cheap summary, read from the
// partition records alone.
func (s *Snapshot) QueueCounts() (map[string]int64, error) {
	counts := map[string]int64{}
	err := scanPrefix(s.snap, keyspace.FamilyPrefix(keyspace.FamilyPartition), func(_, v []byte) error {
		p, err := keyspace.DecodePartition(v)
		if err != nil {
			return fmt.Errorf("%w: partition record: %v", ErrCorrupt, err)
		}
		counts[p.Queue] += p.Next - p.Start
		return nil
	})
	return counts, err
}

// WriteTo streams the view to w.
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	crc := crc32.New(crcTable)
	cw := &countWriter{w: io.MultiWriter(w, crc)}
	bw := bufio.NewWriterSize(cw, 256<<10)
	bw.WriteString(snapshotMagic)
	bw.WriteByte(snapshotVersion)
	it, err := s.snap.NewIter(nil)
	if err != nil {
		return 0, fmt.Errorf("engine: snapshot iterator: %w", err)
	}
	var hdr []byte
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return cw.n, fmt.Errorf("engine: read snapshot: %w", err)
		}
		if string(k) == string(keyspace.Meta(restoringKey)) {
			continue
		}
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(k)))
		bw.Write(hdr)
		bw.Write(k)
		hdr = binary.AppendUvarint(hdr[:0], uint64(len(v)))
		bw.Write(hdr)
		if _, err := bw.Write(v); err != nil {
			it.Close()
			return cw.n, fmt.Errorf("engine: write snapshot: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return cw.n, fmt.Errorf("engine: snapshot iterator: %w", err)
	}
	bw.WriteByte(0)
	if err := bw.Flush(); err != nil {
		return cw.n, fmt.Errorf("engine: write snapshot: %w", err)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return cw.n, fmt.Errorf("engine: write snapshot: %w", err)
	}
	return cw.n + 4, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore replaces the whole store with a snapshot stream. While it runs the
// store carries a restoring mark; a crash leaves the mark and the next Open
// wipes the half-written store. A corrupt stream returns an error wrapping
// ErrCorrupt and leaves the engine unusable until it is restored again. An
// I/O error faults the engine (ErrFaulted); after Recover the restore can
// be tried again.
func (e *Engine) Restore(r io.Reader) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if e.readOnly || e.mon.WALFailure() != nil || (e.fault != nil && !errors.Is(e.fault, errRestoring)) {
		return fmt.Errorf("engine: restore: %w", e.faultOr(e.mon.WALFailure()))
	}
	mark := keyspace.Meta(restoringKey)
	if err := e.commit(func() error { return e.db.Set(mark, []byte{1}, e.durable()) }); err != nil {
		e.setFault(fmt.Errorf("engine: mark restore: %w", err), false)
		return e.fault
	}
	e.setFault(errRestoring, true)
	if err := e.wipe(mark); err != nil {
		return err
	}
	e.cache = newSegmentCache(e.opts.SegmentCacheEntries, e.opts.SegmentCacheBytes)
	if err := e.readSnapshot(r); err != nil {
		return err
	}
	if err := e.commit(func() error { return e.db.Delete(mark, e.durable()) }); err != nil {
		return e.restoreFailed(fmt.Errorf("engine: clear restore mark: %w", err))
	}
	if err := e.load(); err != nil {
		return err
	}
	e.clearFault()
	return nil
}

// errRestoring faults the engine while a restore runs or after it failed on
// a bad stream: the next Restore may go ahead.
var errRestoring = fmt.Errorf("%w: restore in progress or failed", ErrFaulted)

// restoreFailed faults the engine after an I/O error in a restore: it must
// be recovered before the next restore.
func (e *Engine) restoreFailed(err error) error {
	e.setFault(err, true)
	return err
}

func (e *Engine) faultOr(err error) error {
	if e.fault != nil {
		return e.fault
	}
	return err
}

// wipe deletes every key but keep (nil: every key).
func (e *Engine) wipe(keep []byte) error {
	b := e.db.NewBatch()
	defer b.Close()
	if keep == nil {
		b.DeleteRange([]byte{0}, []byte{0xff, 0xff}, nil)
	} else {
		b.DeleteRange([]byte{0}, keep, nil)
		b.DeleteRange(append(append([]byte{}, keep...), 0), []byte{0xff, 0xff}, nil)
	}
	if err := e.commit(func() error { return b.Commit(e.durable()) }); err != nil {
		return e.restoreFailed(fmt.Errorf("engine: wipe: %w", err))
	}
	return nil
}

// restoreBatch is the bytes a restore writes per batch.
const restoreBatch = 8 << 20

func (e *Engine) readSnapshot(r io.Reader) error {
	br := &crcReader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(crcTable)}
	corrupt := func(what string, err error) error {
		if err != nil {
			return fmt.Errorf("%w: snapshot %s: %v", ErrCorrupt, what, err)
		}
		return fmt.Errorf("%w: snapshot %s", ErrCorrupt, what)
	}
	head := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(br, head); err != nil {
		return corrupt("header", err)
	}
	if string(head[:4]) != snapshotMagic || head[4] != snapshotVersion {
		return corrupt("header", nil)
	}
	// Batches are sized up front: a batch that grows by doubling copies
	// itself at each step, which was half of a restore's CPU.
	b := e.db.NewBatchWithSize(restoreBatch + restoreBatch/2)
	defer func() { b.Close() }()
	for {
		klen, err := binary.ReadUvarint(br)
		if err != nil {
			return corrupt("key length", err)
		}
		if klen == 0 {
			break
		}
		k, err := readN(br, klen)
		if err != nil {
			return corrupt("key", err)
		}
		vlen, err := binary.ReadUvarint(br)
		if err != nil {
			return corrupt("value length", err)
		}
		v, err := readN(br, vlen)
		if err != nil {
			return corrupt("value", err)
		}
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		if b.Len() > restoreBatch {
			if err := e.commit(func() error { return b.Commit(pebble.NoSync) }); err != nil {
				return e.restoreFailed(fmt.Errorf("engine: restore: %w", err))
			}
			b.Close()
			b = e.db.NewBatchWithSize(restoreBatch + restoreBatch/2)
		}
	}
	want := br.crc.Sum32()
	var got [4]byte
	if _, err := io.ReadFull(br.r, got[:]); err != nil {
		return corrupt("checksum", err)
	}
	if binary.BigEndian.Uint32(got[:]) != want {
		return corrupt("checksum mismatch", nil)
	}
	if err := e.commit(func() error { return b.Commit(e.durable()) }); err != nil {
		return e.restoreFailed(fmt.Errorf("engine: restore: %w", err))
	}
	return nil
}

// crcReader checksums exactly the bytes consumed from a buffered reader.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.crc.Write([]byte{b})
	}
	return b, err
}

func readN(r io.Reader, n uint64) ([]byte, error) {
	if n > 1<<30 {
		return nil, fmt.Errorf("length %d too large", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
