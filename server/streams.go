package server

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/bodies"
	"github.com/queenmq/queen/server/streams"
	"github.com/queenmq/queen/server/wire"
)

// The streams routes (package streams), answered with what depends on the
// edge (streamsHost): a cycle's sink pushes are read, sealed, counted and
// answered as pushes are (push.go, crypt.go).

// newStreams builds the routes over this server; New calls it once the
// cipher is set.
func (s *Server) newStreams() *streams.Routes {
	r, _ := s.broker.(streams.Reader)
	return streams.New(s.ctx, streamsHost{s}, r)
}

// streamsHost is the server as package streams sees it (streams.Host).
type streamsHost struct{ s *Server }

func (h streamsHost) Proposer(req *fasthttp.RequestCtx) raft.Proposer { return h.s.forwarding(req) }
func (h streamsHost) ForwardOrFail(req *fasthttp.RequestCtx, err error) {
	h.s.forwardOrFail(req, err)
}
func (h streamsHost) Fail(req *fasthttp.RequestCtx, err error) { h.s.writeError(req, err) }
func (h streamsHost) Sealer() func(it *engine.PushItem) error  { return (&sealer{s: h.s}).item }
func (h streamsHost) Pushed(res []engine.PushResult)           { h.s.m.Pushed(res) }
func (h streamsHost) PublicText(err error) string              { return publicText(err) }

func (h streamsHost) DecodePushItem(sc *wire.Scanner, before []engine.PushItem) (engine.PushItem, error) {
	return bodies.PushItem(sc, before)
}

func (h streamsHost) WritePushResult(w *wire.Writer, index int, it *engine.PushItem, r *engine.PushResult) {
	writePushResult(w, "", index, it, r)
}

// LeaderRead readies a read that must see every cycle a client was
// answered for: the broker's LeaderRead (raft.Node: leadership confirmed,
// earlier terms applied), else a leader check. A follower answers
// raft.ErrNotLeader and the request is forwarded.
func (h streamsHost) LeaderRead() error {
	if r, ok := h.s.broker.(interface{ LeaderRead(context.Context) error }); ok {
		return r.LeaderRead(h.s.ctx)
	}
	if h.s.broker.Status().Role != "leader" {
		return raft.ErrNotLeader
	}
	return nil
}

func (s *Server) registerQuery(ctx *fasthttp.RequestCtx, _ *params) { s.streams.Register(ctx) }
func (s *Server) deleteQuery(ctx *fasthttp.RequestCtx, p *params) {
	s.streams.Delete(ctx, p.get("name"))
}
func (s *Server) cycle(ctx *fasthttp.RequestCtx, p *params)    { s.streams.Cycle(ctx, p.subject) }
func (s *Server) stateGet(ctx *fasthttp.RequestCtx, _ *params) { s.streams.StateGet(ctx) }
