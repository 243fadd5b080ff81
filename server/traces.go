package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/urlquery"
	"github.com/queenmq/queen/server/wire"
)

// The trace routes (docs/api.md §13): records a consumer attaches to a
// message (msg.trace in the SDKs), kept beside the message until retention
// removes it, and read by message, by name, and as a list of names. Adding
// one is one command (engine.TraceCmd); reading them is one call on the
// broker's optional traceReader. A record carries at most maxTraceNames
// names of 1 to maxTraceName bytes each (names are index keys); the engine
// caps the traces one message holds (engine.ErrTraceLimit, 409
// trace_limit).

// traceReader is the read side of traces a broker offers (raft.Node and
// the tests' brokers, through their engine).
type traceReader interface {
	Traces(part engine.ID, txn string) ([]engine.Trace, error)
	TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error)
	TraceNames(limit, offset int) ([]engine.TraceName, int, error)
}

// traceSource is the broker's trace reader, or the error (501) to answer
// when the broker keeps no traces.
func (s *Server) traceSource() (traceReader, error) {
	if r, ok := s.broker.(traceReader); ok {
		return r, nil
	}
	return nil, notImplemented("this broker keeps no traces")
}

// maxTraceName bounds a trace name (and maxTraceNames their number per
// record): names are index keys.
const (
	maxTraceName  = 255
	maxTraceNames = 32
)

// Add answers POST /api/v1/traces: 201 {"success":true,"traceId"}.
func (s *Server) addTrace(ctx *fasthttp.RequestCtx, _ *params) {
	var (
		cmd              engine.TraceCmd
		hasTxn, hasPart  bool
		hasData, badPart bool
	)
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) error {
		var err error
		switch string(key) {
		case "transactionId":
			cmd.TransactionID, hasTxn, err = sc.OptString("transactionId")
		case "partitionId":
			var v string
			if v, hasPart, err = sc.OptString("partitionId"); err == nil && hasPart {
				if cmd.PartitionID, err = engine.ParseID(v); err != nil {
					badPart, err = true, nil
				}
			}
		case "data":
			hasData = true
			cmd.Data, err = sc.Raw()
		case "consumerGroup":
			cmd.Group, _, err = sc.OptString("consumerGroup") // null and "" both mean queue mode
		case "eventType":
			cmd.EventType, _, err = sc.OptString("eventType") // null means "info"
		case "traceNames":
			cmd.Names, err = traceNames(sc)
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case !hasTxn || !hasPart:
		err = wire.BadRequest("transactionId and partitionId are required")
	case !hasData:
		err = wire.BadRequest("data is required")
	case badPart:
		err = wire.BadRequest("partitionId must be a UUID")
	}
	for _, n := range cmd.Names {
		if err == nil && (n == "" || len(n) > maxTraceName) {
			err = wire.BadRequest("trace names must be 1 to 255 bytes")
		}
	}
	if err == nil && len(cmd.Names) > maxTraceNames {
		err = wire.BadRequest("at most 32 trace names")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	cmd.WorkerID = s.nodeID()
	id, err := raft.Propose[engine.ID](s.ctx, s.forwarding(ctx), cmd)
	if err != nil {
		s.forwardOrFail(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", true)
	w.ID("traceId", id)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusCreated, w)
}

// traceNames reads traceNames: a string (one name), an array of strings, or
// anything else (no names; Queen ignores other types).
func traceNames(sc *wire.Scanner) ([]string, error) {
	switch sc.Peek() {
	case '"':
		v, err := sc.StringValue()
		return []string{v}, err
	case '[':
		var names []string
		err := sc.Array(func(sc *wire.Scanner, _ int) error {
			if sc.Peek() != '"' {
				return sc.Skip()
			}
			v, err := sc.StringValue()
			names = append(names, v)
			return err
		})
		return names, err
	}
	return nil, sc.Skip()
}

// OfMessage answers GET /api/v1/traces/{partitionId}/{transactionId}.
func (s *Server) messageTraces(ctx *fasthttp.RequestCtx, p *params) {
	partitionID, transactionID := p.get("partitionId"), p.get("transactionId")
	rd, err := s.traceSource()
	var traces []engine.Trace
	if err == nil {
		var part engine.ID
		if part, err = engine.ParseID(partitionID); err != nil {
			err = wire.BadRequest("partitionId must be a UUID")
		} else {
			traces, err = rd.Traces(part, transactionID)
		}
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Array("traces")
	for i := range traces {
		t := &traces[i]
		w.Object("")
		w.ID("id", t.ID)
		writeTraceFields(&w, t)
		w.EndObject()
	}
	w.EndArray()
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// ByName answers GET /api/v1/traces/by-name/{traceName}.
func (s *Server) tracesByName(ctx *fasthttp.RequestCtx, p *params) {
	name := p.get("traceName")
	limit, offset, err := urlquery.Page(ctx.QueryArgs(), 100, 1000)
	var rd traceReader
	if err == nil {
		rd, err = s.traceSource()
	}
	var (
		traces []engine.TraceAt
		total  int
	)
	if err == nil {
		traces, total, err = rd.TracesByName(name, limit, offset)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Array("traces")
	for i := range traces {
		t := &traces[i]
		w.Object("")
		w.ID("id", t.ID)
		w.Str("transaction_id", t.TransactionID)
		w.ID("partition_id", t.PartitionID)
		writeTraceFields(&w, &t.Trace)
		w.StrOrNull("queue_name", t.Queue)
		w.StrOrNull("partition_name", t.Partition)
		if t.HasMessage {
			w.Raw("message_payload", t.Payload)
		} else {
			w.Null("message_payload")
		}
		w.EndObject()
	}
	w.EndArray()
	w.Int("total", int64(total))
	writePagination(&w, limit, offset)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// Names answers GET /api/v1/traces/names.
func (s *Server) traceNamesList(ctx *fasthttp.RequestCtx, _ *params) {
	limit, offset, err := urlquery.Page(ctx.QueryArgs(), 50, 1000)
	var rd traceReader
	if err == nil {
		rd, err = s.traceSource()
	}
	var (
		names []engine.TraceName
		total int
	)
	if err == nil {
		names, total, err = rd.TraceNames(limit, offset)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startReply(ctx)
	w.Object("")
	w.Array("trace_names")
	for _, n := range names {
		w.Object("")
		w.Str("trace_name", n.Name)
		w.Int("trace_count", int64(n.TraceCount))
		w.Int("message_count", int64(n.MessageCount))
		w.TimeMillis("last_seen", n.LastSeen)
		w.EndObject()
	}
	w.EndArray()
	w.Int("total", int64(total))
	writePagination(&w, limit, offset)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// writeTraceFields writes the fields every trace reply carries.
func writeTraceFields(w *wire.Writer, t *engine.Trace) {
	w.Str("event_type", t.EventType)
	w.Raw("data", t.Data)
	w.Str("consumer_group", t.Group)
	w.Str("worker_id", t.WorkerID)
	w.TimeMillis("created_at", t.CreatedAt)
	w.Array("trace_names")
	for _, n := range t.Names {
		w.Str("", n)
	}
	w.EndArray()
}

// writePagination writes the page a listing answers.
func writePagination(w *wire.Writer, limit, offset int) {
	w.Object("pagination")
	w.Int("limit", int64(limit))
	w.Int("offset", int64(offset))
	w.EndObject()
}
