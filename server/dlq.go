package server

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/envelope"
	"github.com/queenmq/queen/server/urlquery"
	"github.com/queenmq/queen/server/wire"
)

// The dead-letter routes: the DLQ listing and its bulk redrive (GET
// /api/v1/dlq, POST /api/v1/dlq/replay; docs/decisions.md B1, B4). One
// message's deletes, replays and moves are in messages.go.

// maxDLQPage caps a DLQ page. It is high on purpose: `queenctl dlq drain`
// stops at the first page shorter than the limit it asked for.
const maxDLQPage = 10000

// listDLQ answers GET /api/v1/dlq with the docs/decisions.md B1 filters: rows newest failure
// first, total = rows matching the filter, pagination.hasMore.
func (s *Server) listDLQ(ctx *fasthttp.RequestCtx, _ *params) {
	f, err := dlqFilter(ctx.QueryArgs())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	rows, total, err := s.broker.ListDLQ(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Array("messages")
	for i := range rows {
		writeDeadLetter(&w, &rows[i], s.crypt)
	}
	w.EndArray()
	w.Object("pagination")
	w.Int("limit", int64(f.Limit))
	w.Int("offset", int64(f.Offset))
	w.Bool("hasMore", f.Offset+len(rows) < total)
	w.EndObject()
	w.Int("total", int64(total))
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// dlqFilter reads the docs/decisions.md B1 filters and paging of a DLQ request.
func dlqFilter(args *fasthttp.Args) (engine.DLQFilter, error) {
	f := engine.DLQFilter{
		Queue:     urlquery.String(args, "queue"),
		Group:     urlquery.String(args, "consumerGroup"),
		Partition: urlquery.String(args, "partition"),
	}
	var err error
	if f.Limit, f.Offset, err = urlquery.Page(args, 100, maxDLQPage); err != nil {
		return f, err
	}
	if f.From, err = urlquery.Time(args, "from"); err == nil {
		f.To, err = urlquery.Time(args, "to")
	}
	return f, err
}

// replayDLQ answers POST /api/v1/dlq/replay (docs/decisions.md B4): it replays the rows the docs/decisions.md B1
// filters (query string) select, oldest failure first, at most limit of
// them, and answers the counts. Each replay is one atomic command that
// pushes the snapshot and removes its row, so a row is replayed at most once
// even when the call is repeated or cut short; a row another caller replayed
// meanwhile is skipped. It takes no corrected payload (the body is not
// read), so every row keeps its producerSub.
func (s *Server) replayDLQ(ctx *fasthttp.RequestCtx, _ *params) {
	f, err := dlqFilter(ctx.QueryArgs())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	limit := f.Limit
	f.Offset, f.Limit = 0, 1
	_, total, err := s.broker.ListDLQ(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	// The oldest rows are the last page of the newest-first listing.
	f.Offset, f.Limit = max(total-limit, 0), limit
	rows, _, err := s.broker.ListDLQ(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	replayed, skipped, failed := 0, 0, 0
	for i := len(rows) - 1; i >= 0; i-- {
		d := &rows[i]
		_, err := raft.Propose[engine.ReplayResult](s.ctx, s.prop, engine.ReplayCmd{PartitionID: d.PartitionID, TransactionID: d.TransactionID, Group: d.Group})
		switch {
		case err == nil:
			replayed++
			s.m.Replays.Inc()
		case errors.Is(err, engine.ErrNoDeadLetter):
			skipped++
		case errors.Is(err, raft.ErrNotLeader) && i == len(rows)-1 && s.forwardNotLeader(ctx, err):
			return // a follower: the leader runs the whole redrive
		default:
			failed++
			s.log.Warn("dlq redrive", "partition", engine.FormatID(d.PartitionID), "transactionId", d.TransactionID, "err", err)
		}
		if failed > 0 && !errors.Is(err, engine.ErrInvalid) {
			break // the cluster is unavailable: stop, the rest stays in the DLQ
		}
	}
	f.Offset, f.Limit = 0, 1
	_, remaining, err := s.broker.ListDLQ(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", failed == 0)
	w.Int("replayed", int64(replayed))
	w.Int("skipped", int64(skipped))
	w.Int("failed", int64(failed))
	w.Int("remaining", int64(remaining))
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// writeDeadLetter writes one DLQ row: Queen's fields (createdAt = failedAt)
// plus what docs/decisions.md B2 keeps (enqueuedAt, producerSub, offset, deliveries). A
// snapshot the broker sealed is written decrypted, flagged isEncrypted:true,
// when c opens it; any other is written as stored, isEncrypted:false.
func writeDeadLetter(w *wire.Writer, d *engine.DeadLetter, c *envelope.Cipher) {
	w.Object("")
	w.ID("id", d.MessageID)
	w.Str("transactionId", d.TransactionID)
	w.ID("partitionId", d.PartitionID)
	w.Str("queue", d.Queue)
	w.Str("queueName", d.Queue)
	w.Str("partition", d.Partition)
	w.Str("consumerGroup", d.Group)
	w.Str("errorMessage", d.Error)
	w.Int("retryCount", int64(d.RetryCount))
	data, decrypted := c.Reveal(d.Payload, d.Sealed)
	w.Raw("data", data)
	w.Bool("isEncrypted", decrypted)
	if d.HasTrace {
		w.ID("traceId", d.TraceID)
	} else {
		w.Null("traceId")
	}
	w.StrOrNull("producerSub", d.ProducerSub)
	w.TimeMillis("createdAt", d.FailedAt)
	w.TimeMillis("failedAt", d.FailedAt)
	w.TimeMicros("enqueuedAt", d.EnqueuedAt)
	w.Int("offset", d.Offset)
	w.Int("deliveries", int64(d.Deliveries))
	w.EndObject()
}
