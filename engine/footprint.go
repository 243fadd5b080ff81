package engine

// A command's footprint is what it touches, said once for every command
// type (Touches), so that the decisions that depend on it are derived and
// cannot drift apart: the freeze of a queue being moved refuses a command
// whose footprint meets the frozen queue (freeze.go), and a node of
// several Raft groups sends a command to the groups its footprint lies in
// (cluster.Host). Touches has no default case: a type it does not name is
// reported unlisted, which the freeze refuses while a queue is frozen and
// TestFootprint_EveryCommandIsListed (package raft/command) catches for
// every type of the log's table.

// Reach says how far a command's footprint goes.
type Reach uint8

const (
	// ReachNone: no queue's state (stream records, outbox rows, the
	// cluster records of the replication layer).
	ReachNone Reach = iota
	// ReachNamed: the queues, partitions and leases the footprint names.
	ReachNamed
	// ReachEveryQueue: every queue, each frozen one skipped by the
	// command itself (a discovery pop, a retention sweep).
	ReachEveryQueue
	// ReachConsumerGroup: every queue consumer group Footprint.Consumer
	// reads (a group's deletion over every queue, a subscription change).
	ReachConsumerGroup
	// ReachMove: a queue's move, for the Raft group Footprint.Group
	// names, whatever the placement says meanwhile; never refused by the
	// freeze the move itself set.
	ReachMove
)

// Footprint is what a command touches (Touches).
type Footprint struct {
	Reach Reach
	// Queues, Partitions and Leases are what a ReachNamed command names;
	// a queue may be named by a partition or lease of it alone.
	Queues     []string
	Partitions []ID
	Leases     []ID
	// DeadLetters is set for a command over the dead-letter rows at an
	// address (Partitions[0], the transaction id and group below): the
	// rows' queues are touched too, which only the rows can say.
	DeadLetters *DeadLetterAddress
	// Creates says the command may create the queues it names (a push, a
	// configure): a router places a queue it does not know yet.
	Creates bool
	// Consumer is the consumer group of a ReachConsumerGroup command.
	Consumer string
	// Group is the Raft group of a ReachMove command.
	Group uint32
	// Answers is the zero of the type the command answers (its Result's
	// Value): what it answers when it is refused.
	Answers any
}

// DeadLetterAddress is where dead-letter rows are filed: a partition, a
// transaction id, and a consumer group ("" for every group).
type DeadLetterAddress struct {
	Partition   ID
	Transaction string
	Group       string
}

// QueuelessCommand is a command that changes no queue's state (the
// cluster's directory, membership and layout records the replication layer
// defines): its footprint is ReachNone. WritesNoQueue is only a mark.
type QueuelessCommand interface {
	Command
	WritesNoQueue()
}

// Touches returns c's footprint; listed is false for a type it does not
// name. Every case names its type: a type none names is unlisted, never
// given a footprint by default.
func Touches(c Command) (fp Footprint, listed bool) {
	named := func(answers any) Footprint { return Footprint{Reach: ReachNamed, Answers: answers} }
	switch c := c.(type) {
	case PushCmd:
		fp = named([]PushResult(nil))
		fp.Queues, fp.Creates = itemQueues(nil, c.Items), true
	case *PreparedPush:
		fp = named([]PushResult(nil))
		fp.Queues, fp.Creates = preparedQueues(nil, c), true
	case PopCmd:
		g := c.Group
		if g == "" {
			g = QueueMode
		}
		if c.Queue == "" {
			return Footprint{Reach: ReachEveryQueue, Answers: PopResult{Group: g}}, true
		}
		fp = named(PopResult{Group: g})
		fp.Queues = []string{c.Queue}
	case AckCmd:
		fp = named([]AckResult(nil))
		for i := range c.Items {
			fp.Partitions = append(fp.Partitions, c.Items[i].PartitionID)
		}
	case ExtendLeaseCmd:
		fp = named(ExtendResult{})
		fp.Leases = []ID{c.Lease}
	case TransactionCmd:
		fp = txFootprint(c)
	case OutboxTxCmd:
		// Its Away pushes are for other groups' queues, delivered later
		// by ordinary pushes, which have footprints of their own there.
		fp = txFootprint(c.TransactionCmd)
	case ReplayCmd:
		fp = deadLetterFootprint(ReplayResult{}, c.PartitionID, c.TransactionID, c.Group)
	case DeleteDLQCmd:
		fp = deadLetterFootprint(0, c.PartitionID, c.TransactionID, c.Group)
	case MoveToDLQCmd:
		fp = named(AckResult{})
		fp.Partitions = []ID{c.PartitionID}
	case TraceCmd:
		fp = named(ID{})
		fp.Partitions = []ID{c.PartitionID}
	case SeekCmd:
		fp = named(0)
		fp.Queues = []string{c.Queue}
	case ConfigureCmd:
		fp = named(QueueInfo{})
		fp.Queues, fp.Creates = []string{c.Queue}, true
	case DeleteQueueCmd:
		fp = named(false)
		fp.Queues = []string{c.Queue}
	case DeleteGroupCmd:
		if c.Queue == "" {
			return Footprint{Reach: ReachConsumerGroup, Consumer: c.Group, Answers: GroupDeleted{}}, true
		}
		fp = named(GroupDeleted{})
		fp.Queues = []string{c.Queue}
	case UpdateSubscriptionCmd:
		return Footprint{Reach: ReachConsumerGroup, Consumer: c.Group, Answers: 0}, true
	case StreamRegisterCmd:
		// A registration writes no queue, but a stream over a queue
		// being exported would read or write it from then on.
		fp = named(StreamRegistered{})
		fp.Queues, fp.Creates = []string{c.SourceQueue}, true
		if c.HasSink {
			fp.Queues = append(fp.Queues, c.SinkQueue)
		}
	case StreamCycleCmd:
		fp = named(StreamCycleResult{})
		fp.Partitions, fp.Queues = []ID{c.PartitionID}, itemQueues(nil, c.Items)
	case *PreparedCycle:
		fp = named(StreamCycleResult{})
		if c != nil {
			fp.Partitions, fp.Queues = []ID{c.PartitionID}, preparedQueues(nil, c.Push)
		}
	case SweepCmd:
		return Footprint{Reach: ReachEveryQueue, Answers: SweepResult{}}, true
	case StreamDeleteCmd:
		return Footprint{Reach: ReachNone, Answers: false}, true
	case OutboxDeleteCmd:
		return Footprint{Reach: ReachNone, Answers: 0}, true
	case FreezeQueueCmd:
		return Footprint{Reach: ReachMove, Group: c.Group, Queues: []string{c.Queue}, Answers: false}, true
	case ImportQueueCmd:
		return Footprint{Reach: ReachMove, Group: c.Group, Queues: []string{c.Queue}, Answers: ImportResult{}}, true
	case DropQueueCmd:
		return Footprint{Reach: ReachMove, Group: c.Group, Queues: []string{c.Queue}, Answers: false}, true
	case QueuelessCommand:
		return Footprint{Reach: ReachNone}, true
	default:
		return Footprint{}, false
	}
	return fp, true
}

func itemQueues(qs []string, items []PushItem) []string {
	for i := range items {
		qs = appendQueue(qs, items[i].Queue)
	}
	return qs
}

func preparedQueues(qs []string, pp *PreparedPush) []string {
	if pp == nil {
		return qs
	}
	for i := range pp.Groups {
		qs = appendQueue(qs, pp.Groups[i].Queue)
	}
	return qs
}

// txFootprint: the queues a transaction pushes to, the partitions it acks
// on and the leases it holds (an ack's own, and those it requires).
func txFootprint(c TransactionCmd) Footprint {
	fp := Footprint{Reach: ReachNamed, Answers: TxResult{}, Creates: true}
	for _, op := range c.Ops {
		if op.Push != nil {
			fp.Queues = appendQueue(fp.Queues, op.Push.Queue)
		}
		if op.Ack != nil {
			fp.Partitions = append(fp.Partitions, op.Ack.PartitionID)
			if op.Ack.Lease != (ID{}) {
				fp.Leases = append(fp.Leases, op.Ack.Lease)
			}
		}
	}
	fp.Leases = append(fp.Leases, c.RequiredLeases...)
	return fp
}

func deadLetterFootprint(answers any, part ID, txn, group string) Footprint {
	return Footprint{Reach: ReachNamed, Answers: answers, Partitions: []ID{part},
		DeadLetters: &DeadLetterAddress{Partition: part, Transaction: txn, Group: group}}
}
