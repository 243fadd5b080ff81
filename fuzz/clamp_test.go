package fuzz

import (
	"math"
	"slices"
	"testing"

	"github.com/queenmq/queen/engine/cursor"
)

// FuzzClamp decodes a cursor state, a policy and a list of ack items from the
// fuzz input, runs cursor.Clamp, and checks the decision against a brute-force
// restatement of docs/semantics.md §6.3 (checkClamp): the cursor never regresses,
// never passes the lowest failure signal, advances only over completed
// offsets, charges the budget at most once and only for a Failed head with
// budget left, resets it exactly on Complete, dead-letter and drop, and answers
// every item consistently.
func FuzzClamp(f *testing.F) {
	// Worked examples of docs/semantics.md §6.4 and rows of §7, as seeds.
	type it = [2]int // offset, status (0 completed, 1 failed, 2 retry, 3 dlq)
	for _, sd := range [][]byte{
		seedInput(-1, 0, 0, 0, 3, true, it{0, 1}),  // 6.4.1 first failure
		seedInput(-1, 0, 0, 3, 3, true, it{0, 1}),  // 6.4.1 fourth failure
		seedInput(-1, 0, 0, 0, 0, true, it{0, 1}),  // 6.4.2
		seedInput(-1, 0, 0, 3, 3, false, it{0, 1}), // 6.4.3
		seedInput(-1, 0, 0, 0, 1, true, it{0, 2}),  // 6.4.4
		seedInput(-1, 9, 9, 0, 3, true, it{0, 0}, it{1, 0}, it{2, 0}, it{3, 0}, it{4, 0}, it{5, 1}, it{6, 0}, it{9, 0}), // 6.4.6
		seedInput(-1, 9, 9, 0, 3, true, it{5, 1}, it{9, 0}),                                                             // 6.4.7
		seedInput(-1, 9, 9, 2, 3, true, it{9, 0}),                                                                       // 6.4.8
		seedInput(-1, 9, 9, 1, 3, true, it{0, 0}, it{4, 0}),                                                             // 6.4.9
		seedInput(-1, 9, 9, 0, 3, true, it{0, 0}, it{1, 0}, it{2, 0}, it{3, 3}),                                         // 6.4.10
		seedInput(1, 9, 9, 2, 3, true, it{2, 0}, it{3, 0}, it{4, 0}, it{5, 1}),                                          // 6.4.11
		seedInput(4, 9, 9, 1, 3, true, it{4, 0}, it{4, 1}),                                                              // 6.4.12
		seedInput(-1, 9, 9, 1, 3, true, it{5, 2}, it{5, 1}, it{5, 3}, it{5, 1}, it{3, 0}),                               // precedence
		seedInput(-1, 14, 4, 1, 3, true, it{7, 0}, it{6, 1}, it{12, 0}),                                                 // lease-less span
		seedInput(-1, 9, 9, 1, 3, true),                                                                                 // empty
		{},
	} {
		f.Add(sd)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		s, p, items := decodeClamp(data)
		before := slices.Clone(items)
		out := make([]cursor.Outcome, len(items))
		d := cursor.Clamp(s, p, items, out)
		if !slices.Equal(items, before) {
			t.Fatalf("Clamp modified items")
		}
		if err := cursor.Verify(s, p, items, out, d); err != nil {
			t.Fatalf("%v\nstate %+v\npolicy %+v\nitems %v\ndecision %+v\noutcomes %v", err, s, p, items, d, out)
		}
	})
}

// decodeClamp reads six header bytes and then (offset, status) byte pairs.
// Offsets are small so that items collide with each other and with the span
// and batch bounds; a header bit moves everything next to math.MaxInt64.
func decodeClamp(data []byte) (cursor.State, cursor.Policy, []cursor.Item) {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	counter := func(b byte) uint32 {
		if b >= 0xf8 {
			return math.MaxUint32 - uint32(b&7)
		}
		return uint32(b % 8)
	}
	b0, b1, b2, b3, b4, b5 := next(), next(), next(), next(), next(), next()

	base := cursor.Offset(0)
	if b5&2 != 0 {
		base = math.MaxInt64 - 64
	}
	var s cursor.State
	s.Committed = base + cursor.Offset(b0%12) - 1
	s.SpanEnd = s.Committed + cursor.Offset(b1%24) - 1
	s.BatchEnd = s.SpanEnd
	if b2&1 == 0 {
		s.BatchEnd = s.Committed + cursor.Offset((b2>>1)%20) - 2
	}
	s.RetryCount = counter(b3)
	p := cursor.Policy{RetryLimit: counter(b4), DeadLetter: b5&1 != 0}

	var items []cursor.Item
	for len(data) >= 2 && len(items) < 128 {
		o, st := next(), next()
		status := cursor.Status(st % 4)
		if st >= 0xf0 {
			status = cursor.Status(st) // outside the four: treated as Failed
		}
		items = append(items, cursor.Item{Offset: base + cursor.Offset(o%32) - 2, Status: status})
	}
	return s, p, items
}

// seedInput encodes small values the way decodeClamp reads them.
func seedInput(committed, spanEnd, batchEnd int, retryCount, retryLimit byte, dlq bool, items ...[2]int) []byte {
	b2 := byte(batchEnd-committed+2) << 1
	if batchEnd == spanEnd {
		b2 = 1
	}
	var b5 byte
	if dlq {
		b5 = 1
	}
	data := []byte{byte(committed + 1), byte(spanEnd - committed + 1), b2, retryCount, retryLimit, b5}
	for _, it := range items {
		data = append(data, byte(it[0]+2), byte(it[1]))
	}
	return data
}
