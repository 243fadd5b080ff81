package server

import (
	"github.com/valyala/fasthttp"
)

// Queen's dashboard has a Migration page that copies its PostgreSQL
// database to another with pg_dump and pg_restore. This broker keeps its
// data in Pebble, replicated by Raft: there is nothing to migrate that
// way, so the status is always idle and the actions are 501 (docs/api.md
// §14.3).

// migrationNote is what both answers say.
const migrationNote = "migration to PostgreSQL does not apply: this broker stores its data in Pebble, replicated by Raft; " +
	"add a node to the cluster to copy it"

// migrationStatus answers GET /api/v1/migration/status.
func (s *Server) migrationStatus(ctx *fasthttp.RequestCtx, _ *params) {
	w := startReply(ctx)
	w.Object("")
	w.Str("status", "idle")
	w.Bool("supported", false)
	w.Str("note", migrationNote)
	w.EndObject()
	sendReply(ctx, fasthttp.StatusOK, w)
}

// migrationAction answers POST /api/v1/migration/{test-connection, start,
// validate, reset}: 501 not_implemented.
func (s *Server) migrationAction(ctx *fasthttp.RequestCtx, _ *params) {
	s.writeError(ctx, notImplemented(migrationNote))
}
