package cursor

// Status is the normalised status of one ack item (docs/semantics.md §6.2, docs/decisions.md
// docs/decisions.md C8).
type Status uint8

// The four statuses an ack can carry.
const (
	// Completed advances the cursor to the item's offset. Wire: "completed",
	// "success", "acked", "ok", absent or "".
	Completed Status = iota
	// Failed clamps the cursor below the item and charges the retry budget
	// once. Wire: "failed" and any status not recognised.
	Failed
	// Retry clamps the cursor below the item without charging the budget.
	// Wire: "retry".
	Retry
	// DeadLetter clamps the cursor below the item and files it in the
	// dead-letter queue at once. Wire: "dlq".
	DeadLetter
)

// ParseStatus normalises a wire status per docs/decisions.md C8. Matching is exact
// and case-sensitive; anything unrecognised is Failed. The caller passes ""
// for an absent status. It does not allocate.
func ParseStatus(s string) Status {
	switch s {
	case "completed", "success", "acked", "ok", "":
		return Completed
	case "retry":
		return Retry
	case "dlq":
		return DeadLetter
	default:
		return Failed
	}
}

// String returns the canonical wire spelling: "completed", "failed", "retry"
// or "dlq". A value outside the four constants is treated as Failed and
// prints as "failed".
func (s Status) String() string {
	switch s.normal() {
	case Completed:
		return "completed"
	case Retry:
		return "retry"
	case DeadLetter:
		return "dlq"
	default:
		return "failed"
	}
}

// normal maps a value outside the four constants to Failed.
func (s Status) normal() Status {
	if s > DeadLetter {
		return Failed
	}
	return s
}

// rank orders the signals that may share one offset: DeadLetter beats Failed
// beats Retry. Completed is no signal and ranks 0.
func (s Status) rank() int {
	switch s.normal() {
	case Completed:
		return 0
	case Retry:
		return 1
	case Failed:
		return 2
	default: // DeadLetter
		return 3
	}
}
