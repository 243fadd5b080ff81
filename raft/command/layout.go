package command

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/internal/wire"
)

// The directory's record of where the data groups live (issue 30, "R of
// N"): with more nodes than each group has voters, a node routes a command
// for a group it is not a member of to the leader this record names, and a
// read to one of its voters. Its values:
//
//	replicas        R, the voters each data group should have (decimal)
//	layout/<g>      term ";" leader ";" voters joined by "," (sorted)
//
// A group's leader reports its voters and itself (GroupLayout) whenever
// the record differs from what it sees; a report from an older term than
// the one stored is ignored, so a deposed leader's late report cannot
// undo its successor's.

// Replicas records R, once: the first count applied stays.
type Replicas struct {
	Count uint32
}

// Apply stores Count unless a count is stored. Value: uint32, the stored
// count; Err ErrInvalid for 0.
func (c Replicas) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	if n := ReplicaCount(b.ClusterValue); n != 0 {
		return engine.Result{Value: n}
	}
	if c.Count == 0 {
		return engine.Result{Value: uint32(0), Err: fmt.Errorf("%w: a group needs at least one voter", engine.ErrInvalid)}
	}
	b.SetClusterValue(replicasKey, strconv.FormatUint(uint64(c.Count), 10))
	return engine.Result{Value: c.Count}
}

// ReplicaCount is the directory's R, 0 before Replicas applied (a cluster
// whose every node hosts every group).
func ReplicaCount(v ClusterValues) uint32 { return parseGroup(v(replicasKey)) }

// GroupLayout is a data group's leader reporting the group's voters and
// itself at its term.
type GroupLayout struct {
	Group  uint32
	Term   uint64
	Leader string
	Voters []string
}

// Apply records the report unless the record is from a later term, or
// says the same. Value: bool, whether the record changed; Err ErrInvalid
// for the directory or a group past the count.
func (c GroupLayout) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	n := GroupCount(b.ClusterValue)
	if c.Group == 0 || c.Group > n {
		return engine.Result{Value: false, Err: fmt.Errorf("%w: group %d is not a data group (the cluster has %d)", engine.ErrInvalid, c.Group, n)}
	}
	old := LayoutOf(b.ClusterValue, c.Group)
	voters := slices.Sorted(slices.Values(c.Voters))
	if old.Term > c.Term || (old.Term == c.Term && old.Leader == c.Leader && slices.Equal(old.Voters, voters)) {
		return engine.Result{Value: false}
	}
	b.SetClusterValue(layoutKey(c.Group), strconv.FormatUint(c.Term, 10)+";"+c.Leader+";"+strings.Join(voters, ","))
	return engine.Result{Value: true}
}

// LayoutOf is group g's record, the zero GroupLayout (Group set) while it
// has none.
func LayoutOf(v ClusterValues, g uint32) GroupLayout {
	out := GroupLayout{Group: g}
	term, rest, ok := strings.Cut(v(layoutKey(g)), ";")
	if !ok {
		return out
	}
	leader, voters, _ := strings.Cut(rest, ";")
	out.Term, _ = strconv.ParseUint(term, 10, 64)
	out.Leader = leader
	if voters != "" {
		out.Voters = strings.Split(voters, ",")
	}
	return out
}

const replicasKey = "replicas"

func layoutKey(g uint32) string { return "layout/" + strconv.FormatUint(uint64(g), 10) }

func appendGroupLayout(w *wire.Writer, c GroupLayout) {
	w.Uvarint(uint64(c.Group))
	w.Uvarint(c.Term)
	w.Str(c.Leader)
	w.Uvarint(uint64(len(c.Voters)))
	for _, v := range c.Voters {
		w.Str(v)
	}
}

func readGroupLayout(r *wire.Reader) GroupLayout {
	c := GroupLayout{Group: uint32(r.Uvarint()), Term: r.Uvarint(), Leader: r.Str()}
	if n := r.Count(1); n > 0 {
		c.Voters = make([]string, n)
		for i := range c.Voters {
			c.Voters[i] = r.Str()
		}
	}
	return c
}

// ReplicaStep is the directory's record of the one step of a placement
// plan (raft/placement) a data group is taking: it gains a voter on Add,
// then loses the one on Remove. Its value, under step/<g>:
//
//	add ";" remove ";" ready (0 or 1)
//
// The directory's leader begins a step (StepBegin, refused while the group
// has one); the node named by Add says its replica has caught up
// (StepReady); the group's leader, which carries the step out, ends it
// (StepDone). A phase for a step other than the one recorded changes
// nothing, so a late or repeated one is harmless.
type ReplicaStep struct {
	Group  uint32
	Add    string
	Remove string
	Phase  uint8
}

// The phases of a ReplicaStep.
const (
	StepBegin uint8 = iota
	StepReady
	StepDone
)

// Apply records the phase. Value: bool, whether the record changed; Err
// ErrInvalid for a group that is not a data group, a step that adds and
// removes the same node or neither, or an unknown phase.
func (c ReplicaStep) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	n := GroupCount(b.ClusterValue)
	switch {
	case c.Group == 0 || c.Group > n:
		return engine.Result{Value: false, Err: fmt.Errorf("%w: group %d is not a data group (the cluster has %d)", engine.ErrInvalid, c.Group, n)}
	case c.Add == c.Remove:
		return engine.Result{Value: false, Err: fmt.Errorf("%w: a replica step must add or remove a node, not both the same", engine.ErrInvalid)}
	case c.Phase > StepDone:
		return engine.Result{Value: false, Err: fmt.Errorf("%w: replica step phase %d", engine.ErrInvalid, c.Phase)}
	}
	old, pending := StepOf(b.ClusterValue, c.Group)
	same := pending && old.Add == c.Add && old.Remove == c.Remove
	switch {
	case c.Phase == StepBegin && !pending:
		b.SetClusterValue(stepKey(c.Group), c.Add+";"+c.Remove+";0")
	case c.Phase == StepReady && same && old.Phase != StepReady:
		b.SetClusterValue(stepKey(c.Group), c.Add+";"+c.Remove+";1")
	case c.Phase == StepDone && same:
		b.SetClusterValue(stepKey(c.Group), "")
	default:
		return engine.Result{Value: false}
	}
	return engine.Result{Value: true}
}

// StepOf is group g's step under way (Phase StepBegin or StepReady), and
// whether it has one.
func StepOf(v ClusterValues, g uint32) (ReplicaStep, bool) {
	s := v(stepKey(g))
	if s == "" {
		return ReplicaStep{Group: g}, false
	}
	parts := strings.SplitN(s, ";", 3)
	if len(parts) != 3 {
		return ReplicaStep{Group: g}, false
	}
	st := ReplicaStep{Group: g, Add: parts[0], Remove: parts[1]}
	if parts[2] == "1" {
		st.Phase = StepReady
	}
	return st, true
}

func stepKey(g uint32) string { return "step/" + strconv.FormatUint(uint64(g), 10) }

func appendReplicaStep(w *wire.Writer, c ReplicaStep) {
	w.Uvarint(uint64(c.Group))
	w.Str(c.Add)
	w.Str(c.Remove)
	w.U8(c.Phase)
}

func readReplicaStep(r *wire.Reader) ReplicaStep {
	c := ReplicaStep{Group: uint32(r.Uvarint()), Add: r.Str(), Remove: r.Str(), Phase: r.U8()}
	if c.Phase > StepDone {
		r.Fail("replica step phase %d", c.Phase)
	}
	return c
}

// NodeLeaving marks a node leaving (queen leave), or no longer: the
// directory's leader plans its replicas onto other nodes before it goes.
// Its value, under leaving/<id>: "1", or unset.
type NodeLeaving struct {
	ID      string
	Leaving bool
}

// Apply sets or clears the mark. Value: bool, whether it changed; Err
// ErrInvalid for an empty id.
func (c NodeLeaving) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	if c.ID == "" {
		return engine.Result{Value: false, Err: fmt.Errorf("%w: a node id is required", engine.ErrInvalid)}
	}
	if Leaving(b.ClusterValue, c.ID) == c.Leaving {
		return engine.Result{Value: false}
	}
	v := ""
	if c.Leaving {
		v = "1"
	}
	b.SetClusterValue(leavingKey(c.ID), v)
	return engine.Result{Value: true}
}

// Leaving reports whether node id is marked leaving.
func Leaving(v ClusterValues, id string) bool { return v(leavingKey(id)) == "1" }

func leavingKey(id string) string { return "leaving/" + id }
