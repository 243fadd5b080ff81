package command

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/wire"
)

// A queue's move between groups, as the directory records it
// (ARCHITECTURE.md "Step 2, moving a queue"). Its values, beside
// directory.go's:
//
//	epoch/<queue>   the placement's epoch (decimal); absent: 1
//	move/<queue>    the move under way: from,to,epoch,startedAt (decimal,
//	                startedAt in µs of the BeginMove's stamp); "" when none
//
// BeginMove records a move; EndMove flips the placement to its target with
// the next epoch and clears the record; AbortMove clears the record and
// leaves the placement. Each answers what is stored when proposed again,
// so a mover that retries after a timeout, or a node that takes over,
// changes nothing twice.
//
// An undone move leaves the placement's epoch as it was, so the next
// attempt at the same move records the same (queue, to, epoch). An EndMove
// or AbortMove of the first attempt that applies after the second began (a
// retry whose first try was applied and its answer lost, or a directory
// leader undoing what its replica, behind, still shows) would end or undo
// the second: an undo that kills a healthy move, a flip before its copy
// is complete. So from command version 4 both name their attempt by its
// BeginMove's stamp (StartedAt, the record's fourth field) and change
// nothing for another; with 0 (a proposer while the cluster runs an older
// version) they match any attempt at the epoch, as before.

// Move is a move under way.
type Move struct {
	Queue    string
	From, To uint32
	// Epoch is the placement's epoch when the move began; it flips to
	// Epoch+1.
	Epoch     uint64
	StartedAt int64 // µs, the BeginMove's stamp
}

// BeginMove records the move of Queue to group To.
type BeginMove struct {
	Queue string
	To    uint32
}

// Apply records the move. Value: uint64, the placement's epoch the move
// starts from (it flips to the next). Err ErrInvalid for a queue not
// placed, a target that is its group or past the count, and a queue
// moving elsewhere already; the same move again answers its epoch.
func (c BeginMove) Apply(b *engine.Batch, st engine.Stamp) engine.Result {
	v := ClusterValues(b.ClusterValue)
	refuse := func(why string, args ...any) engine.Result {
		return engine.Result{Value: uint64(0), Err: fmt.Errorf("%w: move of %q: %s", engine.ErrInvalid, c.Queue, fmt.Sprintf(why, args...))}
	}
	from, n := Placement(v, c.Queue), GroupCount(v)
	if m, ok := MoveOf(v, c.Queue); ok {
		if m.To == c.To {
			return engine.Result{Value: m.Epoch}
		}
		return refuse("it is moving to group %d already", m.To)
	}
	switch {
	case from == 0:
		return refuse("the queue is not placed")
	case c.To == 0 || c.To > n:
		return refuse("group %d does not exist (the cluster has %d)", c.To, n)
	case c.To == from:
		return refuse("it lives in group %d already", from)
	}
	ep := Epoch(v, c.Queue)
	b.SetClusterValue(moveKey(c.Queue), fmt.Sprintf("%d,%d,%d,%d", from, c.To, ep, st.Time))
	return engine.Result{Value: ep}
}

// EndMove flips the placement of a move under way: the queue lives in To
// from epoch Epoch+1.
type EndMove struct {
	Queue string
	To    uint32
	Epoch uint64
	// StartedAt names the attempt (Move.StartedAt); 0: any (see above).
	StartedAt int64
}

// CommandVersion is 4 for an EndMove that names its attempt (command.Versioned).
func (c EndMove) CommandVersion() uint8 { return attemptVersion(c.StartedAt) }

// attemptVersion is the command version of a move's step that names its
// attempt by startedAt (4), or not (2, its row's).
func attemptVersion(startedAt int64) uint8 {
	if startedAt != 0 {
		return 4
	}
	return 2
}

// appendAttempt writes a move step's attempt after its fields (command
// version 4), and nothing for 0: a step that names none is, byte for
// byte, what a binary of command version 2 writes and reads.
func appendAttempt(w *wire.Writer, startedAt int64) {
	if startedAt != 0 {
		w.Uvarint(uint64(startedAt))
	}
}

// readAttempt reads what appendAttempt wrote: 0 when the body has ended.
func readAttempt(r *wire.Reader) int64 {
	if r.Len() == 0 {
		return 0
	}
	return int64(r.Uvarint())
}

// sameAttempt reports whether a step naming the attempt startedAt (0: any)
// is for the move m.
func sameAttempt(m Move, startedAt int64) bool { return startedAt == 0 || m.StartedAt == startedAt }

// Apply flips the placement. Value: uint64, the new epoch. Err ErrInvalid
// when no such move is under way (aborted, or never begun); a move that
// ended already answers its epoch.
func (c EndMove) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	v := ClusterValues(b.ClusterValue)
	m, ok := MoveOf(v, c.Queue)
	if !ok || m.To != c.To || m.Epoch != c.Epoch || !sameAttempt(m, c.StartedAt) {
		if !ok && Placement(v, c.Queue) == c.To && Epoch(v, c.Queue) == c.Epoch+1 {
			return engine.Result{Value: c.Epoch + 1} // ended already
		}
		return engine.Result{Value: uint64(0), Err: fmt.Errorf("%w: move of %q to group %d at epoch %d is not under way", engine.ErrInvalid, c.Queue, c.To, c.Epoch)}
	}
	b.SetClusterValue(placeKey(c.Queue), strconv.FormatUint(uint64(m.To), 10))
	b.SetClusterValue(epochKey(c.Queue), strconv.FormatUint(m.Epoch+1, 10))
	if k := Placed(b.ClusterValue, m.From); k > 0 {
		b.SetClusterValue(placedKey(m.From), strconv.FormatUint(k-1, 10))
	}
	b.SetClusterValue(placedKey(m.To), strconv.FormatUint(Placed(b.ClusterValue, m.To)+1, 10))
	b.SetClusterValue(moveKey(c.Queue), "")
	return engine.Result{Value: m.Epoch + 1}
}

// AbortMove clears the record of a move that began at epoch Epoch.
type AbortMove struct {
	Queue string
	Epoch uint64
	// StartedAt names the attempt (Move.StartedAt); 0: any (see above).
	StartedAt int64
}

// CommandVersion is 4 for an AbortMove that names its attempt (command.Versioned).
func (c AbortMove) CommandVersion() uint8 { return attemptVersion(c.StartedAt) }

// Apply clears the record. Value: bool, whether there was one.
func (c AbortMove) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	m, ok := MoveOf(b.ClusterValue, c.Queue)
	if !ok || m.Epoch != c.Epoch || !sameAttempt(m, c.StartedAt) {
		return engine.Result{Value: false}
	}
	b.SetClusterValue(moveKey(c.Queue), "")
	return engine.Result{Value: true}
}

// Epoch is the epoch of queue's placement: 1 until it first moves.
func Epoch(v ClusterValues, queue string) uint64 {
	if n, err := strconv.ParseUint(v(epochKey(queue)), 10, 64); err == nil && n > 0 {
		return n
	}
	return 1
}

// MoveOf returns the move of queue under way, if any.
func MoveOf(v ClusterValues, queue string) (Move, bool) {
	f := strings.Split(v(moveKey(queue)), ",")
	if len(f) != 4 {
		return Move{}, false
	}
	from, to := parseGroup(f[0]), parseGroup(f[1])
	ep, err1 := strconv.ParseUint(f[2], 10, 64)
	at, err2 := strconv.ParseInt(f[3], 10, 64)
	if from == 0 || to == 0 || err1 != nil || err2 != nil {
		return Move{}, false
	}
	return Move{Queue: queue, From: from, To: to, Epoch: ep, StartedAt: at}, true
}

// MovePrefix is the prefix of the directory's move records: the queues of
// the names engine.Engine.ClusterNames lists under it are moving.
const MovePrefix = "move/"

func moveKey(queue string) string  { return MovePrefix + queue }
func epochKey(queue string) string { return "epoch/" + queue }
