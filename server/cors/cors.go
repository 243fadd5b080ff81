package cors

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
)

// Policy is a compiled list of allowed origins; the zero Policy refuses
// every request with an Origin header (use Compile).
type Policy struct {
	any     bool
	origins map[string]bool // "scheme://host[:port]", lower case
}

// Compile checks and compiles a list of origins ("scheme://host[:port]",
// or "*"); an empty list, or one holding "*", allows any origin. A
// malformed origin is engine.ErrInvalid.
func Compile(list []string) (Policy, error) {
	p := Policy{origins: map[string]bool{}}
	for _, o := range list {
		o = strings.TrimSpace(o)
		switch {
		case o == "":
			continue
		case o == "*":
			p.any = true
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return p, fmt.Errorf("%w: CORS origin %q is not scheme://host[:port]", engine.ErrInvalid, o)
		}
		p.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	if len(p.origins) == 0 {
		p.any = true
	}
	return p, nil
}

// Apply adds the CORS headers of docs/api.md §1.3 to a reply and reports
// whether the request's origin may be served. A request without an Origin
// header is never refused.
func (p Policy) Apply(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Response.Header
	origin := ctx.Request.Header.Peek("Origin")
	allowed := true
	switch {
	case p.any:
		h.Set("Access-Control-Allow-Origin", "*")
	case len(origin) == 0:
	case p.origins[strings.ToLower(string(origin))] || sameOrigin(origin, ctx.Host()):
		h.SetBytesV("Access-Control-Allow-Origin", origin)
		h.Set("Vary", "Origin")
	default:
		h.Set("Vary", "Origin")
		allowed = false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
	h.Set("Access-Control-Max-Age", "86400")
	return allowed
}

// sameOrigin reports whether origin names the host the request was sent to
// (a page the broker served itself, such as /dlq).
func sameOrigin(origin, host []byte) bool {
	_, rest, ok := bytes.Cut(origin, []byte("://"))
	return ok && len(host) > 0 && bytes.EqualFold(rest, host)
}
