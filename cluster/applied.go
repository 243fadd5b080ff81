package cluster

import (
	"context"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/queenmq/queen/raft"
)

// AppliedHeader names, on the answer to a request one node sent another,
// the index the answering node had applied in each group it serves. Its
// value is written (AppendApplied) and read (ParseApplied) here only, on
// both of its paths: the answer to a command on ProposePath (Client.Forward
// reads it) and the answer to a request a node relayed whole (server/relay:
// Reads.Stamp writes it, Reads.NoteApplied reads it).
//
// Its format, part of the wire between nodes — never change it, old nodes
// write and read the same (a rolling upgrade mixes them):
//
//	value  = [ pair *( "," pair ) ]
//	pair   = group ":" index
//	group  = decimal uint32, the Raft group (Directory is 0)
//	index  = decimal uint64, the index the answering node had applied in
//	         that group when it answered
//
// Written as ASCII digits with no sign, padding or spaces, one pair for
// each group the answering node serves from its own replica, in no
// promised order. An empty value names no group. A reader skips a pair it
// cannot parse (no ":", a number out of range or not decimal) and keeps
// the others: an index is only a floor to wait for, and a missing one
// waits for nothing.
const AppliedHeader = "X-Queen-Applied"

// AppendApplied appends group g's applied index to b, an AppliedHeader
// value being written, with the "," before it when b names a group
// already.
func AppendApplied(b []byte, g uint32, index uint64) []byte {
	if len(b) > 0 {
		b = append(b, ',')
	}
	b = strconv.AppendUint(b, uint64(g), 10)
	b = append(b, ':')
	return strconv.AppendUint(b, index, 10)
}

// ParseApplied yields each (group, index) pair of an AppliedHeader value
// in the order it names them, skipping any it cannot parse.
func ParseApplied(v []byte) iter.Seq2[uint32, uint64] {
	return func(yield func(uint32, uint64) bool) {
		if len(v) == 0 {
			return
		}
		for part := range strings.SplitSeq(string(v), ",") {
			gs, is, ok := strings.Cut(part, ":")
			if !ok {
				continue
			}
			g, err := strconv.ParseUint(gs, 10, 32)
			if err != nil {
				continue
			}
			idx, err := strconv.ParseUint(is, 10, 64)
			if err != nil {
				continue
			}
			if !yield(uint32(g), idx) {
				return
			}
		}
	}
}

// AppliedIn reads group g's index from an AppliedHeader value: the first
// pair that names g, 0 when none does.
func AppliedIn(v []byte, g uint32) uint64 {
	for pg, idx := range ParseApplied(v) {
		if pg == g {
			return idx
		}
	}
	return 0
}

// AwaitApplied waits until n has applied index, until deadline at the
// latest (or ctx's end), and answers n.WaitApplied's error when it gave
// up. It is the one wait for a replica to catch up with what its leader
// had applied: the Host's, after a command it forwarded (forward), and
// the server's, after a write it relayed (server/relay, Reads.Settle).
// Each caller counts or logs a wait that gave up as it needs; the write
// is done either way.
//
// It returns at once for index 0 (nothing to wait for) and when n has
// applied as far already. Otherwise, when nudge is set and n does not
// lead its group, nudge runs in its own goroutine with the wait's
// context, which ends when the wait does: a follower asks its leader
// something whose answer it drops (a read index), only to have the
// leader publish its commit index (raft.Node.Publish) within a round trip.
func AwaitApplied(ctx context.Context, n *raft.Node, index uint64, deadline time.Time, nudge func(context.Context)) error {
	if index == 0 || n.Applied() >= index {
		return nil
	}
	c, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if nudge != nil && !n.IsLeader() {
		go nudge(c)
	}
	return n.WaitApplied(c, index)
}
