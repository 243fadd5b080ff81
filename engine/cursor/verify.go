package cursor

import "fmt"

// Verify checks a Decision and its outcomes against the decision procedure
// of the package documentation, recomputed by brute force and independently
// of how Clamp computes it: it is the oracle of the property test and the
// fuzz target, and, in a build with the invariants tag, the engine runs it
// after every Clamp. It allocates; Clamp does not.
func Verify(s State, p Policy, items []Item, outcomes []Outcome, d Decision) error {
	norm := func(st Status) Status {
		if st > DeadLetter {
			return Failed
		}
		return st
	}
	rank := map[Status]int{Retry: 1, Failed: 2, DeadLetter: 3}
	inSpan := func(o Offset) bool { return o > s.Committed && o <= s.SpanEnd }

	// The head signal: lowest in-span non-completed offset, then precedence,
	// then request order.
	head := -1
	for i, it := range items {
		if !inSpan(it.Offset) || norm(it.Status) == Completed {
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
	below := func(o Offset) bool { return head < 0 || o < items[head].Offset }

	// (1) The cursor never regresses.
	if d.Committed < s.Committed || d.Prefix < s.Committed {
		return fmt.Errorf("cursor regressed: committed %d, prefix %d, was %d", d.Committed, d.Prefix, s.Committed)
	}

	// (2) The signal, and never passing it.
	if d.PoisonIndex != head {
		return fmt.Errorf("clamp: PoisonIndex %d, want %d", d.PoisonIndex, head)
	}
	if head < 0 {
		if d.Poison != -1 || d.Signal != Completed {
			return fmt.Errorf("no signal but Poison %d, Signal %v", d.Poison, d.Signal)
		}
		if d.Action != Unchanged && d.Action != Advance && d.Action != Complete {
			return fmt.Errorf("no signal but action %v", d.Action)
		}
	} else {
		k := items[head].Offset
		if d.Poison != k || d.Signal != norm(items[head].Status) {
			return fmt.Errorf("clamp: Poison %d Signal %d, want %d %d", d.Poison, d.Signal, k, norm(items[head].Status))
		}
		switch d.Action {
		case Release:
			if d.Committed >= k {
				return fmt.Errorf("release committed %d, at or past the signal %d", d.Committed, k)
			}
		case ActionDeadLetter, Drop:
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
		if inSpan(it.Offset) && norm(it.Status) == Completed && below(it.Offset) && it.Offset > want {
			want = it.Offset
		}
	}
	if d.Prefix != want {
		return fmt.Errorf("clamp: Prefix %d, want %d", d.Prefix, want)
	}
	if d.Action != ActionDeadLetter && d.Action != Drop && d.Committed != d.Prefix {
		return fmt.Errorf("action %v: Committed %d != Prefix %d", d.Action, d.Committed, d.Prefix)
	}

	// (4) The action and the budget.
	var wantAction Action
	charge := false
	switch {
	case head < 0 && d.Prefix == s.Committed:
		wantAction = Unchanged
	case head < 0 && d.Prefix < s.BatchEnd:
		wantAction = Advance
	case head < 0:
		wantAction = Complete
	case d.Signal == Retry:
		wantAction = Release
	case d.Signal == Failed && s.RetryCount < p.RetryLimit:
		wantAction, charge = Release, true
	case d.Signal == Failed && !p.DeadLetter:
		wantAction = Drop
	default:
		wantAction = ActionDeadLetter
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
	case Complete, ActionDeadLetter, Drop:
		if d.RetryCount != 0 {
			return fmt.Errorf("action %v: RetryCount %d, want 0", d.Action, d.RetryCount)
		}
	default:
		if !d.Charged && d.RetryCount != s.RetryCount {
			return fmt.Errorf("action %v: RetryCount %d, want %d", d.Action, d.RetryCount, s.RetryCount)
		}
	}
	if released := d.Action != Unchanged && d.Action != Advance; d.LeaseReleased != released {
		return fmt.Errorf("action %v: LeaseReleased %v", d.Action, d.LeaseReleased)
	}

	// (6) Per-item outcomes.
	for i, it := range items {
		var want Outcome
		switch {
		case it.Offset <= s.Committed && norm(it.Status) == Completed:
			want = Noop
		case it.Offset <= s.Committed:
			want = Stale
		case it.Offset > s.SpanEnd:
			want = OutOfSpan
		case !below(it.Offset) && it.Offset != items[head].Offset:
			want = Superseded
		default:
			want = Applied
		}
		if outcomes[i] != want {
			return fmt.Errorf("outcome[%d] (%+v) %v, want %v", i, it, outcomes[i], want)
		}
	}
	return nil
}
