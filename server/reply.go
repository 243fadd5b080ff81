package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/wire"
)

// A JSON answer written with wire.Writer goes to the response without a
// copy: the writer starts over the response's own pooled buffer
// (startReply), and the buffer goes back to the response at the end
// (sendReply). Every handler answers through these two, writeError too.

// startReply returns a writer over the response's own pooled buffer.
func startReply(ctx *fasthttp.RequestCtx) wire.Writer {
	return wire.NewWriter(ctx.Response.SwapBody(nil))
}

// sendReply hands the written body to the response (no copy) with status. A
// body buffer of up to memory.LargeBody goes back to the response's pooled
// buffer for the connection's next answer; a larger one is lent for this
// answer only, so that one large answer (a pop of large messages) does not
// stay with the connection, and then with fasthttp's pool, for good.
func sendReply(ctx *fasthttp.RequestCtx, status int, w wire.Writer) {
	if b := w.Bytes(); cap(b) > memory.LargeBody {
		ctx.Response.SetBodyRaw(b)
	} else {
		ctx.Response.SwapBody(b)
	}
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentType("application/json")
}
