package engine

import (
	"container/list"
	"fmt"
	"sync"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/engine/segment"
)

// segmentCache keeps recently decoded segments. Segments are immutable and a
// (partition id, base offset) pair is never reused, so entries never go stale.
// It is bounded by entries and by the bytes the decoded frames hold: 4,096
// decoded segments were 200-350 MB of live heap on every node of a loaded
// three-node cluster while consumers drained (the apply loop decodes what it
// leases), and each GC cycle marked all of it.
type segmentCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int64
	bytes    int64
	m        map[segmentKey]*list.Element
	lru      list.List // front: most recent; values are *cachedSegment
}

type segmentKey struct {
	part ID
	base int64
}

type cachedSegment struct {
	key  segmentKey
	seg  *segment.Segment
	size int64
}

func newSegmentCache(max int, maxBytes int64) *segmentCache {
	if maxBytes <= 0 {
		max = 0
	}
	return &segmentCache{max: max, maxBytes: maxBytes, m: map[segmentKey]*list.Element{}}
}

// segmentSize is what a decoded segment holds in memory, about.
func segmentSize(s *segment.Segment) int64 {
	n := int64(unsafe.Sizeof(*s)) + int64(cap(s.Frames))*int64(unsafe.Sizeof(segment.Frame{}))
	for i := range s.Frames {
		f := &s.Frames[i]
		n += int64(len(f.TransactionID) + len(f.ProducerSub) + len(f.Payload))
	}
	return n
}

func (c *segmentCache) get(k segmentKey) *segment.Segment {
	if c.max == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[k]; el != nil {
		c.lru.MoveToFront(el)
		return el.Value.(*cachedSegment).seg
	}
	return nil
}

func (c *segmentCache) put(k segmentKey, s *segment.Segment) {
	if c.max == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[k]; el != nil {
		c.lru.MoveToFront(el)
		return
	}
	cs := &cachedSegment{k, s, segmentSize(s)}
	c.m[k] = c.lru.PushFront(cs)
	c.bytes += cs.size
	for c.lru.Len() > c.max || (c.bytes > c.maxBytes && c.lru.Len() > 1) {
		el := c.lru.Back()
		c.lru.Remove(el)
		old := el.Value.(*cachedSegment)
		delete(c.m, old.key)
		c.bytes -= old.size
	}
}

// segmentIter walks one partition's segments.
type segmentIter struct {
	e    *Engine
	part ID
	it   *pebble.Iterator
}

func (e *Engine) segments(r pebble.Reader, part ID) (*segmentIter, error) {
	prefix := keyspace.SegmentPrefix(part)
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: keyspace.PrefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("engine: segment iterator: %w", err)
	}
	return &segmentIter{e: e, part: part, it: it}, nil
}

func (s *segmentIter) close() { s.it.Close() }

// err is why the iterator stopped, nil when it ran out of segments: a read
// error ends an iteration as the last segment does, so every loop that may
// end on a false step asks, or a failed read would look like the end of
// the partition (a message "not found", a pop answered short, a sweep that
// stops early on one replica only).
func (s *segmentIter) err() error {
	if err := s.it.Error(); err != nil {
		return fmt.Errorf("engine: read segments of %x: %w", s.part, err)
	}
	return nil
}

// seekContaining positions at the segment holding off (the last segment whose
// base is at or below off).
func (s *segmentIter) seekContaining(off Offset) bool {
	return s.it.SeekLT(keyspace.Segment(s.part, int64(off)+1))
}

func (s *segmentIter) first() bool { return s.it.First() }
func (s *segmentIter) last() bool  { return s.it.Last() }
func (s *segmentIter) next() bool  { return s.it.Next() }
func (s *segmentIter) prev() bool  { return s.it.Prev() }

// header returns the current segment's header, from the cache when decoded.
func (s *segmentIter) header() (segment.Header, error) {
	_, base, err := keyspace.ParseSegment(s.it.Key())
	if err != nil {
		return segment.Header{}, err
	}
	if seg := s.e.cache.get(segmentKey{s.part, base}); seg != nil {
		return seg.Header, nil
	}
	v, err := s.it.ValueAndErr()
	if err != nil {
		return segment.Header{}, fmt.Errorf("engine: read segment %x/%d: %w", s.part, base, err)
	}
	h, err := segment.ReadHeader(v)
	if err != nil {
		return h, fmt.Errorf("engine: segment %x/%d: %w", s.part, base, err)
	}
	return h, nil
}

// decode returns the current segment, decoded, through the cache.
func (s *segmentIter) decode() (*segment.Segment, error) {
	_, base, err := keyspace.ParseSegment(s.it.Key())
	if err != nil {
		return nil, err
	}
	if seg := s.e.cache.get(segmentKey{s.part, base}); seg != nil {
		return seg, nil
	}
	v, err := s.it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("engine: read segment %x/%d: %w", s.part, base, err)
	}
	return s.e.decodeSegment(s.part, base, v)
}

// decodeSegment decodes the value stored at (part, base), checks it holds
// that base, and caches it.
func (e *Engine) decodeSegment(part ID, base int64, v []byte) (*segment.Segment, error) {
	seg, err := segment.Decode(v)
	if err != nil {
		return nil, fmt.Errorf("engine: segment %x/%d: %w", part, base, err)
	}
	if seg.Header.Base != base {
		return nil, fmt.Errorf("%w: segment %x/%d holds base %d", ErrCorrupt, part, base, seg.Header.Base)
	}
	e.cache.put(segmentKey{part, base}, seg)
	return seg, nil
}

// readRange calls fn for every stored message of p with an offset in
// [from, to], in order. Offsets with no segment (deleted by retention) are
// skipped. When p remembers the segment holding from (recent segments), the
// segments are found by exact key, through the cache, without an iterator;
// otherwise one iterator seeks to it.
func (e *Engine) readRange(r pebble.Reader, p *partition, from, to Offset, fn func(off Offset, f *segment.Frame, createdAt int64) error) error {
	if from > to {
		return nil
	}
	base, known := p.recentBase(int64(from))
	return e.readFrom(r, p.id, base, known, from, to, fn)
}

// readFrom is readRange once the caller knows (known) the base of the
// segment holding from, or knows it does not: it needs no partition, so it
// runs outside the engine's lock (a pop's reads after its commit). A known
// base is followed by exact-key reads through the cache; an iterator takes
// over where that chain ends (a segment deleted meanwhile), or from the
// start without one. Pebble clones the value a reverse seek lands on, so
// the iterator's SeekLT costs a copy of a whole segment that the exact
// reads do not.
func (e *Engine) readFrom(r pebble.Reader, part ID, base int64, known bool, from, to Offset, fn func(off Offset, f *segment.Frame, createdAt int64) error) error {
	if from > to {
		return nil
	}
	if known {
		for base <= int64(to) {
			seg, err := e.segmentAt(r, part, base)
			if err != nil {
				return err
			}
			if seg == nil {
				break // deleted meanwhile: the iterator path skips the gap
			}
			if err := visit(seg, from, to, fn); err != nil {
				return err
			}
			base = seg.Header.Last() + 1
		}
		if base > int64(to) {
			return nil
		}
		from = Offset(base)
	}
	return e.readRangeIter(r, part, from, to, fn)
}

// readRangeIter is readRange through one iterator, without the partition's
// in-memory state (so it may run outside a batch, on a snapshot).
func (e *Engine) readRangeIter(r pebble.Reader, part ID, from, to Offset, fn func(off Offset, f *segment.Frame, createdAt int64) error) error {
	it, err := e.segments(r, part)
	if err != nil {
		return err
	}
	defer it.close()
	ok := it.seekContaining(from)
	if !ok {
		ok = it.first()
	}
	for ; ok; ok = it.next() {
		seg, err := it.decode()
		if err != nil {
			return err
		}
		if Offset(seg.Header.Base) > to {
			break
		}
		if err := visit(seg, from, to, fn); err != nil {
			return err
		}
	}
	return it.err()
}

// visit calls fn for the frames of seg with offsets in [from, to].
func visit(seg *segment.Segment, from, to Offset, fn func(off Offset, f *segment.Frame, createdAt int64) error) error {
	h := seg.Header
	lo := max(from, Offset(h.Base))
	hi := min(to, Offset(h.Last()))
	for off := lo; off <= hi; off++ {
		if err := fn(off, &seg.Frames[off-Offset(h.Base)], h.CreatedAt); err != nil {
			return err
		}
	}
	return nil
}

// segmentAt returns the decoded segment at base, through the cache; nil when
// there is none.
func (e *Engine) segmentAt(r pebble.Reader, part ID, base int64) (*segment.Segment, error) {
	k := segmentKey{part, base}
	if seg := e.cache.get(k); seg != nil {
		return seg, nil
	}
	var seg *segment.Segment
	_, err := get(r, keyspace.Segment(part, base), func(v []byte) (err error) {
		seg, err = e.decodeSegment(part, base, v)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("engine: read segment: %w", err)
	}
	return seg, nil
}

// readOne returns the frame at off and its segment's createdAt.
func (e *Engine) readOne(r pebble.Reader, p *partition, off Offset) (segment.Frame, int64, bool, error) {
	var (
		frame     segment.Frame
		createdAt int64
		found     bool
	)
	err := e.readRange(r, p, off, off, func(_ Offset, f *segment.Frame, at int64) error {
		frame, createdAt, found = *f, at, true
		return nil
	})
	return frame, createdAt, found, err
}

// lastVisible returns the last offset of p whose segment was created at or
// before cutoff (Start-1 when none): delayedProcessing hides the tail.
func (e *Engine) lastVisible(r pebble.Reader, p *partition, cutoff int64) (Offset, error) {
	it, err := e.segments(r, p.id)
	if err != nil {
		return 0, err
	}
	defer it.close()
	for ok := it.last(); ok; ok = it.prev() {
		h, err := it.header()
		if err != nil {
			return 0, err
		}
		if h.CreatedAt <= cutoff {
			return Offset(h.Last()), nil
		}
	}
	return Offset(p.rec.Start - 1), it.err()
}

// offsetAtTime returns the committed offset that makes a group consume from
// the first segment created at or after ts: that segment's base - 1, or the
// last offset when no segment is that new (docs/semantics.md §4.6, §14).
func (e *Engine) offsetAtTime(r pebble.Reader, p *partition, ts int64) (Offset, error) {
	it, err := e.segments(r, p.id)
	if err != nil {
		return 0, err
	}
	defer it.close()
	for ok := it.first(); ok; ok = it.next() {
		h, err := it.header()
		if err != nil {
			return 0, err
		}
		if h.CreatedAt >= ts {
			return Offset(h.Base - 1), nil
		}
	}
	return p.last(), it.err()
}

// createdAtOf returns the createdAt of the segment holding off (0, false when
// none holds it).
func (e *Engine) createdAtOf(r pebble.Reader, p *partition, off Offset) (int64, bool, error) {
	it, err := e.segments(r, p.id)
	if err != nil {
		return 0, false, err
	}
	defer it.close()
	if !it.seekContaining(off) {
		return 0, false, it.err()
	}
	h, err := it.header()
	if err != nil {
		return 0, false, err
	}
	if Offset(h.Last()) < off {
		return 0, false, nil
	}
	return h.CreatedAt, true, nil
}
