package engine

// ExtendResult reports a lease renewal.
type ExtendResult struct {
	Renewed   int   // rows whose live lease was extended
	ExpiresAt int64 // the earliest new expiry among them (µs), 0 when none
}

// extendLease renews every (partition, group) row holding a live lease with
// this id to max(current expiry, now + seconds). It never shortens a lease
// and cannot revive an expired one (docs/semantics.md §5).
func (b *Batch) extendLease(st Stamp, lease ID, seconds int64) ExtendResult {
	if seconds <= 0 {
		seconds = defaultLeaseSeconds
	}
	var res ExtendResult
	for _, ref := range b.e.leases[lease] {
		r := ref.p.cursors[ref.group]
		if r == nil || r.rec.Lease != lease || !r.leaseLive(st.Time) {
			continue
		}
		r.rec.LeaseExpiresAt = max(r.rec.LeaseExpiresAt, st.Time+seconds*secondUS)
		b.touchRow(r)
		if res.Renewed == 0 || r.rec.LeaseExpiresAt < res.ExpiresAt {
			res.ExpiresAt = r.rec.LeaseExpiresAt
		}
		res.Renewed++
	}
	return res
}
