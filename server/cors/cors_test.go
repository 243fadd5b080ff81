package cors

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// apply runs p on a request to host carrying origin ("" for none).
func apply(p Policy, host, origin string) (bool, *fasthttp.ResponseHeader) {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetHost(host)
	if origin != "" {
		ctx.Request.Header.Set("Origin", origin)
	}
	ok := p.Apply(&ctx)
	return ok, &ctx.Response.Header
}

// Origins match without regard to case; the broker's own origin is always
// allowed, whatever its scheme; a blank list allows any origin.
func TestPolicy_Apply(t *testing.T) {
	p, err := Compile([]string{" HTTPS://App.Example ", ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin string
		ok     bool
		allow  string
	}{
		{"https://app.example", true, "https://app.example"},
		{"http://app.example", false, ""},
		{"http://broker:6632", true, "http://broker:6632"},
		{"", true, ""},
	} {
		ok, h := apply(p, "broker:6632", tc.origin)
		if ok != tc.ok || string(h.Peek("Access-Control-Allow-Origin")) != tc.allow {
			t.Errorf("origin %q: allowed %v with %q, want %v with %q", tc.origin, ok, h.Peek("Access-Control-Allow-Origin"), tc.ok, tc.allow)
		}
	}
	blank, err := Compile([]string{" "})
	if err != nil {
		t.Fatal(err)
	}
	if ok, h := apply(blank, "broker", "https://any.example"); !ok || string(h.Peek("Access-Control-Allow-Origin")) != "*" {
		t.Fatalf("blank list: allowed %v with %q, want * for any origin", ok, h.Peek("Access-Control-Allow-Origin"))
	}
}
