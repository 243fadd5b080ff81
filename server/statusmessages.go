package server

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/server/wire"
)

// statusQueueMessages answers GET /api/v1/status/queues/{queue}/messages?limit=50&offset=0
// (docs/api.md §11): one page of the queue's retained messages, newest first
// (createdAt, then offset within a partition, which orders ids), always an
// array ([] for an unknown queue). status is dead_letter when the message
// has a dead-letter row for any group, else its state for queue mode alone:
// completed at or below the queue-mode cursor, processing under its live
// lease when the lease covers it (as /api/v1/messages' queueStatus), pending
// otherwise. Named groups do not count.
func (s *Server) statusQueueMessages(ctx *fasthttp.RequestCtx, p *params) {
	args := ctx.QueryArgs()
	limit, offset, err := pageArgs(args, 50, 1000)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	msgs, err := s.broker.ListMessages(engine.MessageFilter{Queue: p.get("queue"), Limit: limit, Offset: offset})
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	w := startBody(ctx)
	w.Array("")
	for i := range msgs {
		m := &msgs[i]
		status := statusOf(&m.StoredMessage, false, now).queueStatus
		if m.DeadLettered {
			status = "dead_letter"
		}
		w.Object("")
		writeMessageRef(&w, &m.Message, status)
		w.TimeMillis("createdAt", m.CreatedAt)
		w.EndObject()
	}
	w.EndArray()
	send(ctx, fasthttp.StatusOK, w)
}

// writeMessageRef writes the members that name a listed message and its
// status: id, transactionId, partitionId, queuePath, queue, partition.
func writeMessageRef(w *wire.Writer, m *engine.Message, status string) {
	w.ID("id", m.ID)
	w.Str("transactionId", m.TransactionID)
	w.ID("partitionId", m.PartitionID)
	w.Str("queuePath", m.Queue+"/"+m.Partition)
	w.Str("queue", m.Queue)
	w.Str("partition", m.Partition)
	w.Str("status", status)
}
