package engine

import (
	"fmt"
	"slices"

	"github.com/queenmq/queen/engine/keyspace"
)

// checkTouched is the per-commit invariant check of a build with the
// invariants tag (internal/invariants): after a batch commits, every
// partition and cursor row it wrote must be consistent in memory, equal on
// disk, and indexed by its lease. Check walks the whole store; this walks
// only what one batch changed, so tests can afford it on every commit. A
// violation panics: the batch that broke the model is the one on the stack.
func (e *Engine) checkTouched(parts []*partition, rows []*row) {
	var problems []string
	seen := map[*partition]bool{}
	check := func(p *partition) {
		if seen[p] || e.parts[p.id] != p {
			return // checked already, or deleted by the batch
		}
		seen[p] = true
		problems = append(problems, partitionProblems(p)...)
		// A read that fails (an injected I/O error in the fault tests) is a
		// fault for the next batch to meet, not a broken invariant.
		if v, err := e.get(keyspace.Partition(p.id)); err != nil {
			// not compared
		} else if rec, err := keyspace.DecodePartition(v); err != nil || rec != p.rec {
			problems = append(problems, fmt.Sprintf("partition %x: memory %+v, disk %+v (%v)", p.id, p.rec, rec, err))
		}
		for _, g := range p.sortedGroups() {
			r := p.cursors[g]
			if r.rec.Lease != (ID{}) && !slices.Contains(e.leases[r.rec.Lease], leaseRef{p, g}) {
				problems = append(problems, fmt.Sprintf("cursor %x/%s: lease %x not in the lease index", p.id, g, r.rec.Lease))
			}
		}
	}
	for _, p := range parts {
		check(p)
	}
	for _, r := range rows {
		if r.deleted || e.parts[r.p.id] != r.p {
			continue
		}
		check(r.p)
		if v, err := e.get(keyspace.Cursor(r.p.id, r.group)); err != nil {
			// not compared (above)
		} else if rec, err := keyspace.DecodeCursor(v); err != nil || rec != r.rec {
			problems = append(problems, fmt.Sprintf("cursor %x/%s: memory %+v, disk %+v (%v)", r.p.id, r.group, r.rec, rec, err))
		}
	}
	if len(problems) > 0 {
		panic(fmt.Sprintf("engine: invariant: after commit at applied %d: %v", e.applied, problems))
	}
}

// get reads one committed value.
func (e *Engine) get(key []byte) ([]byte, error) {
	v, closer, err := e.db.Get(key)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return slices.Clone(v), nil
}

// partitionProblems checks what the model alone says of a partition: its
// offsets, and each cursor row against them (Check and checkTouched).
func partitionProblems(p *partition) []string {
	var out []string
	if p.rec.Start < 0 || p.rec.Start > p.rec.Next {
		out = append(out, fmt.Sprintf("partition %x: start %d, next %d", p.id, p.rec.Start, p.rec.Next))
	}
	for _, g := range p.sortedGroups() {
		r := p.cursors[g]
		switch {
		case r.rec.Committed < -1 || r.rec.Committed > p.rec.Next-1:
			out = append(out, fmt.Sprintf("cursor %x/%s: committed %d outside [-1, %d]", p.id, g, r.rec.Committed, p.rec.Next-1))
		case r.rec.Lease != (ID{}) && (r.rec.BatchEnd <= r.rec.Committed || r.rec.BatchEnd > p.rec.Next-1):
			out = append(out, fmt.Sprintf("cursor %x/%s: leased batch end %d with committed %d, last %d", p.id, g, r.rec.BatchEnd, r.rec.Committed, p.rec.Next-1))
		case r.rec.Lease == (ID{}) && r.rec.BatchEnd != -1:
			out = append(out, fmt.Sprintf("cursor %x/%s: batch end %d without a lease", p.id, g, r.rec.BatchEnd))
		}
	}
	return out
}
