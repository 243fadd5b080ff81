// Package cursortest holds the oracle that the clamp's property test and its
// fuzz target share: what every Decision must satisfy, checked independently
// of how Clamp computes it. Import it only from tests.
package cursortest

import (
	"fmt"

	"github.com/queenmq/queen/engine/cursor"
)

// Check is the oracle shared in spirit with fuzz.FuzzClamp (the two
// packages cannot import each other's tests): it recomputes the decision of
// SEMANTICS §6.3 by brute force and checks d and outcomes against it.
func Check(s cursor.State, p cursor.Policy, items []cursor.Item, outcomes []cursor.Outcome, d cursor.Decision) error {
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
		return fmt.Errorf("clamp: PoisonIndex %d, want %d", d.PoisonIndex, head)
	}
	if head < 0 {
		if d.Poison != -1 || d.Signal != cursor.Completed {
			return fmt.Errorf("no signal but Poison %d, Signal %v", d.Poison, d.Signal)
		}
		if d.Action != cursor.Unchanged && d.Action != cursor.Advance && d.Action != cursor.Complete {
			return fmt.Errorf("no signal but action %v", d.Action)
		}
	} else {
		k := items[head].Offset
		if d.Poison != k || d.Signal != norm(items[head].Status) {
			return fmt.Errorf("clamp: Poison %d Signal %d, want %d %d", d.Poison, d.Signal, k, norm(items[head].Status))
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

	// (3) The prefix is the highest in-span completed offset below the signal.
	want := s.Committed
	for _, it := range items {
		if inSpan(it.Offset) && norm(it.Status) == cursor.Completed && below(it.Offset) && it.Offset > want {
			want = it.Offset
		}
	}
	if d.Prefix != want {
		return fmt.Errorf("clamp: Prefix %d, want %d", d.Prefix, want)
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
		return fmt.Errorf("clamp: Charged %v, want %v", d.Charged, charge)
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
