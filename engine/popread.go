package engine

import "github.com/queenmq/queen/engine/segment"

// Deferred pop reads.
//
// A pop decides what it leases (offsets) from the in-memory model; reading
// the leased frames means decoding zstd segments, which in the serial apply
// loop bounded pop+ack throughput. So a pop never reads in the batch: it
// records the ranges in its result, and whoever wants the messages (the
// node that proposed it; a replica does not) fills them after the commit,
// outside the apply loop (Engine.Finish).
// Segments are immutable, so the frames read later are the ones leased. The
// one difference: a range that a sweep or a queue delete removes between the
// commit and the fill (retention of messages being leased that instant) is
// answered without those messages, as if they had been deleted just after.
// Nothing is held open, so a result nobody fills (its proposer gave up, or
// an entry re-applied after a restart) costs nothing.

// popRead is one claimed range whose frames are read after Commit.
type popRead struct {
	part             ID
	from, to         Offset
	base             int64 // the base of the segment holding from, when known
	baseKnown        bool
	queue, partition string
	retry, attempt   uint32
}

// fillPop reads the messages of a pop's claimed ranges. It runs once,
// after the batch committed, and may run concurrently with later batches.
func (e *Engine) fillPop(res *PopResult) error {
	reads := res.reads
	res.reads = nil
	if len(reads) == 0 {
		return nil
	}
	e.dbMu.RLock()
	defer e.dbMu.RUnlock()
	if e.db == nil {
		return e.Fault()
	}
	for _, r := range reads {
		err := e.readFrom(e.db, r.part, r.base, r.baseKnown, r.from, r.to, func(off Offset, f *segment.Frame, createdAt int64) error {
			res.Messages = append(res.Messages, Message{
				ID: f.MessageID, TransactionID: string(f.TransactionID), TraceID: f.TraceID, HasTrace: f.HasTrace,
				Payload: f.Payload, Sealed: f.Sealed, ProducerSub: string(f.ProducerSub), CreatedAt: createdAt,
				Queue: r.queue, Partition: r.partition, PartitionID: r.part, Offset: off,
				RetryCount: r.retry, Attempt: r.attempt,
			})
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
