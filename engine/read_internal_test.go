package engine

import (
	"bytes"
	"testing"

	"github.com/queenmq/queen/engine/segment"
)

func testSegment(frames, payload int) *segment.Segment {
	s := &segment.Segment{}
	for range frames {
		s.Frames = append(s.Frames, segment.Frame{TransactionID: []byte("txn"), Payload: bytes.Repeat([]byte{'x'}, payload)})
	}
	return s
}

// The decoded-segment cache holds at most its byte bound (the newest
// segment is kept even when it alone is larger), evicting the least
// recently used, and at most its entry bound.
func TestSegmentCache_BoundedByBytesAndEntries(t *testing.T) {
	one := segmentSize(testSegment(10, 1000))
	if one < 10*1000 {
		t.Fatalf("a segment of 10 KB of payloads sized %d bytes", one)
	}
	c := newSegmentCache(100, 3*one)
	for base := range int64(5) {
		c.put(segmentKey{base: base}, testSegment(10, 1000))
		if c.bytes > 3*one {
			t.Fatalf("after %d segments the cache holds %d bytes, over its %d", base+1, c.bytes, 3*one)
		}
	}
	c.get(segmentKey{base: 2}) // most recent now: 2, then 4, 3
	c.put(segmentKey{base: 5}, testSegment(10, 1000))
	for base, want := range map[int64]bool{0: false, 1: false, 2: true, 3: false, 4: true, 5: true} {
		if got := c.get(segmentKey{base: base}) != nil; got != want {
			t.Errorf("segment %d cached %v, want %v", base, got, want)
		}
	}
	c.put(segmentKey{base: 6}, testSegment(100, 1000))
	if c.lru.Len() != 1 || c.get(segmentKey{base: 6}) == nil {
		t.Errorf("a segment over the bound: %d cached, want it alone", c.lru.Len())
	}

	c = newSegmentCache(2, 1<<30)
	for base := range int64(3) {
		c.put(segmentKey{base: base}, testSegment(1, 10))
	}
	if c.lru.Len() != 2 || c.get(segmentKey{base: 0}) != nil {
		t.Errorf("entry bound 2: %d cached, oldest cached %v", c.lru.Len(), c.get(segmentKey{base: 0}) != nil)
	}
	if c := newSegmentCache(4096, 0); c.max != 0 {
		t.Error("a byte bound of 0 does not disable the cache")
	}
}
