package intake

import (
	"errors"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/memory"
)

// A body fasthttp has read already (in-process requests) is charged and
// copied: what Take leaves as the body is the request's own buffer, not
// the one the caller set; too large or past the budget, nothing is charged.
func TestTake_ReadBody(t *testing.T) {
	b := memory.NewBudget(10 * memory.BodyCost)
	take := func(body string, maxBody int64) (*fasthttp.RequestCtx, int64, error) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetBodyRaw([]byte(body))
		held, err := Take(&ctx, b, maxBody)
		return &ctx, held, err
	}
	if _, _, err := take("0123456789ab", 11); !errors.Is(err, memory.ErrTooLarge) {
		t.Fatalf("12 bytes over a limit of 11: %v, want ErrTooLarge", err)
	}
	orig := []byte("0123456789")
	var ctx fasthttp.RequestCtx
	ctx.Request.SetBodyRaw(orig)
	held, err := Take(&ctx, b, 100)
	if err != nil || held != 10*memory.BodyCost || b.Held() != held {
		t.Fatalf("10 bytes: held %d (budget %d), %v; want %d", held, b.Held(), err, 10*memory.BodyCost)
	}
	orig[0] = 'x'
	if got := string(ctx.PostBody()); got != "0123456789" {
		t.Fatalf("body %q aliases the caller's buffer", got)
	}
	if _, _, err := take("0", 100); !errors.Is(err, memory.ErrOverloaded) {
		t.Fatalf("a byte past a full budget: %v, want ErrOverloaded", err)
	}
	if _, held, err := take("", 100); held != 0 || err != nil {
		t.Fatalf("empty body: held %d, %v", held, err)
	}
}
