package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// The traces routes (docs/api.md §13): records a consumer attaches to a
// message (msg.trace in the SDKs), kept beside the message until retention
// removes it, and read by message, by name, and as a list of names.

// maxTraceName bounds a trace name (and maxTraceNames their number per
// record): names are index keys.
const (
	maxTraceName  = 255
	maxTraceNames = 32
)

// addTrace answers POST /api/v1/traces: 201 {"success":true,"traceId"}.
func (s *Server) addTrace(ctx *fasthttp.RequestCtx, _ *params) {
	var (
		cmd              engine.TraceCmd
		hasTxn, hasPart  bool
		hasData, badPart bool
	)
	err := decodeObject(ctx.PostBody(), false, func(sc *scanner, key []byte) error {
		var err error
		switch string(key) {
		case "transactionId":
			cmd.TransactionID, hasTxn, err = sc.optString("transactionId")
		case "partitionId":
			var v string
			if v, hasPart, err = sc.optString("partitionId"); err == nil && hasPart {
				if cmd.PartitionID, err = engine.ParseID(v); err != nil {
					badPart, err = true, nil
				}
			}
		case "data":
			hasData = true
			cmd.Data, err = sc.raw()
		case "consumerGroup":
			cmd.Group, _, err = sc.optString("consumerGroup") // null and "" both mean queue mode
		case "eventType":
			cmd.EventType, _, err = sc.optString("eventType") // null means "info"
		case "traceNames":
			cmd.Names, err = traceNames(sc)
		default:
			err = sc.skip()
		}
		return err
	})
	switch {
	case err != nil:
	case !hasTxn || !hasPart:
		err = badRequest("transactionId and partitionId are required")
	case !hasData:
		err = badRequest("data is required")
	case badPart:
		err = badRequest("partitionId must be a UUID")
	}
	for _, n := range cmd.Names {
		if err == nil && (n == "" || len(n) > maxTraceName) {
			err = badRequest("trace names must be 1 to 255 bytes")
		}
	}
	if err == nil && len(cmd.Names) > maxTraceNames {
		err = badRequest("at most 32 trace names")
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	cmd.WorkerID = s.broker.Status().ID
	id, err := raft.Propose[engine.ID](s.ctx, s.prop, cmd)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.id("traceId", id)
	w.endObject()
	send(ctx, fasthttp.StatusCreated, w)
}

// traceNames reads traceNames: a string (one name), an array of strings, or
// anything else (no names; Queen ignores other types).
func traceNames(sc *scanner) ([]string, error) {
	switch sc.peek() {
	case '"':
		v, err := sc.stringValue()
		return []string{v}, err
	case '[':
		var names []string
		err := sc.array(func(sc *scanner, _ int) error {
			if sc.peek() != '"' {
				return sc.skip()
			}
			v, err := sc.stringValue()
			names = append(names, v)
			return err
		})
		return names, err
	}
	return nil, sc.skip()
}

// TraceReader is the read side of traces a broker offers (raft.Node and
// the tests' brokers, through their engine).
type TraceReader interface {
	Traces(part engine.ID, txn string) ([]engine.Trace, error)
	TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error)
	TraceNames(limit, offset int) ([]engine.TraceName, int, error)
}

func (s *Server) traceReader() (TraceReader, error) {
	if r, ok := s.broker.(TraceReader); ok {
		return r, nil
	}
	return nil, notImplemented("this broker keeps no traces")
}

// messageTraces answers GET /api/v1/traces/{partitionId}/{transactionId}.
func (s *Server) messageTraces(ctx *fasthttp.RequestCtx, p *params) {
	r, err := s.traceReader()
	var traces []engine.Trace
	if err == nil {
		var part engine.ID
		if part, err = engine.ParseID(p.get("partitionId")); err != nil {
			err = badRequest("partitionId must be a UUID")
		} else {
			traces, err = r.Traces(part, p.get("transactionId"))
		}
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.array("traces")
	for i := range traces {
		t := &traces[i]
		w.object("")
		w.id("id", t.ID)
		writeTraceFields(&w, t)
		w.endObject()
	}
	w.endArray()
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// tracesByName answers GET /api/v1/traces/by-name/{traceName}.
func (s *Server) tracesByName(ctx *fasthttp.RequestCtx, p *params) {
	limit, offset, err := pageArgs(ctx.QueryArgs(), 100, 1000)
	var r TraceReader
	if err == nil {
		r, err = s.traceReader()
	}
	var (
		traces []engine.TraceAt
		total  int
	)
	if err == nil {
		traces, total, err = r.TracesByName(p.get("traceName"), limit, offset)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.array("traces")
	for i := range traces {
		t := &traces[i]
		w.object("")
		w.id("id", t.ID)
		w.str("transaction_id", t.TransactionID)
		w.id("partition_id", t.PartitionID)
		writeTraceFields(&w, &t.Trace)
		w.strOrNull("queue_name", t.Queue)
		w.strOrNull("partition_name", t.Partition)
		if t.HasMessage {
			w.raw("message_payload", t.Payload)
		} else {
			w.null("message_payload")
		}
		w.endObject()
	}
	w.endArray()
	w.int("total", int64(total))
	writePagination(&w, limit, offset)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// traceNamesList answers GET /api/v1/traces/names.
func (s *Server) traceNamesList(ctx *fasthttp.RequestCtx, _ *params) {
	limit, offset, err := pageArgs(ctx.QueryArgs(), 50, 1000)
	var r TraceReader
	if err == nil {
		r, err = s.traceReader()
	}
	var (
		names []engine.TraceName
		total int
	)
	if err == nil {
		names, total, err = r.TraceNames(limit, offset)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	w := startBody(ctx)
	w.object("")
	w.array("trace_names")
	for _, n := range names {
		w.object("")
		w.str("trace_name", n.Name)
		w.int("trace_count", int64(n.TraceCount))
		w.int("message_count", int64(n.MessageCount))
		w.timeMillis("last_seen", n.LastSeen)
		w.endObject()
	}
	w.endArray()
	w.int("total", int64(total))
	writePagination(&w, limit, offset)
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}

// writeTraceFields writes the fields every trace reply carries.
func writeTraceFields(w *jsonWriter, t *engine.Trace) {
	w.str("event_type", t.EventType)
	w.raw("data", t.Data)
	w.str("consumer_group", t.Group)
	w.str("worker_id", t.WorkerID)
	w.timeMillis("created_at", t.CreatedAt)
	w.array("trace_names")
	for _, n := range t.Names {
		w.str("", n)
	}
	w.endArray()
}

func writePagination(w *jsonWriter, limit, offset int) {
	w.object("pagination")
	w.int("limit", int64(limit))
	w.int("offset", int64(offset))
	w.endObject()
}
