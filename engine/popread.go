package engine

import "github.com/queenmq/queen/engine/segment"

// Deferred pop reads.
//
// A pop decides what it leases (offsets) from the in-memory model; reading
// the leased frames means decoding zstd segments, which in the serial apply
// loop bounded pop+ack throughput. A proposer's batch can therefore defer
// the reads (DeferReads): the pop records the ranges, and the proposer
// fills the messages after Commit, outside the apply loop (FillPop).
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
	queue, partition string
	retry, attempt   uint32
}

// DeferReads makes the pops of this batch leave their messages to FillPop.
func (b *Batch) DeferReads(on bool) { b.deferReads = on }

// FillPop reads the messages of a pop whose batch deferred its reads. Call
// it once, after the batch committed; it may run concurrently with later
// batches. A result without deferred reads is left as it is.
func (e *Engine) FillPop(res *PopResult) error {
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
		err := e.readRangeIter(e.db, r.part, r.from, r.to, func(off Offset, f *segment.Frame, createdAt int64) error {
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
