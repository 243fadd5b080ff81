package server

import (
	_ "embed"

	"github.com/valyala/fasthttp"
)

// dlqPage is the DLQ page (B9): one static file, no build step, that drives
// the public API from the browser: list with the B1 filters, payload and
// error view, replay, replay with an edited payload (B4), delete.
//
//go:embed web/dlq.html
var dlqPage []byte

// dlqUI answers GET /dlq with the page.
func (s *Server) dlqUI(ctx *fasthttp.RequestCtx, _ *params) {
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBody(dlqPage)
}
