package server

import (
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/memory"
)

// A reply is the written bytes, with its status and JSON type; a body up to
// memory.LargeBody stays with the response as its pooled buffer, a larger
// one is lent for this answer only.
func TestSendReply_KeepsOnlySmallBuffers(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		kept bool
	}{{"small", 100, true}, {"large", memory.LargeBody + 1, false}} {
		var ctx fasthttp.RequestCtx
		w := startReply(&ctx)
		w.Array("")
		w.Str("", string(bytes.Repeat([]byte("a"), tc.size)))
		w.EndArray()
		written := w.Bytes()
		sendReply(&ctx, fasthttp.StatusAccepted, w)
		if got := ctx.Response.Body(); !bytes.Equal(got, written) {
			t.Fatalf("%s: body %d bytes, want the %d written", tc.name, len(got), len(written))
		}
		if ctx.Response.StatusCode() != fasthttp.StatusAccepted || string(ctx.Response.Header.ContentType()) != "application/json" {
			t.Fatalf("%s: status %d, type %q", tc.name, ctx.Response.StatusCode(), ctx.Response.Header.ContentType())
		}
		pooled := ctx.Response.SwapBody(nil)
		if kept := cap(pooled) > 0 && &pooled[:1][0] == &written[:1][0]; kept != tc.kept {
			t.Errorf("%s: buffer kept by the response %v, want %v", tc.name, kept, tc.kept)
		}
	}
}
