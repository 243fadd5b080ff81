package server

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/server/intake"
	"github.com/queenmq/queen/server/memory"
)

// Request bodies are read under the memory budget (Options.
// MaxInflightBodyBytes) by package intake; these map its refusals to the
// error table.

// takeBody reads the request's body under the budget (intake.Take) and
// returns the bytes charged, which the caller releases once the request is
// answered. A body over Options.MaxBodyBytes is errBodyTooLarge; one the
// budget cannot hold is errOverloaded.
func (s *Server) takeBody(ctx *fasthttp.RequestCtx) (int64, error) {
	held, err := intake.Take(ctx, s.budget, int64(s.opts.MaxBodyBytes))
	switch {
	case err == nil:
		return held, nil
	case errors.Is(err, memory.ErrTooLarge):
		return 0, errBodyTooLarge
	case errors.Is(err, memory.ErrOverloaded):
		return 0, errOverloaded
	}
	return 0, fasthttpError(err)
}

// lingerUnread ends a request whose body was refused unread (overloaded,
// too large) without resetting its connection under a client still
// sending (intake.Linger); Shutdown cuts the drain short.
func (s *Server) lingerUnread(ctx *fasthttp.RequestCtx) {
	intake.Linger(ctx, intake.Timeouts{Read: s.opts.ReadTimeout, Write: s.opts.WriteTimeout, MaxDrop: int64(s.opts.MaxBodyBytes)}, s.stop)
}
