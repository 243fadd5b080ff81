package server

import (
	"github.com/valyala/fasthttp"
)

// refreshStats answers POST /api/v1/stats/refresh: statistics are computed
// on every read, there is nothing to refresh.
func (s *Server) refreshStats(ctx *fasthttp.RequestCtx, _ *params) {
	w := startReply(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Bool("skipped", true)
	w.Str("reason", "statistics are computed on every read")
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}
