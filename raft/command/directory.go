package command

import (
	"fmt"
	"strconv"

	"github.com/queenmq/queen/engine"
)

// The directory's commands. The directory is group 0 of a cluster.Host
// (ARCHITECTURE.md, "Scale-out"): an engine that holds no queues, only
// cluster values saying how many data groups there are and which queue
// lives in which. Its values:
//
//	groups          G, the data groups 1..G (decimal)
//	place/<queue>   the queue's group (decimal)
//	placed/<g>      how many queues group g holds (decimal)
//
// Both commands are first-wins and answer what is stored, so proposing one
// again, after a timeout or from another node, changes nothing.

// Groups records how many data groups the cluster has, once: the first
// count applied stays.
type Groups struct {
	Count uint32
}

// Apply stores Count unless a count is stored. Value: uint32, the stored
// count; Err ErrInvalid for a count of 0.
func (c Groups) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	if n := GroupCount(b.ClusterValue); n != 0 {
		return engine.Result{Value: n}
	}
	if c.Count == 0 {
		return engine.Result{Value: uint32(0), Err: fmt.Errorf("%w: a cluster needs at least one data group", engine.ErrInvalid)}
	}
	b.SetClusterValue(groupsKey, strconv.FormatUint(uint64(c.Count), 10))
	return engine.Result{Value: c.Count}
}

// PlaceQueue places a queue in a data group: in Group when set (queues a
// transaction spans must share a group), else in the group holding the
// fewest queues, the lowest id among equals. The first placement of a
// queue stays.
type PlaceQueue struct {
	Queue string
	Group uint32
}

// Apply places the queue. Value: uint32, the queue's group; Err ErrInvalid
// for an empty name, a group past the count, or a directory without one.
func (c PlaceQueue) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	if g := Placement(b.ClusterValue, c.Queue); g != 0 {
		return engine.Result{Value: g}
	}
	n := GroupCount(b.ClusterValue)
	switch {
	case c.Queue == "":
		return engine.Result{Value: uint32(0), Err: fmt.Errorf("%w: a queue name is required", engine.ErrInvalid)}
	case n == 0:
		return engine.Result{Value: uint32(0), Err: fmt.Errorf("%w: the directory does not know the groups yet", engine.ErrInvalid)}
	case c.Group > n:
		return engine.Result{Value: uint32(0), Err: fmt.Errorf("%w: group %d does not exist (the cluster has %d)", engine.ErrInvalid, c.Group, n)}
	}
	g := c.Group
	if g == 0 {
		least := ^uint64(0)
		for id := uint32(1); id <= n; id++ {
			if k := Placed(b.ClusterValue, id); k < least {
				g, least = id, k
			}
		}
	}
	b.SetClusterValue(placeKey(c.Queue), strconv.FormatUint(uint64(g), 10))
	b.SetClusterValue(placedKey(g), strconv.FormatUint(Placed(b.ClusterValue, g)+1, 10))
	return engine.Result{Value: g}
}

// LookupQueue asks the directory's leader where a queue lives, without
// placing it: a node whose replica does not know a queue yet (placed a
// moment ago through another node) asks before it sends a pop or a
// deletion to a group that does not hold the queue. The leader answers
// from its applied state (Skip) once that holds every placement any node
// answered (a Lookup); the command is never proposed, and were it applied
// it would change nothing.
type LookupQueue struct {
	Queue string
}

// A Lookup is answered from a leader's applied state, never logged, once
// the proposer has made sure that state holds everything any leader
// answered (raft.Node.LeaderRead).
type Lookup interface {
	engine.Command
	engine.Skipper
	lookup()
}

func (LookupQueue) lookup()     {}
func (LookupPartition) lookup() {}
func (LookupLease) lookup()     {}

// Apply answers the queue's group. Value: uint32, 0 when it has none.
func (c LookupQueue) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	return engine.Result{Value: Placement(b.ClusterValue, c.Queue)}
}

// Skip answers from e's applied state, always (engine.Skipper).
func (c LookupQueue) Skip(e *engine.Engine, _ int64) (engine.Result, bool) {
	return engine.Result{Value: Placement(e.ClusterValue, c.Queue)}, true
}

// LookupPartition asks a group's leader whether its group holds a
// partition: a node whose replicas do not know the partition (a lagging
// replica; a pop answered by another node a moment ago) asks each group's
// leader before it sends an ack, a DLQ command or a trace anywhere.
// Answered from the leader's applied state (Skip), never logged; were it
// applied, it would change nothing.
type LookupPartition struct {
	ID engine.ID
}

// Apply answers whether the partition exists. Value: bool.
func (c LookupPartition) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	return engine.Result{Value: b.HasPartition(c.ID)}
}

// Skip answers from e's applied state, always (engine.Skipper).
func (c LookupPartition) Skip(e *engine.Engine, _ int64) (engine.Result, bool) {
	_, _, ok := e.PartitionByID(c.ID)
	return engine.Result{Value: ok}, true
}

// LookupLease is LookupPartition for a lease.
type LookupLease struct {
	ID engine.ID
}

// Apply answers whether the lease holds rows. Value: bool.
func (c LookupLease) Apply(b *engine.Batch, _ engine.Stamp) engine.Result {
	return engine.Result{Value: b.HasLease(c.ID)}
}

// Skip answers from e's applied state, always (engine.Skipper).
func (c LookupLease) Skip(e *engine.Engine, _ int64) (engine.Result, bool) {
	return engine.Result{Value: e.HasLease(c.ID)}, true
}

// A ClusterValues reads the directory's values: engine.Engine.ClusterValue
// for a node's replica, engine.Batch.ClusterValue inside an apply.
type ClusterValues func(name string) string

// GroupCount is the directory's count of data groups, 0 before Groups
// applied.
func GroupCount(v ClusterValues) uint32 { return parseGroup(v(groupsKey)) }

// Placement is the queue's group, 0 while it is not placed.
func Placement(v ClusterValues, queue string) uint32 { return parseGroup(v(placeKey(queue))) }

// Placed is how many queues the directory places in group g: each
// placement counts, a deleted queue's too (it keeps its placement).
func Placed(v ClusterValues, g uint32) uint64 {
	n, _ := strconv.ParseUint(v(placedKey(g)), 10, 64)
	return n
}

// parseGroup reads a stored group id or count; what the directory never
// writes ("" included) reads as 0.
func parseGroup(s string) uint32 {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

const groupsKey = "groups"

func placeKey(queue string) string { return "place/" + queue }
func placedKey(g uint32) string    { return "placed/" + strconv.FormatUint(uint64(g), 10) }
