// Package reply hands a JSON answer written with wire.Writer to a fasthttp
// response without copying it: the writer starts over the response's own
// pooled buffer, and the buffer goes back to the response at the end. Every
// package of the HTTP edge answers through it.
package reply

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/wire"
)

// Start returns a writer over the response's own pooled buffer.
func Start(ctx *fasthttp.RequestCtx) wire.Writer {
	return wire.NewWriter(ctx.Response.SwapBody(nil))
}

// Send hands the written body to the response (no copy) with status. A
// body buffer of up to memory.LargeBody goes back to the response's pooled
// buffer for the connection's next answer; a larger one is lent for this
// answer only, so that one large answer (a pop of large messages) does not
// stay with the connection, and then with fasthttp's pool, for good.
func Send(ctx *fasthttp.RequestCtx, status int, w wire.Writer) {
	if b := w.Bytes(); cap(b) > memory.LargeBody {
		ctx.Response.SetBodyRaw(b)
	} else {
		ctx.Response.SwapBody(b)
	}
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentType("application/json")
}
