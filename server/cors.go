package server

import (
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/cors"
)

// corsPolicy is Options.CORSOrigins, compiled (package cors).
type corsPolicy = cors.Policy

func newCORSPolicy(list []string) (corsPolicy, error) { return cors.Compile(list) }

// setCORS adds the CORS headers to a reply and reports whether the
// request's origin may be served (package cors).
func (s *Server) setCORS(ctx *fasthttp.RequestCtx) bool { return s.cors.Apply(ctx) }
