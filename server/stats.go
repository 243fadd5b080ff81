package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/reply"
)

// refreshStats answers POST /api/v1/stats/refresh: statistics are computed
// on every read, there is nothing to refresh.
func (s *Server) refreshStats(ctx *fasthttp.RequestCtx, _ *params) {
	w := reply.Start(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Bool("skipped", true)
	w.Str("reason", "statistics are computed on every read")
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}
