package cursor_test

import (
	"slices"
	"testing"

	"github.com/queenmq/queen/engine/cursor"
)

// Item builders: one offset, or a closed range of offsets, with one status.
func completed(offsets ...cursor.Offset) []cursor.Item { return with(cursor.Completed, offsets) }
func failed(offsets ...cursor.Offset) []cursor.Item    { return with(cursor.Failed, offsets) }
func retry(offsets ...cursor.Offset) []cursor.Item     { return with(cursor.Retry, offsets) }
func dlq(offsets ...cursor.Offset) []cursor.Item       { return with(cursor.DeadLetter, offsets) }

func with(st cursor.Status, offsets []cursor.Offset) []cursor.Item {
	items := make([]cursor.Item, len(offsets))
	for i, o := range offsets {
		items[i] = cursor.Item{Offset: o, Status: st}
	}
	return items
}

// span returns the offsets lo..hi inclusive.
func span(lo, hi cursor.Offset) []cursor.Offset {
	var offsets []cursor.Offset
	for o := lo; o <= hi; o++ {
		offsets = append(offsets, o)
	}
	return offsets
}

func join(parts ...[]cursor.Item) []cursor.Item { return slices.Concat(parts...) }

// outcomeRuns returns n copies of o, concatenated over the pairs given.
func outcomeRuns(pairs ...any) []cursor.Outcome {
	var out []cursor.Outcome
	for i := 0; i < len(pairs); i += 2 {
		for range pairs[i].(int) {
			out = append(out, pairs[i+1].(cursor.Outcome))
		}
	}
	return out
}

// step is one ack call of a scenario, or a lease expiry, which is not a call.
type step struct {
	expire   bool          // the lease expires: the caller does not call Clamp
	batchEnd cursor.Offset // the leased batch end, used as SpanEnd and BatchEnd
	items    []cursor.Item
	want     cursor.Decision
	outcomes []cursor.Outcome
}

// scenario drives Clamp over several calls on one (partition, group) row,
// carrying the committed offset and the counter from one call to the next.
type scenario struct {
	name       string
	policy     cursor.Policy
	committed  cursor.Offset // before the first step
	retryCount uint32        // before the first step
	steps      []step
	// The row after the last step.
	wantCommitted  cursor.Offset
	wantRetryCount uint32
}

func (sc scenario) run(t *testing.T) {
	t.Helper()
	s := cursor.State{Committed: sc.committed, RetryCount: sc.retryCount}
	for i, st := range sc.steps {
		if st.expire {
			continue
		}
		s.SpanEnd, s.BatchEnd = st.batchEnd, st.batchEnd
		before := slices.Clone(st.items)
		out := make([]cursor.Outcome, len(st.items))
		got := cursor.Clamp(s, sc.policy, st.items, out)
		if got != st.want {
			t.Fatalf("step %d: Clamp(%+v, %+v, %v)\n got %+v\nwant %+v", i, s, sc.policy, st.items, got, st.want)
		}
		if !slices.Equal(out, st.outcomes) {
			t.Fatalf("step %d: outcomes\n got %v\nwant %v", i, out, st.outcomes)
		}
		if !slices.Equal(st.items, before) {
			t.Fatalf("step %d: Clamp modified items", i)
		}
		s.Committed, s.RetryCount = got.Committed, got.RetryCount
	}
	if s.Committed != sc.wantCommitted || s.RetryCount != sc.wantRetryCount {
		t.Fatalf("row after the last step: committed %d, counter %d; want %d, %d",
			s.Committed, s.RetryCount, sc.wantCommitted, sc.wantRetryCount)
	}
}

var (
	defaults = cursor.Policy{RetryLimit: 3, DeadLetter: true}
	noDLQ    = cursor.Policy{RetryLimit: 3, DeadLetter: false}
	applied1 = outcomeRuns(1, cursor.Applied)
)

// failOnce is a Failed ack of offset 0, batch 0..0, with budget left.
func failOnce(newCount uint32) step {
	return step{batchEnd: 0, items: failed(0), outcomes: applied1, want: cursor.Decision{
		Action: cursor.Release, Prefix: -1, Committed: -1, Poison: 0, PoisonIndex: 0,
		Signal: cursor.Failed, RetryCount: newCount, Charged: true, LeaseReleased: true}}
}

// retryOnce is a Retry ack of offset 0, batch 0..0.
func retryOnce(count uint32) step {
	return step{batchEnd: 0, items: retry(0), outcomes: applied1, want: cursor.Decision{
		Action: cursor.Release, Prefix: -1, Committed: -1, Poison: 0, PoisonIndex: 0,
		Signal: cursor.Retry, RetryCount: count, LeaseReleased: true}}
}

func repeat(n int, st step) []step {
	steps := make([]step, n)
	for i := range steps {
		steps[i] = st
	}
	return steps
}

// TestClamp_WorkedExamples has one case per worked example of docs/semantics.md §6.4.
// 6.4.13 (wrong leaseId) is decided by the caller's lease check before the
// clamp runs, so it has no case here.
func TestClamp_WorkedExamples(t *testing.T) {
	for _, sc := range []scenario{
		{
			name:   "6.4.1 retryLimit=3 the 4th failed ack dead-letters",
			policy: defaults, committed: -1,
			steps: []step{
				failOnce(1), failOnce(2), failOnce(3),
				// 3 >= 3: terminal. The DLQ row's retryCount is the counter
				// before this call, 3.
				{batchEnd: 0, items: failed(0), outcomes: applied1, want: cursor.Decision{
					Action: cursor.ActionDeadLetter, Prefix: -1, Committed: 0, Poison: 0, PoisonIndex: 0,
					Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}},
			},
			// Pop 5 starts at offset 1.
			wantCommitted: 0, wantRetryCount: 0,
		},
		{
			name:   "6.4.2 retryLimit=0 the first failed ack dead-letters",
			policy: cursor.Policy{RetryLimit: 0, DeadLetter: true}, committed: -1,
			steps: []step{
				{batchEnd: 0, items: failed(0), outcomes: applied1, want: cursor.Decision{
					Action: cursor.ActionDeadLetter, Prefix: -1, Committed: 0, Poison: 0, PoisonIndex: 0,
					Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}},
			},
			wantCommitted: 0, wantRetryCount: 0,
		},
		{
			name:   "6.4.3 DLQ disabled the 4th failed ack drops",
			policy: noDLQ, committed: -1,
			steps: []step{
				failOnce(1), failOnce(2), failOnce(3),
				{batchEnd: 0, items: failed(0), outcomes: applied1, want: cursor.Decision{
					Action: cursor.Drop, Prefix: -1, Committed: 0, Poison: 0, PoisonIndex: 0,
					Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}},
			},
			wantCommitted: 0, wantRetryCount: 0,
		},
		{
			name:   "6.4.4 retry ten times never dead-letters",
			policy: cursor.Policy{RetryLimit: 1, DeadLetter: true}, committed: -1,
			steps: repeat(10, retryOnce(0)),
			// m redelivers an 11th time.
			wantCommitted: -1, wantRetryCount: 0,
		},
		{
			name:   "6.4.5 lease expiry ten times then failed twice",
			policy: cursor.Policy{RetryLimit: 1, DeadLetter: true}, committed: -1,
			steps: append(repeat(10, step{expire: true}),
				failOnce(1),
				step{batchEnd: 0, items: failed(0), outcomes: applied1, want: cursor.Decision{
					Action: cursor.ActionDeadLetter, Prefix: -1, Committed: 0, Poison: 0, PoisonIndex: 0,
					Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}},
			),
			wantCommitted: 0, wantRetryCount: 0,
		},
		{
			name:   "6.4.6 mixed batch in one call clamps below the failure",
			policy: defaults, committed: -1,
			steps: []step{
				{batchEnd: 9, items: join(completed(span(0, 4)...), failed(5), completed(span(6, 9)...)),
					outcomes: outcomeRuns(6, cursor.Applied, 4, cursor.Superseded),
					want: cursor.Decision{
						Action: cursor.Release, Prefix: 4, Committed: 4, Poison: 5, PoisonIndex: 5,
						Signal: cursor.Failed, RetryCount: 1, Charged: true, LeaseReleased: true}},
			},
			// The next pop starts at 5.
			wantCommitted: 4, wantRetryCount: 1,
		},
		{
			name:   "6.4.7 failed 5 and completed 9 leave the cursor at -1",
			policy: defaults, committed: -1,
			steps: []step{
				{batchEnd: 9, items: join(failed(5), completed(9)),
					outcomes: outcomeRuns(1, cursor.Applied, 1, cursor.Superseded),
					want: cursor.Decision{
						Action: cursor.Release, Prefix: -1, Committed: -1, Poison: 5, PoisonIndex: 0,
						Signal: cursor.Failed, RetryCount: 1, Charged: true, LeaseReleased: true}},
			},
			wantCommitted: -1, wantRetryCount: 1,
		},
		{
			name:   "6.4.8 acking only the last offset completes the batch",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{
				{batchEnd: 9, items: completed(9), outcomes: applied1, want: cursor.Decision{
					Action: cursor.Complete, Prefix: 9, Committed: 9, Poison: -1, PoisonIndex: -1,
					Signal: cursor.Completed, RetryCount: 0, LeaseReleased: true}},
			},
			wantCommitted: 9, wantRetryCount: 0,
		},
		{
			name:   "6.4.9 partial ack keeps the lease then the rest completes",
			policy: defaults, committed: -1, retryCount: 1,
			steps: []step{
				{batchEnd: 9, items: completed(span(0, 4)...), outcomes: outcomeRuns(5, cursor.Applied),
					want: cursor.Decision{
						Action: cursor.Advance, Prefix: 4, Committed: 4, Poison: -1, PoisonIndex: -1,
						Signal: cursor.Completed, RetryCount: 1, LeaseReleased: false}},
				{batchEnd: 9, items: completed(span(5, 9)...), outcomes: outcomeRuns(5, cursor.Applied),
					want: cursor.Decision{
						Action: cursor.Complete, Prefix: 9, Committed: 9, Poison: -1, PoisonIndex: -1,
						Signal: cursor.Completed, RetryCount: 0, LeaseReleased: true}},
			},
			wantCommitted: 9, wantRetryCount: 0,
		},
		{
			name:   "6.4.10 forced dlq in a batch",
			policy: defaults, committed: -1,
			steps: []step{
				{batchEnd: 9, items: join(completed(0, 1, 2), dlq(3)), outcomes: outcomeRuns(4, cursor.Applied),
					want: cursor.Decision{
						Action: cursor.ActionDeadLetter, Prefix: 2, Committed: 3, Poison: 3, PoisonIndex: 3,
						Signal: cursor.DeadLetter, RetryCount: 0, LeaseReleased: true}},
			},
			// 4..9 redeliver.
			wantCommitted: 3, wantRetryCount: 0,
		},
		{
			name:   "6.4.11 the counter is shared across messages",
			policy: defaults, committed: -1,
			steps: []step{
				{batchEnd: 9, items: join(completed(0, 1), failed(2)), outcomes: outcomeRuns(3, cursor.Applied),
					want: cursor.Decision{
						Action: cursor.Release, Prefix: 1, Committed: 1, Poison: 2, PoisonIndex: 2,
						Signal: cursor.Failed, RetryCount: 1, Charged: true, LeaseReleased: true}},
				{batchEnd: 9, items: failed(2), outcomes: applied1,
					want: cursor.Decision{
						Action: cursor.Release, Prefix: 1, Committed: 1, Poison: 2, PoisonIndex: 0,
						Signal: cursor.Failed, RetryCount: 2, Charged: true, LeaseReleased: true}},
				{batchEnd: 9, items: join(completed(2, 3, 4), failed(5)), outcomes: outcomeRuns(4, cursor.Applied),
					want: cursor.Decision{
						Action: cursor.Release, Prefix: 4, Committed: 4, Poison: 5, PoisonIndex: 3,
						Signal: cursor.Failed, RetryCount: 3, Charged: true, LeaseReleased: true}},
				// Offset 5 is dead-lettered after only two failures of its own.
				{batchEnd: 9, items: failed(5), outcomes: applied1,
					want: cursor.Decision{
						Action: cursor.ActionDeadLetter, Prefix: 4, Committed: 5, Poison: 5, PoisonIndex: 0,
						Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}},
			},
			wantCommitted: 5, wantRetryCount: 0,
		},
		{
			name:   "6.4.12 stale acks",
			policy: defaults, committed: 4, retryCount: 1,
			steps: []step{
				{batchEnd: 9, items: completed(4), outcomes: outcomeRuns(1, cursor.Noop),
					want: cursor.Decision{
						Action: cursor.Unchanged, Prefix: 4, Committed: 4, Poison: -1, PoisonIndex: -1,
						Signal: cursor.Completed, RetryCount: 1}},
				{batchEnd: 9, items: failed(4), outcomes: outcomeRuns(1, cursor.Stale),
					want: cursor.Decision{
						Action: cursor.Unchanged, Prefix: 4, Committed: 4, Poison: -1, PoisonIndex: -1,
						Signal: cursor.Completed, RetryCount: 1}},
			},
			wantCommitted: 4, wantRetryCount: 1,
		},
	} {
		t.Run(sc.name, sc.run)
	}
}

// TestClamp_Redelivery has one case per row of the docs/semantics.md §7 table that
// the clamp decides. autoAck commits at pop time and never reaches the clamp.
func TestClamp_Redelivery(t *testing.T) {
	// Every case starts on batch 0..4 with the counter at 2.
	const batchEnd = 4
	for _, sc := range []scenario{
		{
			name:   "§7 completed reaching the batch end advances and resets",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: completed(span(0, 4)...), outcomes: outcomeRuns(5, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.Complete, Prefix: 4, Committed: 4, Poison: -1, PoisonIndex: -1,
					Signal: cursor.Completed, RetryCount: 0, LeaseReleased: true}}},
			wantCommitted: 4, wantRetryCount: 0,
		},
		{
			name:   "§7 partial completed advances and leaves the counter",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: completed(0, 1), outcomes: outcomeRuns(2, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.Advance, Prefix: 1, Committed: 1, Poison: -1, PoisonIndex: -1,
					Signal: cursor.Completed, RetryCount: 2}}},
			wantCommitted: 1, wantRetryCount: 2,
		},
		{
			name:   "§7 failed with budget left stays at the prefix and charges",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: join(completed(0), failed(1)), outcomes: outcomeRuns(2, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.Release, Prefix: 0, Committed: 0, Poison: 1, PoisonIndex: 1,
					Signal: cursor.Failed, RetryCount: 3, Charged: true, LeaseReleased: true}}},
			wantCommitted: 0, wantRetryCount: 3,
		},
		{
			name:   "§7 failed exhausted with DLQ on moves past the poison and resets",
			policy: cursor.Policy{RetryLimit: 2, DeadLetter: true}, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: join(completed(0), failed(1)), outcomes: outcomeRuns(2, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.ActionDeadLetter, Prefix: 0, Committed: 1, Poison: 1, PoisonIndex: 1,
					Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}}},
			wantCommitted: 1, wantRetryCount: 0,
		},
		{
			name:   "§7 failed exhausted with DLQ off drops and resets",
			policy: cursor.Policy{RetryLimit: 2, DeadLetter: false}, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: join(completed(0), failed(1)), outcomes: outcomeRuns(2, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.Drop, Prefix: 0, Committed: 1, Poison: 1, PoisonIndex: 1,
					Signal: cursor.Failed, RetryCount: 0, LeaseReleased: true}}},
			wantCommitted: 1, wantRetryCount: 0,
		},
		{
			name:   "§7 retry stays at the prefix and leaves the counter",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: join(completed(0), retry(1)), outcomes: outcomeRuns(2, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.Release, Prefix: 0, Committed: 0, Poison: 1, PoisonIndex: 1,
					Signal: cursor.Retry, RetryCount: 2, LeaseReleased: true}}},
			wantCommitted: 0, wantRetryCount: 2,
		},
		{
			name:   "§7 dlq moves past the poison and resets",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{{batchEnd: batchEnd, items: join(completed(0), dlq(1)), outcomes: outcomeRuns(2, cursor.Applied),
				want: cursor.Decision{
					Action: cursor.ActionDeadLetter, Prefix: 0, Committed: 1, Poison: 1, PoisonIndex: 1,
					Signal: cursor.DeadLetter, RetryCount: 0, LeaseReleased: true}}},
			wantCommitted: 1, wantRetryCount: 0,
		},
		{
			name:   "§7 lease expires changes nothing",
			policy: defaults, committed: -1, retryCount: 2,
			steps: []step{{expire: true}},
			// Unchanged cursor and budget: the caller does not call Clamp.
			wantCommitted: -1, wantRetryCount: 2,
		},
	} {
		t.Run(sc.name, sc.run)
	}
}

func TestCursor_ParseStatus(t *testing.T) {
	for _, tc := range []struct {
		wire string
		want cursor.Status
	}{
		{"completed", cursor.Completed},
		{"success", cursor.Completed},
		{"acked", cursor.Completed},
		{"ok", cursor.Completed},
		{"", cursor.Completed}, // absent or empty (docs/decisions.md C8, docs/semantics.md §15.6)
		{"failed", cursor.Failed},
		{"retry", cursor.Retry},
		{"dlq", cursor.DeadLetter},
		// Anything else is Failed; matching is case-sensitive.
		{"bogus", cursor.Failed},
		{"FAILED", cursor.Failed},
		{"Completed", cursor.Failed},
		{"OK", cursor.Failed},
		{"DLQ", cursor.Failed},
		{" ok", cursor.Failed},
		{"completed ", cursor.Failed},
		{"null", cursor.Failed},
	} {
		if got := cursor.ParseStatus(tc.wire); got != tc.want {
			t.Errorf("ParseStatus(%q) = %v, want %v", tc.wire, got, tc.want)
		}
	}
}

func TestCursor_StatusString(t *testing.T) {
	for _, tc := range []struct {
		status cursor.Status
		want   string
	}{
		{cursor.Completed, "completed"},
		{cursor.Failed, "failed"},
		{cursor.Retry, "retry"},
		{cursor.DeadLetter, "dlq"},
		{cursor.Status(200), "failed"},
	} {
		if got := tc.status.String(); got != tc.want {
			t.Errorf("Status(%d).String() = %q, want %q", tc.status, got, tc.want)
		}
		// The canonical spelling parses back to the same status.
		if got := cursor.ParseStatus(tc.want); tc.status <= cursor.DeadLetter && got != tc.status {
			t.Errorf("ParseStatus(%q) = %v, want %v", tc.want, got, tc.status)
		}
	}
}

// clampOnce runs Clamp over a batch 0..9 with nothing committed and the
// counter at 1, and checks that items are left as they were.
func clampOnce(t *testing.T, p cursor.Policy, items []cursor.Item) (cursor.Decision, []cursor.Outcome) {
	t.Helper()
	s := cursor.State{Committed: -1, SpanEnd: 9, BatchEnd: 9, RetryCount: 1}
	before := slices.Clone(items)
	out := make([]cursor.Outcome, len(items))
	d := cursor.Clamp(s, p, items, out)
	if !slices.Equal(items, before) {
		t.Fatalf("Clamp modified items: %v, was %v", items, before)
	}
	return d, out
}

func TestClamp_Precedence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		items      []cursor.Item
		wantIndex  int
		wantSignal cursor.Status
		wantAction cursor.Action
	}{
		{"dlq beats failed and retry", join(retry(5), failed(5), dlq(5), failed(5)), 2, cursor.DeadLetter, cursor.ActionDeadLetter},
		{"failed beats retry", join(retry(5), failed(5), retry(5)), 1, cursor.Failed, cursor.Release},
		{"first failed wins among failed", join(failed(5), retry(5), failed(5)), 0, cursor.Failed, cursor.Release},
		{"first dlq wins among dlq", join(dlq(5), dlq(5)), 0, cursor.DeadLetter, cursor.ActionDeadLetter},
		{"lowest offset wins over rank", join(dlq(6), retry(5)), 1, cursor.Retry, cursor.Release},
		{"completed at the poison offset does not win", join(completed(5), retry(5)), 1, cursor.Retry, cursor.Release},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, out := clampOnce(t, defaults, tc.items)
			if d.PoisonIndex != tc.wantIndex || d.Signal != tc.wantSignal || d.Action != tc.wantAction {
				t.Fatalf("got index %d signal %v action %v, want %d %v %v",
					d.PoisonIndex, d.Signal, d.Action, tc.wantIndex, tc.wantSignal, tc.wantAction)
			}
			if d.Poison != tc.items[tc.wantIndex].Offset {
				t.Fatalf("Poison = %d, want %d", d.Poison, tc.items[tc.wantIndex].Offset)
			}
			// Every item at the poison offset is Applied; above it, Superseded.
			for i, it := range tc.items {
				want := cursor.Applied
				if it.Offset > d.Poison {
					want = cursor.Superseded
				}
				if out[i] != want {
					t.Errorf("outcome[%d] (offset %d) = %v, want %v", i, it.Offset, out[i], want)
				}
			}
		})
	}
}

func TestClamp_Stale(t *testing.T) {
	s := cursor.State{Committed: 4, SpanEnd: 9, BatchEnd: 9, RetryCount: 1}
	items := join(completed(2), failed(3), retry(4), dlq(4), completed(4), completed(6))
	out := make([]cursor.Outcome, len(items))
	got := cursor.Clamp(s, defaults, items, out)
	// Stale signals are not signals: the in-span completed 6 advances.
	want := cursor.Decision{Action: cursor.Advance, Prefix: 6, Committed: 6, Poison: -1, PoisonIndex: -1,
		Signal: cursor.Completed, RetryCount: 1}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	wantOut := []cursor.Outcome{cursor.Noop, cursor.Stale, cursor.Stale, cursor.Stale, cursor.Noop, cursor.Applied}
	if !slices.Equal(out, wantOut) {
		t.Fatalf("outcomes %v, want %v", out, wantOut)
	}
}

func TestClamp_OutOfSpan(t *testing.T) {
	s := cursor.State{Committed: -1, SpanEnd: 9, BatchEnd: 9}
	items := join(completed(12), failed(10), completed(5), dlq(100))
	out := make([]cursor.Outcome, len(items))
	got := cursor.Clamp(s, defaults, items, out)
	// Items past SpanEnd neither advance the cursor nor signal.
	want := cursor.Decision{Action: cursor.Advance, Prefix: 5, Committed: 5, Poison: -1, PoisonIndex: -1,
		Signal: cursor.Completed}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	wantOut := []cursor.Outcome{cursor.OutOfSpan, cursor.OutOfSpan, cursor.Applied, cursor.OutOfSpan}
	if !slices.Equal(out, wantOut) {
		t.Fatalf("outcomes %v, want %v", out, wantOut)
	}
}

func TestClamp_Empty(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    cursor.State
	}{
		{"fresh batch", cursor.State{Committed: -1, SpanEnd: 9, BatchEnd: 9, RetryCount: 2}},
		// A call that moves nothing releases nothing, even when the committed
		// offset already reaches the batch end.
		{"batch already committed", cursor.State{Committed: 9, SpanEnd: 9, BatchEnd: 9, RetryCount: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cursor.Clamp(tc.s, defaults, nil, nil)
			want := cursor.Decision{Action: cursor.Unchanged, Prefix: tc.s.Committed, Committed: tc.s.Committed,
				Poison: -1, PoisonIndex: -1, Signal: cursor.Completed, RetryCount: 2}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestClamp_Duplicates(t *testing.T) {
	items := join(completed(3), completed(3), failed(5), failed(5), completed(3), completed(5), retry(7))
	got, out := clampOnce(t, defaults, items)
	want := cursor.Decision{Action: cursor.Release, Prefix: 3, Committed: 3, Poison: 5, PoisonIndex: 2,
		Signal: cursor.Failed, RetryCount: 2, Charged: true, LeaseReleased: true}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	wantOut := outcomeRuns(6, cursor.Applied, 1, cursor.Superseded)
	if !slices.Equal(out, wantOut) {
		t.Fatalf("outcomes %v, want %v", out, wantOut)
	}
}

func TestClamp_Unsorted(t *testing.T) {
	sorted := join(completed(span(0, 4)...), failed(5), completed(span(6, 9)...))
	reversed := slices.Clone(sorted)
	slices.Reverse(reversed)

	dSorted, outSorted := clampOnce(t, defaults, sorted)
	dReversed, outReversed := clampOnce(t, defaults, reversed)

	// The same decision, with PoisonIndex in request order.
	if dReversed.PoisonIndex != 4 {
		t.Fatalf("PoisonIndex = %d, want 4", dReversed.PoisonIndex)
	}
	dReversed.PoisonIndex = dSorted.PoisonIndex
	if dReversed != dSorted {
		t.Fatalf("reversed %+v, sorted %+v", dReversed, dSorted)
	}
	slices.Reverse(outReversed)
	if !slices.Equal(outReversed, outSorted) {
		t.Fatalf("outcomes reversed %v, sorted %v", outReversed, outSorted)
	}
}

func TestClamp_ChargedOncePerCall(t *testing.T) {
	items := join(failed(7), failed(1), retry(3), failed(5), failed(1), dlq(9))
	got, _ := clampOnce(t, defaults, items)
	if !got.Charged || got.RetryCount != 2 {
		t.Fatalf("Charged %v, RetryCount %d; want true, 2", got.Charged, got.RetryCount)
	}
}

func TestClamp_CounterReset(t *testing.T) {
	exhausted := cursor.Policy{RetryLimit: 1, DeadLetter: true}
	for _, tc := range []struct {
		name   string
		policy cursor.Policy
		items  []cursor.Item
		want   uint32 // the counter starts at 1
	}{
		{"complete resets", defaults, completed(9), 0},
		{"dead-letter resets", exhausted, failed(0), 0},
		{"dlq resets", defaults, dlq(0), 0},
		{"drop resets", cursor.Policy{RetryLimit: 1}, failed(0), 0},
		{"partial commit keeps", defaults, completed(4), 1},
		{"retry keeps", defaults, join(completed(4), retry(5)), 1},
		{"nothing in span keeps", defaults, completed(12), 1},
		{"failed charges", defaults, join(completed(4), failed(5)), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := clampOnce(t, tc.policy, tc.items)
			if got.RetryCount != tc.want {
				t.Fatalf("RetryCount = %d (action %v), want %d", got.RetryCount, got.Action, tc.want)
			}
		})
	}
}

// TestClamp_ExpiryNeverCharges: expiry is never a Clamp call, and the calls
// that do happen without a Failed signal never charge, however many there are.
func TestClamp_ExpiryNeverCharges(t *testing.T) {
	p := cursor.Policy{RetryLimit: 1, DeadLetter: true}
	s := cursor.State{Committed: -1, SpanEnd: 0, BatchEnd: 0}
	out := make([]cursor.Outcome, 1)
	for i := range 1000 {
		d := cursor.Clamp(s, p, retry(0), out)
		if d.Charged || d.RetryCount != 0 || d.Action != cursor.Release {
			t.Fatalf("retry %d: %+v", i, d)
		}
		s.Committed, s.RetryCount = d.Committed, d.RetryCount
	}
	d := cursor.Clamp(s, p, failed(0), out)
	if d.Action != cursor.Release || d.RetryCount != 1 {
		t.Fatalf("first failed after 1000 retries: %+v, want a charged release", d)
	}
}

func TestClamp_DeadLetterStatusIgnoresPolicy(t *testing.T) {
	// Budget left and dead-lettering off: an explicit dlq still dead-letters,
	// and does not charge.
	got, _ := clampOnce(t, cursor.Policy{RetryLimit: 3, DeadLetter: false}, join(completed(0), dlq(1)))
	want := cursor.Decision{Action: cursor.ActionDeadLetter, Prefix: 0, Committed: 1, Poison: 1, PoisonIndex: 1,
		Signal: cursor.DeadLetter, RetryCount: 0, LeaseReleased: true}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestClamp_LeaselessSpan: a lease-less ack may name offsets past the leased
// batch (SpanEnd is the partition's last offset, docs/decisions.md C10).
func TestClamp_LeaselessSpan(t *testing.T) {
	s := cursor.State{Committed: -1, SpanEnd: 20, BatchEnd: 4, RetryCount: 1}
	out := make([]cursor.Outcome, 10)

	got := cursor.Clamp(s, defaults, completed(span(0, 7)...), out[:8])
	want := cursor.Decision{Action: cursor.Complete, Prefix: 7, Committed: 7, Poison: -1, PoisonIndex: -1,
		Signal: cursor.Completed, RetryCount: 0, LeaseReleased: true}
	if got != want {
		t.Fatalf("past the batch: got %+v, want %+v", got, want)
	}

	// The signal decides the counter even when the prefix reaches BatchEnd.
	got = cursor.Clamp(s, defaults, join(completed(span(0, 5)...), failed(6)), out[:7])
	want = cursor.Decision{Action: cursor.Release, Prefix: 5, Committed: 5, Poison: 6, PoisonIndex: 6,
		Signal: cursor.Failed, RetryCount: 2, Charged: true, LeaseReleased: true}
	if got != want {
		t.Fatalf("failure past the batch: got %+v, want %+v", got, want)
	}
}

func TestClamp_UnknownStatusValueIsFailed(t *testing.T) {
	items := []cursor.Item{{Offset: 0, Status: cursor.Completed}, {Offset: 1, Status: cursor.Status(42)}}
	got, _ := clampOnce(t, defaults, items)
	if got.Signal != cursor.Failed || got.PoisonIndex != 1 || !got.Charged {
		t.Fatalf("got %+v, want a Failed signal at index 1", got)
	}
}

func TestClamp_Allocs(t *testing.T) {
	items := join(completed(span(0, 40)...), failed(41), retry(41), completed(span(42, 99)...))
	out := make([]cursor.Outcome, len(items))
	s := cursor.State{Committed: -1, SpanEnd: 99, BatchEnd: 99, RetryCount: 1}
	var d cursor.Decision
	if n := testing.AllocsPerRun(100, func() { d = cursor.Clamp(s, defaults, items, out) }); n != 0 {
		t.Errorf("Clamp allocates %v times per call", n)
	}
	_ = d
	wire := []string{"completed", "success", "acked", "ok", "", "failed", "retry", "dlq", "bogus"}
	var st cursor.Status
	if n := testing.AllocsPerRun(100, func() {
		for _, w := range wire {
			st = cursor.ParseStatus(w)
		}
	}); n != 0 {
		t.Errorf("ParseStatus allocates %v times per call", n)
	}
	_ = st
}
