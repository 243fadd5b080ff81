package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/traces"
)

// The traces routes (package traces), answered with what depends on the
// edge (tracesHost).

// tracesHost is the server as package traces sees it (traces.Host).
type tracesHost struct{ s *Server }

func (h tracesHost) Proposer(req *fasthttp.RequestCtx) raft.Proposer { return h.s.forwarding(req) }
func (h tracesHost) ForwardOrFail(req *fasthttp.RequestCtx, err error) {
	h.s.forwardOrFail(req, err)
}
func (h tracesHost) Fail(req *fasthttp.RequestCtx, err error) { h.s.writeError(req, err) }
func (h tracesHost) NodeID() string                           { return h.s.broker.Status().ID }

func (h tracesHost) Reader() (traces.Reader, error) {
	if r, ok := h.s.broker.(traces.Reader); ok {
		return r, nil
	}
	return nil, notImplemented("this broker keeps no traces")
}

func (s *Server) addTrace(ctx *fasthttp.RequestCtx, _ *params)       { s.traces.Add(ctx) }
func (s *Server) traceNamesList(ctx *fasthttp.RequestCtx, _ *params) { s.traces.Names(ctx) }
func (s *Server) tracesByName(ctx *fasthttp.RequestCtx, p *params) {
	s.traces.ByName(ctx, p.get("traceName"))
}
func (s *Server) messageTraces(ctx *fasthttp.RequestCtx, p *params) {
	s.traces.OfMessage(ctx, p.get("partitionId"), p.get("transactionId"))
}
