package command

import "github.com/queenmq/queen/engine"

// The commands this package defines write the cluster's own records (the
// directory, membership, layout, load), never a queue's state: a queue
// frozen for a move does not refuse them (engine.QueuelessCommand), and
// the move's own directory steps must run while it is frozen.
var (
	_ engine.QueuelessCommand = Announce{}
	_ engine.QueuelessCommand = Maintenance{}
	_ engine.QueuelessCommand = Groups{}
	_ engine.QueuelessCommand = PlaceQueue{}
	_ engine.QueuelessCommand = LookupQueue{}
	_ engine.QueuelessCommand = LookupPartition{}
	_ engine.QueuelessCommand = LookupLease{}
	_ engine.QueuelessCommand = BeginMove{}
	_ engine.QueuelessCommand = EndMove{}
	_ engine.QueuelessCommand = AbortMove{}
	_ engine.QueuelessCommand = Replicas{}
	_ engine.QueuelessCommand = GroupLayout{}
	_ engine.QueuelessCommand = ReplicaStep{}
	_ engine.QueuelessCommand = GroupLoad{}
	_ engine.QueuelessCommand = NodeLeaving{}
)

func (Announce) WritesNoQueue()        {}
func (Maintenance) WritesNoQueue()     {}
func (Groups) WritesNoQueue()          {}
func (PlaceQueue) WritesNoQueue()      {}
func (LookupQueue) WritesNoQueue()     {}
func (LookupPartition) WritesNoQueue() {}
func (LookupLease) WritesNoQueue()     {}
func (BeginMove) WritesNoQueue()       {}
func (EndMove) WritesNoQueue()         {}
func (AbortMove) WritesNoQueue()       {}
func (Replicas) WritesNoQueue()        {}
func (GroupLayout) WritesNoQueue()     {}
func (ReplicaStep) WritesNoQueue()     {}
func (GroupLoad) WritesNoQueue()       {}
func (NodeLeaving) WritesNoQueue()     {}
