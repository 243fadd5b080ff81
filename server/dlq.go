package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/dlq"
	"github.com/queenmq/queen/server/wire"
)

// The dead-letter and message routes (package dlq): the server hands them
// its broker, cipher and counters, and answers for them what depends on the
// edge (dlqHost).

// newDLQ builds the routes over this server; New calls it once the cipher
// is set.
func (s *Server) newDLQ() *dlq.Routes {
	return dlq.New(dlqHost{s}, dlq.Options{
		Reader: s.broker,
		Cipher: s.crypt,
		Metrics: dlq.Metrics{Replays: s.m.Replays, Deletes: s.m.DLQDeletes,
			DeadLettered: s.m.DeadLettersAdmin, Pushed: s.m.Pushed},
		Logger:  s.log,
		Context: s.ctx,
	})
}

// dlqHost is the server as package dlq sees it (dlq.Host).
type dlqHost struct{ s *Server }

func (h dlqHost) Proposer(req *fasthttp.RequestCtx) raft.Proposer { return h.s.forwarding(req) }
func (h dlqHost) LocalProposer() raft.Proposer                    { return h.s.prop }
func (h dlqHost) Relay(req *fasthttp.RequestCtx, err error) bool {
	return h.s.forwardNotLeader(req, err)
}
func (h dlqHost) ForwardOrFail(req *fasthttp.RequestCtx, err error) {
	h.s.forwardOrFail(req, err)
}
func (h dlqHost) Fail(req *fasthttp.RequestCtx, err error) { h.s.writeError(req, err) }
func (h dlqHost) Seal(it *engine.PushItem) error           { return (&sealer{s: h.s}).item(it) }

func (h dlqHost) NotFound(err error) bool {
	row, _, ok := classify(err)
	return ok && row.status == fasthttp.StatusNotFound
}

func (h dlqHost) WritePushResult(w *wire.Writer, key string, r *engine.PushResult) {
	writePushResult(w, key, 0, &engine.PushItem{}, r)
}

func (s *Server) listDLQ(ctx *fasthttp.RequestCtx, _ *params)      { s.dlq.ListDLQ(ctx) }
func (s *Server) replayDLQ(ctx *fasthttp.RequestCtx, _ *params)    { s.dlq.ReplayDLQ(ctx) }
func (s *Server) listMessages(ctx *fasthttp.RequestCtx, _ *params) { s.dlq.ListMessages(ctx) }
func (s *Server) getMessage(ctx *fasthttp.RequestCtx, p *params) {
	s.dlq.GetMessage(ctx, p.get("partitionId"), p.get("transactionId"))
}
func (s *Server) deleteMessage(ctx *fasthttp.RequestCtx, p *params) {
	s.dlq.DeleteMessage(ctx, p.get("partitionId"), p.get("transactionId"))
}
func (s *Server) replayMessage(ctx *fasthttp.RequestCtx, p *params) {
	s.dlq.ReplayMessage(ctx, p.get("partitionId"), p.get("transactionId"), p.subject)
}
func (s *Server) moveToDLQ(ctx *fasthttp.RequestCtx, p *params) {
	s.dlq.MoveToDLQ(ctx, p.get("partitionId"), p.get("transactionId"))
}
func (s *Server) statusQueueMessages(ctx *fasthttp.RequestCtx, p *params) {
	s.dlq.QueueMessages(ctx, p.get("queue"))
}
