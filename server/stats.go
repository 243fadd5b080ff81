package server

import "github.com/valyala/fasthttp"

// refreshStats answers POST /api/v1/stats/refresh: statistics are computed
// on every read, there is nothing to refresh.
func (s *Server) refreshStats(ctx *fasthttp.RequestCtx, _ *params) {
	w := startBody(ctx)
	w.object("")
	w.bool("success", true)
	w.bool("skipped", true)
	w.str("reason", "statistics are computed on every read")
	w.endObject()
	send(ctx, fasthttp.StatusOK, w)
}
