package server

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/envelope"
	"github.com/queenmq/queen/server/wire"
)

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
	w := startBody(ctx)
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
	send(ctx, fasthttp.StatusOK, w)
}

// dlqFilter reads the docs/decisions.md B1 filters and paging of a DLQ request.
func dlqFilter(args *fasthttp.Args) (engine.DLQFilter, error) {
	f := engine.DLQFilter{
		Queue:     queryString(args, "queue"),
		Group:     queryString(args, "consumerGroup"),
		Partition: queryString(args, "partition"),
	}
	var err error
	if f.Limit, f.Offset, err = pageArgs(args, 100, maxDLQPage); err != nil {
		return f, err
	}
	if f.From, err = queryTime(args, "from"); err == nil {
		f.To, err = queryTime(args, "to")
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
			s.m.replays.Inc()
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
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", failed == 0)
	w.Int("replayed", int64(replayed))
	w.Int("skipped", int64(skipped))
	w.Int("failed", int64(failed))
	w.Int("remaining", int64(remaining))
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
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

// address parses a {partitionId}/{transactionId} path. A partition id that
// is not a UUID names nothing: notFound is returned for it.
func address(p *params, notFound error) (engine.ID, string, error) {
	part, err := engine.ParseID(p.get("partitionId"))
	if err != nil {
		return part, "", notFound
	}
	return part, p.get("transactionId"), nil
}

// listMessages answers GET /api/v1/messages (docs/api.md §9.2): retained
// messages newest first, filtered by queue, partition, ns (namespace), task,
// createdAt window (from, default an hour ago; to, default now) and status.
// A status filter is applied to at most maxStatusScan candidates.
func (s *Server) listMessages(ctx *fasthttp.RequestCtx, _ *params) {
	args := ctx.QueryArgs()
	now := time.Now()
	f := engine.MessageFilter{
		Queue:     queryString(args, "queue"),
		Partition: queryString(args, "partition"),
		Namespace: queryString(args, "ns"),
		Task:      queryString(args, "task"),
		From:      now.Add(-time.Hour).UnixMicro(),
		To:        now.UnixMicro(),
	}
	if f.Namespace == "" {
		f.Namespace = queryString(args, "namespace")
	}
	for _, b := range []struct {
		key string
		dst *int64
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := queryString(args, b.key); v != "" {
			t, ok := wire.ParseTime(v)
			if !ok {
				s.writeError(ctx, badRequest(b.key+" must be an ISO-8601 timestamp"))
				return
			}
			*b.dst = engine.Micros(t)
		}
	}
	limit, offset, err := pageArgs(args, 200, 1000)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	status := queryString(args, "status")
	switch status {
	case "", "pending", "processing", "completed", "dead_letter":
	default:
		s.writeError(ctx, badRequest("status must be pending, processing, completed or dead_letter"))
		return
	}
	f.Offset, f.Limit = offset, limit
	if status != "" {
		f.Offset, f.Limit = 0, maxStatusScan
	}
	msgs, err := s.broker.ListMessages(f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	us := now.UnixMicro()
	w := startBody(ctx)
	w.Object("")
	w.Array("messages")
	var summary []engine.CursorInfo
	matched := 0
	for i := range msgs {
		m := &msgs[i]
		st := statusOf(&m.StoredMessage, m.DeadLettered, us)
		if status != "" {
			if st.status != status {
				continue
			}
			matched++
			if matched <= offset || matched > offset+limit {
				continue
			}
		}
		if summary == nil {
			summary = m.Groups
		}
		w.Object("")
		writeMessageRef(&w, &m.Message, st.status)
		w.Str("queueStatus", st.queueStatus)
		w.Object("busStatus")
		w.Int("consumedBy", int64(st.busConsumed))
		w.Int("totalGroups", int64(st.busGroups))
		w.EndObject()
		if m.HasTrace {
			w.ID("traceId", m.TraceID)
		} else {
			w.Null("traceId")
		}
		w.StrOrNull("producerSub", m.ProducerSub)
		w.TimeMicros("createdAt", m.CreatedAt)
		w.TimeMillis("leaseExpiresAt", st.leaseExpires)
		w.EndObject()
	}
	w.EndArray()
	writeMode(&w, summary, 0)
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// maxStatusScan bounds the candidates a status-filtered listing examines.
const maxStatusScan = 10000

// messageStatus is how a message stands with the groups of its partition.
type messageStatus struct {
	status       string // pending, processing, completed, dead_letter
	queueStatus  string // the same for queue mode alone
	busConsumed  int    // named groups past the message
	busGroups    int    // named groups with a cursor
	consumedBy   int    // all groups past the message
	leaseExpires int64  // µs, when a live lease holds it
}

func statusOf(m *engine.StoredMessage, dead bool, now int64) messageStatus {
	st := messageStatus{status: "pending", queueStatus: "pending"}
	processing := false
	for _, g := range m.Groups {
		state := "pending"
		switch {
		case int64(m.Offset) <= g.Committed:
			state = "completed"
			st.consumedBy++
		case g.Lease != (engine.ID{}) && g.LeaseExpiresAt > now && int64(m.Offset) <= g.BatchEnd:
			state, processing, st.leaseExpires = "processing", true, g.LeaseExpiresAt
		}
		if g.Group == engine.QueueMode {
			st.queueStatus = state
		} else {
			st.busGroups++
			if state == "completed" {
				st.busConsumed++
			}
		}
	}
	switch {
	case dead:
		st.status = "dead_letter"
	case len(m.Groups) > 0 && st.consumedBy == len(m.Groups):
		st.status = "completed"
	case processing:
		st.status = "processing"
	}
	return st
}

// getMessage answers GET /api/v1/messages/{partitionId}/{transactionId}
// (docs/api.md §9.3). A message retention deleted is still described from its
// dead-letter snapshot, if it has one.
func (s *Server) getMessage(ctx *fasthttp.RequestCtx, p *params) {
	part, txn, err := address(p, engine.ErrMessageNotFound)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	dead, err := s.broker.DeadLettersAt(part, txn)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	msg, err := s.broker.MessageAt(part, txn)
	switch {
	case err == nil:
	case len(dead) > 0 && engineNotFound(err):
		d := newest(dead)
		msg = engine.StoredMessage{Message: engine.Message{ID: d.MessageID, TransactionID: d.TransactionID,
			TraceID: d.TraceID, HasTrace: d.HasTrace, Payload: d.Payload, Sealed: d.Sealed, ProducerSub: d.ProducerSub,
			CreatedAt: d.EnqueuedAt, Queue: d.Queue, Partition: d.Partition, PartitionID: d.PartitionID,
			Offset: engine.Offset(d.Offset)}}
	default:
		s.writeError(ctx, err)
		return
	}
	info, err := s.broker.Queue(msg.Queue)
	if err != nil && !engineNotFound(err) {
		s.writeError(ctx, err)
		return
	}
	now := time.Now().UnixMicro()
	st := statusOf(&msg, len(dead) > 0, now)
	status, leaseExpires, consumedBy := st.status, st.leaseExpires, st.consumedBy
	w := startBody(ctx)
	w.Object("")
	w.ID("id", msg.ID)
	w.Str("transactionId", msg.TransactionID)
	w.ID("partitionId", msg.PartitionID)
	w.Str("queuePath", msg.Queue+"/"+msg.Partition)
	w.Str("queue", msg.Queue)
	w.Str("partition", msg.Partition)
	w.Str("namespace", info.Namespace)
	w.Str("task", info.Task)
	w.Str("status", status)
	data, decrypted := s.crypt.Reveal(msg.Payload, msg.Sealed)
	w.Raw("payload", data)
	w.Raw("data", data)
	w.Bool("isEncrypted", decrypted)
	if msg.HasTrace {
		w.ID("traceId", msg.TraceID)
	} else {
		w.Null("traceId")
	}
	w.StrOrNull("producerSub", msg.ProducerSub)
	w.TimeMicros("createdAt", msg.CreatedAt)
	if len(dead) > 0 {
		d := newest(dead)
		w.Str("errorMessage", d.Error)
		w.Int("retryCount", int64(d.RetryCount))
	} else {
		w.Null("errorMessage")
		w.Int("retryCount", 0)
	}
	w.TimeMillis("leaseExpiresAt", leaseExpires)
	w.Object("queueConfig")
	for _, o := range []engine.Option{engine.OptLeaseTime, engine.OptRetryLimit, engine.OptRetryDelay, engine.OptTTL, engine.OptPriority} {
		w.Int(o.Name(), info.Config.Get(o))
	}
	w.EndObject()
	writeMode(&w, msg.Groups, consumedBy)
	w.Array("consumerGroups")
	for _, g := range msg.Groups {
		w.Object("")
		w.Str("name", g.Group)
		w.Bool("consumed", int64(msg.Offset) <= g.Committed)
		if g.Lease != (engine.ID{}) && g.LeaseExpiresAt > now {
			w.TimeMillis("leaseExpiresAt", g.LeaseExpiresAt)
		} else {
			w.Null("leaseExpiresAt")
		}
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// writeMode writes the queue/bus mode summary of a partition's groups.
func writeMode(w *wire.Writer, groups []engine.CursorInfo, consumedBy int) {
	queueMode, bus := false, 0
	for _, g := range groups {
		if g.Group == engine.QueueMode {
			queueMode = true
		} else {
			bus++
		}
	}
	mode := "none"
	switch {
	case queueMode && bus > 0:
		mode = "hybrid"
	case queueMode:
		mode = "queue"
	case bus > 0:
		mode = "bus"
	}
	w.Object("mode")
	w.Bool("hasQueueMode", queueMode)
	w.Int("busGroupsCount", int64(bus))
	w.Int("consumedByGroups", int64(consumedBy))
	w.Str("type", mode)
	w.EndObject()
}

func newest(rows []engine.DeadLetter) *engine.DeadLetter {
	n := &rows[0]
	for i := range rows {
		if rows[i].FailedAt > n.FailedAt {
			n = &rows[i]
		}
	}
	return n
}

func engineNotFound(err error) bool {
	row, _, ok := classify(err)
	return ok && row.status == fasthttp.StatusNotFound
}

// deleteMessage answers DELETE /api/v1/messages/{partitionId}/{transactionId}:
// it removes dead-letter rows only (docs/semantics.md §9.3); consumerGroup (query)
// narrows it to one group's row.
func (s *Server) deleteMessage(ctx *fasthttp.RequestCtx, p *params) {
	part, txn, err := address(p, engine.ErrNoDeadLetter)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	removed, err := raft.Propose[int](s.ctx, s.forwarding(ctx), engine.DeleteDLQCmd{PartitionID: part, TransactionID: txn,
		Group: queryString(ctx.QueryArgs(), "consumerGroup")})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	s.m.dlqDeletes.Add(removed)
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("partitionId", p.get("partitionId"))
	w.Str("transactionId", txn)
	w.Int("deleted", int64(removed))
	w.Str("message", "Message deleted successfully")
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// replayMessage answers POST .../{partitionId}/{transactionId}/retry (docs/decisions.md C4):
// the dead-letter snapshot is pushed again with a fresh transaction id and
// its rows removed in the same command. The optional body may carry a
// corrected payload (docs/decisions.md B4 "data") and a consumerGroup to replay only that
// group's row. A snapshot keeps its producerSub; a corrected payload is
// the caller's words, so it is stamped with the caller's sub, as a push is.
func (s *Server) replayMessage(ctx *fasthttp.RequestCtx, p *params) {
	part, txn, err := address(p, engine.ErrNoDeadLetter)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	cmd := engine.ReplayCmd{PartitionID: part, TransactionID: txn, Group: queryString(ctx.QueryArgs(), "consumerGroup")}
	err = wire.DecodeObject(ctx.PostBody(), true, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "data", "payload":
			cmd.Payload, err = sc.Raw()
			return err
		case "consumerGroup":
			var g string
			var ok bool
			if g, ok, err = sc.OptString("consumerGroup"); ok {
				cmd.Group = g
			}
			return err
		}
		return sc.Skip()
	})
	if err == nil && cmd.Payload != nil {
		cmd.Restamp, cmd.ProducerSub = true, p.subject
		err = s.sealReplay(&cmd)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, err := raft.Propose[engine.ReplayResult](s.ctx, s.forwarding(ctx), cmd)
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	s.m.replays.Inc()
	s.m.pushed([]engine.PushResult{res.Push})
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("queue", res.Queue)
	w.Str("partition", res.Partition)
	writePushResult(&w, "replayedAs", 0, &engine.PushItem{}, &res.Push)
	w.Bool("replayed", true)
	w.Bool("dlqRowRemoved", res.RowsRemoved > 0)
	w.Int("rowsRemoved", int64(res.RowsRemoved))
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}

// sealReplay seals a replay's corrected payload (docs/decisions.md B4), and marks it sealed,
// if the address's queue is encrypted now; else it goes plain. A replay
// without one re-pushes the stored snapshot with its own sealed bit, so an
// envelope stays one envelope and is never sealed twice. An address without
// dead-letter rows is left to Replay, which answers 404.
func (s *Server) sealReplay(cmd *engine.ReplayCmd) error {
	if s.crypt == nil {
		return nil
	}
	rows, err := s.broker.DeadLettersAt(cmd.PartitionID, cmd.TransactionID)
	if err != nil || len(rows) == 0 {
		return err
	}
	z := sealer{s: s}
	it := engine.PushItem{Queue: rows[0].Queue, Payload: cmd.Payload}
	if err := z.item(&it); err != nil {
		return err
	}
	cmd.Payload, cmd.Sealed = it.Payload, it.Sealed
	return nil
}

// moveToDLQ answers POST .../{partitionId}/{transactionId}/dlq (docs/decisions.md B3): the
// message is dead-lettered for consumerGroup (body or query; default queue
// mode) as an ack with status dlq would, holding no lease. 404 when there is
// no such message, 409 when the group already consumed it.
func (s *Server) moveToDLQ(ctx *fasthttp.RequestCtx, p *params) {
	part, txn, err := address(p, engine.ErrMessageNotFound)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	group := queryString(ctx.QueryArgs(), "consumerGroup")
	text := "Moved to the dead-letter queue by an operator"
	err = wire.DecodeObject(ctx.PostBody(), true, func(sc *wire.Scanner, key []byte) (err error) {
		var v string
		var ok bool
		switch string(key) {
		case "consumerGroup":
			if v, ok, err = sc.OptString("consumerGroup"); ok {
				group = v
			}
			return err
		case "error", "errorMessage":
			if v, ok, err = sc.OptString(string(key)); ok && v != "" {
				text = v
			}
			return err
		}
		return sc.Skip()
	})
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	res, err := raft.Propose[engine.AckResult](s.ctx, s.forwarding(ctx), engine.MoveToDLQCmd{PartitionID: part, TransactionID: txn, Group: group, Error: text})
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	if res.DLQ {
		s.m.deadLettersAdmin.Inc()
	}
	if group == "" {
		group = engine.QueueMode
	}
	w := startBody(ctx)
	w.Object("")
	w.Bool("success", res.Success)
	w.Str("partitionId", p.get("partitionId"))
	w.Str("transactionId", txn)
	w.Str("consumerGroup", group)
	w.StrOrNull("queueName", res.Queue)
	w.StrOrNull("partitionName", res.Partition)
	w.Bool("dlq", res.DLQ)
	w.StrOrNull("error", res.Error)
	w.EndObject()
	send(ctx, fasthttp.StatusOK, w)
}
