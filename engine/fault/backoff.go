package fault

import "time"

// Backoff is a doubling delay between Min and Max. The zero value is not
// useful; set Min and Max.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
}

// Next returns the delay to wait now and doubles the following one.
func (b *Backoff) Next() time.Duration {
	if b.next < b.Min {
		b.next = b.Min
	}
	d := b.next
	b.next = min(2*b.next, b.Max)
	return d
}

// Reset makes the next delay Min again.
func (b *Backoff) Reset() { b.next = 0 }
