package fuzz

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/queenmq/queen/engine/cursor"
)

// FuzzClamp decodes a cursor state, a policy and a list of ack items from the
// fuzz input, runs cursor.Clamp, and checks the decision against a brute-force
// restatement of SEMANTICS §6.3 (checkClamp): the cursor never regresses,
// never passes the lowest failure signal, advances only over completed
// offsets, charges the budget at most once and only for a Failed head with
// budget left, resets it exactly on Complete, dead-letter and drop, and answers
// every item consistently.
func FuzzClamp(f *testing.F) {
	// Worked examples of SEMANTICS §6.4 and rows of §7, as seeds.
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
		if err := checkClamp(s, p, items, out, d); err != nil {
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

// checkClamp recomputes the decision of SEMANTICS §6.3 by brute force and
// checks d and outcomes against it. engine/cursor's property test carries the
// same oracle (the packages cannot share test code).
func checkClamp(s cursor.State, p cursor.Policy, items []cursor.Item, outcomes []cursor.Outcome, d cursor.Decision) error {
	norm := func(st cursor.Status) cursor.Status {
		if st > cursor.DeadLetter {
			return cursor.Failed
		}
		return st
	}
	rank := map[cursor.Status]int{cursor.Retry: 1, cursor.Failed: 2, cursor.DeadLetter: 3}
	inSpan := func(o cursor.Offset) bool { return o > s.Committed && o <= s.SpanEnd }

	// The head signal: lowest in-span non-completed offset, then precedence,
	// then request order.
	head := -1
	for i, it := range items {
		if !inSpan(it.Offset) || norm(it.Status) == cursor.Completed {
			continue
		}
		if head < 0 {
			head = i
			continue
		}
		h := items[head]
		if it.Offset < h.Offset || it.Offset == h.Offset && rank[norm(it.Status)] > rank[norm(h.Status)] {
			head = i
		}
	}
	below := func(o cursor.Offset) bool { return head < 0 || o < items[head].Offset }

	// (1) The cursor never regresses.
	if d.Committed < s.Committed || d.Prefix < s.Committed {
		return fmt.Errorf("cursor regressed: committed %d, prefix %d, was %d", d.Committed, d.Prefix, s.Committed)
	}

	// (2) The signal, and never passing it.
	if d.PoisonIndex != head {
		return fmt.Errorf("PoisonIndex %d, want %d", d.PoisonIndex, head)
	}
	if head < 0 {
		if d.Poison != -1 || d.Signal != cursor.Completed {
			return fmt.Errorf("no signal but Poison %d, Signal %d", d.Poison, d.Signal)
		}
		if d.Action != cursor.Unchanged && d.Action != cursor.Advance && d.Action != cursor.Complete {
			return fmt.Errorf("no signal but action %v", d.Action)
		}
	} else {
		k := items[head].Offset
		if d.Poison != k || d.Signal != norm(items[head].Status) {
			return fmt.Errorf("Poison %d Signal %d, want %d %d", d.Poison, d.Signal, k, norm(items[head].Status))
		}
		switch d.Action {
		case cursor.Release:
			if d.Committed >= k {
				return fmt.Errorf("release committed %d, at or past the signal %d", d.Committed, k)
			}
		case cursor.ActionDeadLetter, cursor.Drop:
			if d.Committed != k || d.Prefix >= k {
				return fmt.Errorf("terminal committed %d prefix %d, want %d and below", d.Committed, d.Prefix, k)
			}
		default:
			return fmt.Errorf("signal at %d but action %v", k, d.Action)
		}
	}

	// (3) The prefix advances only over completed offsets: it is the highest
	// in-span completed offset below the signal, or the old committed offset.
	want := s.Committed
	for _, it := range items {
		if inSpan(it.Offset) && norm(it.Status) == cursor.Completed && below(it.Offset) && it.Offset > want {
			want = it.Offset
		}
	}
	if d.Prefix != want {
		return fmt.Errorf("Prefix %d, want %d", d.Prefix, want)
	}
	if d.Action != cursor.ActionDeadLetter && d.Action != cursor.Drop && d.Committed != d.Prefix {
		return fmt.Errorf("action %v: Committed %d != Prefix %d", d.Action, d.Committed, d.Prefix)
	}

	// (4) The action and the budget.
	var wantAction cursor.Action
	charge := false
	switch {
	case head < 0 && d.Prefix == s.Committed:
		wantAction = cursor.Unchanged
	case head < 0 && d.Prefix < s.BatchEnd:
		wantAction = cursor.Advance
	case head < 0:
		wantAction = cursor.Complete
	case d.Signal == cursor.Retry:
		wantAction = cursor.Release
	case d.Signal == cursor.Failed && s.RetryCount < p.RetryLimit:
		wantAction, charge = cursor.Release, true
	case d.Signal == cursor.Failed && !p.DeadLetter:
		wantAction = cursor.Drop
	default:
		wantAction = cursor.ActionDeadLetter
	}
	if d.Action != wantAction {
		return fmt.Errorf("action %v, want %v", d.Action, wantAction)
	}
	if d.Charged != charge {
		return fmt.Errorf("Charged %v, want %v", d.Charged, charge)
	}
	if d.Charged && d.RetryCount != s.RetryCount+1 {
		return fmt.Errorf("charged: RetryCount %d, want %d", d.RetryCount, s.RetryCount+1)
	}

	// (5) Reset exactly on Complete, dead-letter and drop.
	switch d.Action {
	case cursor.Complete, cursor.ActionDeadLetter, cursor.Drop:
		if d.RetryCount != 0 {
			return fmt.Errorf("action %v: RetryCount %d, want 0", d.Action, d.RetryCount)
		}
	default:
		if !d.Charged && d.RetryCount != s.RetryCount {
			return fmt.Errorf("action %v: RetryCount %d, want %d", d.Action, d.RetryCount, s.RetryCount)
		}
	}
	if released := d.Action != cursor.Unchanged && d.Action != cursor.Advance; d.LeaseReleased != released {
		return fmt.Errorf("action %v: LeaseReleased %v", d.Action, d.LeaseReleased)
	}

	// (6) Per-item outcomes.
	for i, it := range items {
		var want cursor.Outcome
		switch {
		case it.Offset <= s.Committed && norm(it.Status) == cursor.Completed:
			want = cursor.Noop
		case it.Offset <= s.Committed:
			want = cursor.Stale
		case it.Offset > s.SpanEnd:
			want = cursor.OutOfSpan
		case !below(it.Offset) && it.Offset != items[head].Offset:
			want = cursor.Superseded
		default:
			want = cursor.Applied
		}
		if outcomes[i] != want {
			return fmt.Errorf("outcome[%d] (%+v) %v, want %v", i, it, outcomes[i], want)
		}
	}
	return nil
}
