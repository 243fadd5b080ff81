package cursor

// Offset is a position in a partition's log: the first message is 0, -1 means
// "before the first".
type Offset int64

// Item is one resolved ack item: the offset its transaction id resolved to and
// its normalised status.
type Item struct {
	Offset Offset
	Status Status
}

// State is what the clamp reads from the cursor row, as the caller has
// prepared it.
type State struct {
	// Committed is the last committed offset, -1 if none.
	Committed Offset
	// SpanEnd is the highest offset an item may name: the leased batch end for
	// an ack that holds the lease, the partition's last offset for a
	// lease-less ack (docs/decisions.md C10).
	SpanEnd Offset
	// BatchEnd is where the batch completes: the leased batch end, or SpanEnd
	// when no batch is recorded.
	BatchEnd Offset
	// RetryCount is batch_retry_count, the retry budget counter of the
	// (partition, group) row.
	RetryCount uint32
}

// Policy is the queue configuration the clamp needs.
type Policy struct {
	// RetryLimit is the queue's retryLimit (default 3): how many Failed
	// signals are redelivered before the terminal branch.
	RetryLimit uint32
	// DeadLetter is true when dead-lettering is enabled (deadLetterQueue ||
	// dlqAfterMaxRetries). It governs only an exhausted budget; an explicit
	// DeadLetter status always dead-letters.
	DeadLetter bool
}

// Outcome is how one item of an ack call is answered.
type Outcome uint8

const (
	// Applied: in span and at or below the poison offset (any in-span item
	// when there is no signal). The item took part in the decision.
	Applied Outcome = iota
	// Superseded: in span but above the poison offset, whatever its status.
	// Not applied; it redelivers. Answered success:true, as Queen does.
	Superseded
	// Noop: Completed at or below the old committed offset. Answered
	// success:true, noop:true.
	Noop
	// Stale: Failed, Retry or DeadLetter at or below the old committed
	// offset. Answered success:false, "already committed".
	Stale
	// OutOfSpan: above SpanEnd. Answered success:false; nothing applied.
	OutOfSpan
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Superseded:
		return "superseded"
	case Noop:
		return "noop"
	case Stale:
		return "stale"
	case OutOfSpan:
		return "out-of-span"
	default:
		return "unknown"
	}
}

// Action is what an ack call does to the cursor row as a whole.
type Action uint8

const (
	// Unchanged: no in-span item moved anything. Cursor, lease and counter
	// stay as they are.
	Unchanged Action = iota
	// Advance: no signal, the prefix moved but is below BatchEnd. Commit the
	// prefix, keep the lease, leave the counter.
	Advance
	// Complete: no signal, the prefix reached BatchEnd. Commit, release the
	// lease, reset the counter to 0.
	Complete
	// Release: the head signal is Retry, or Failed with budget left. Commit
	// the prefix and release the lease; the counter goes up by 1 only for
	// Failed (Decision.Charged).
	Release
	// ActionDeadLetter: terminal. Commit the prefix, file the poison in the
	// dead-letter queue, set committed to the poison offset, reset the
	// counter, release the lease.
	ActionDeadLetter
	// Drop: terminal with dead-lettering off. Set committed to the poison
	// offset without filing it, reset the counter, release the lease.
	Drop
)

// String names the action.
func (a Action) String() string {
	switch a {
	case Unchanged:
		return "unchanged"
	case Advance:
		return "advance"
	case Complete:
		return "complete"
	case Release:
		return "release"
	case ActionDeadLetter:
		return "dead-letter"
	case Drop:
		return "drop"
	default:
		return "unknown"
	}
}

// Decision is the result of one ack call.
type Decision struct {
	// Action is what happens to the row.
	Action Action
	// Prefix is the committed prefix: the highest in-span Completed offset
	// strictly below the poison offset (or the highest in-span Completed
	// offset if there is no signal); State.Committed if there is none.
	Prefix Offset
	// Committed is the committed offset after the action: Prefix, except for
	// ActionDeadLetter and Drop, where it is Poison.
	Committed Offset
	// Poison is the offset of the head signal, -1 if there is none. Test
	// PoisonIndex, not Poison, for the presence of a signal.
	Poison Offset
	// PoisonIndex is the index in items of the item whose status won at the
	// poison offset (DeadLetter > Failed > Retry, first occurrence), -1 if
	// there is no signal. It carries dlq:true or dropped:true (docs/decisions.md C7).
	PoisonIndex int
	// Signal is the status of the head signal, Completed if there is none.
	Signal Status
	// RetryCount is the new counter value.
	RetryCount uint32
	// Charged is true when this call charged the counter.
	Charged bool
	// LeaseReleased is true for Complete, Release, ActionDeadLetter and Drop.
	LeaseReleased bool
}

// Clamp decides one ack call for one (partition, group, lease), as described
// in the package documentation. items are in request order and are not
// modified. outcomes must have len(items); Clamp fills outcomes[i] for
// items[i]. Clamp does no I/O and does not allocate.
func Clamp(s State, p Policy, items []Item, outcomes []Outcome) Decision {
	outcomes = outcomes[:len(items)]

	// Head signal: the lowest in-span offset acked with anything but
	// Completed; on a tie the higher rank wins, then the earlier item.
	head := -1
	poison := Offset(-1)
	signal := Completed
	for i, it := range items {
		st := it.Status.normal()
		if st == Completed || it.Offset <= s.Committed || it.Offset > s.SpanEnd {
			continue
		}
		if head < 0 || it.Offset < poison || (it.Offset == poison && st.rank() > signal.rank()) {
			head, poison, signal = i, it.Offset, st
		}
	}

	// Prefix and per-item outcomes.
	prefix := s.Committed
	for i, it := range items {
		switch {
		case it.Offset <= s.Committed:
			if it.Status.normal() == Completed {
				outcomes[i] = Noop
			} else {
				outcomes[i] = Stale
			}
		case it.Offset > s.SpanEnd:
			outcomes[i] = OutOfSpan
		case head >= 0 && it.Offset > poison:
			outcomes[i] = Superseded
		default:
			outcomes[i] = Applied
			if it.Status.normal() == Completed && it.Offset > prefix && (head < 0 || it.Offset < poison) {
				prefix = it.Offset
			}
		}
	}

	// The decision is built from scalars and returned in one literal: a
	// Decision local lives in memory (too many fields for registers) and
	// copying it out cost more than the whole decision for one item.
	action, committed, retry, charged := Unchanged, prefix, s.RetryCount, false
	switch {
	case head < 0:
		switch {
		case prefix == s.Committed:
		case prefix < s.BatchEnd:
			action = Advance
		default:
			action, retry = Complete, 0
		}
	case signal == Retry:
		action = Release
	case signal == Failed && s.RetryCount < p.RetryLimit:
		action, retry, charged = Release, s.RetryCount+1, true
	case signal == Failed && !p.DeadLetter:
		action, committed, retry = Drop, poison, 0
	default: // DeadLetter, or Failed with the budget exhausted
		action, committed, retry = ActionDeadLetter, poison, 0
	}
	return Decision{
		Action:        action,
		Prefix:        prefix,
		Committed:     committed,
		Poison:        poison,
		PoisonIndex:   head,
		Signal:        signal,
		RetryCount:    retry,
		Charged:       charged,
		LeaseReleased: action != Unchanged && action != Advance,
	}
}
