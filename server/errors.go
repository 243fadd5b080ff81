package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/auth"
	"github.com/queenmq/queen/server/diskspace"
	"github.com/queenmq/queen/server/spool"
	"github.com/queenmq/queen/server/wire"
)

// Sentinel errors the edge detects itself. Validation failures are not
// minted here: they wrap engine.ErrInvalid (badRequest), as the engine's own
// rejections do, so one table entry answers both.
var (
	// errInvalidJSON is returned when a body is not valid JSON.
	errInvalidJSON = wire.ErrInvalidJSON
	// errInvalidUTF8 is returned when a string in a body is not UTF-8.
	errInvalidUTF8 = wire.ErrInvalidUTF8
	// errEmptyBody is returned when a route that needs a body gets none.
	errEmptyBody = wire.ErrEmptyBody
	// errMalformed is returned when fasthttp cannot parse the request.
	errMalformed = errors.New("server: malformed request")
	// errBodyTooLarge is returned when a body exceeds Options.MaxBodyBytes.
	errBodyTooLarge = errors.New("server: request body too large")
	// errHeadersTooLarge is returned when the request headers do not fit
	// fasthttp's read buffer.
	errHeadersTooLarge = errors.New("server: request headers too large")
	// errRequestTimeout is returned when a request is not read in time.
	errRequestTimeout = errors.New("server: request read timed out")
	// errNoSuchRoute is returned for a path no route matches.
	errNoSuchRoute = errors.New("server: no such route")
	// errMethodNotAllowed is returned for a known path with another method.
	errMethodNotAllowed = errors.New("server: method not allowed")
	// errForwardExpired is returned by the leader for a relayed request
	// that arrived after the relaying follower gave up on it.
	errForwardExpired = errors.New("server: relayed request arrived after its deadline")
	// errNoSpool is returned for a push during push maintenance on a server
	// without a spool directory.
	errNoSpool = errors.New("server: push maintenance is on and this node has no spool")
	// errOriginNotAllowed is returned for a browser request whose Origin
	// is not in Options.CORSOrigins.
	errOriginNotAllowed = errors.New("server: origin not allowed")
	// errClusterClosed is returned for a node-to-node route when no
	// cluster secret is configured and the caller holds no admin token.
	errClusterClosed = errors.New("server: the cluster plane is closed")
	// errClusterSecret is returned for a node-to-node route whose
	// X-Queen-Cluster-Secret header is missing or wrong.
	errClusterSecret = errors.New("server: missing or wrong cluster secret")
	// errSpoolWrite (spool.ErrWrite) is wrapped when a push during push maintenance could not
	// be made durable in the spool (a write, fsync or rename failed); the
	// push was not buffered.
	errSpoolWrite = spool.ErrWrite
	// errSpoolUnopened stops a follower's spool replay at a sealed item its
	// key does not open (QUEEN_ENCRYPTION_KEY changed or unset since the
	// item was spooled); the file stays for a later attempt. Only logged.
	errSpoolUnopened = errors.New("server: spool replay: a sealed item does not open under this node's QUEEN_ENCRYPTION_KEY")
	// errOverloaded is returned for a request whose body would take the
	// bytes of bodies held at once past Options.MaxInflightBodyBytes; its
	// body was not read (or, chunked, not past the bound).
	errOverloaded = errors.New("server: too many request bodies in flight")
	// errNotImplemented is returned by routes whose feature does not exist
	// yet (maintenance mode, message listing).
	errNotImplemented = errors.New("server: not implemented")
)

// errorCode is one row of the error table: the HTTP status and the stable
// machine code a sentinel maps to (docs/decisions.md C1, C2). Codes are public API:
// never renumber or rename them.
type errorCode struct {
	err    error
	status int
	code   string
	// message is the public text; "" uses the error's own detail (safe for
	// the client-input errors that leave it empty).
	message string
}

// errorTable is the one place errors become HTTP answers; the first entry
// the error matches (errors.Is) wins. Anything else is a 500 "internal"
// whose details are logged, not returned.
var errorTable = [...]errorCode{
	// Authentication first: an auth error may wrap a library cause (a
	// JWKS fetch timeout) that a later row would otherwise claim. Their
	// text is Queen's, from auth.PublicMessage.
	{auth.ErrAuthRequired, fasthttp.StatusUnauthorized, "unauthorized", ""},
	{auth.ErrInvalidToken, fasthttp.StatusUnauthorized, "invalid_token", ""},
	{auth.ErrForbidden, fasthttp.StatusForbidden, "forbidden", ""},
	{auth.ErrJWKS, fasthttp.StatusInternalServerError, "jwks_unavailable", ""},
	{auth.ErrConfig, fasthttp.StatusInternalServerError, "auth_misconfigured", ""},
	{engine.ErrInvalid, fasthttp.StatusBadRequest, "invalid_argument", ""},
	{errInvalidJSON, fasthttp.StatusBadRequest, "invalid_json", ""},
	{errInvalidUTF8, fasthttp.StatusBadRequest, "invalid_utf8", ""},
	{errEmptyBody, fasthttp.StatusBadRequest, "empty_body", "Empty request body"},
	{errMalformed, fasthttp.StatusBadRequest, "bad_request", "Bad Request"},
	{errNoSuchRoute, fasthttp.StatusNotFound, "no_such_route", "Not Found"},
	{errMethodNotAllowed, fasthttp.StatusMethodNotAllowed, "method_not_allowed", "Method Not Allowed"},
	{errRequestTimeout, fasthttp.StatusRequestTimeout, "request_timeout", "Request Timeout"},
	{errBodyTooLarge, fasthttp.StatusRequestEntityTooLarge, "body_too_large", "Request body too large"},
	{errHeadersTooLarge, fasthttp.StatusRequestHeaderFieldsTooLarge, "headers_too_large", "Request headers too large"},
	{engine.ErrQueueNotFound, fasthttp.StatusNotFound, "queue_not_found", "Queue not found"},
	{engine.ErrPartitionNotFound, fasthttp.StatusNotFound, "partition_not_found", "Partition not found"},
	{engine.ErrNoDeadLetter, fasthttp.StatusNotFound, "no_dead_letter", "No dead-letter row for this address"},
	{engine.ErrMessageNotFound, fasthttp.StatusNotFound, "message_not_found", "Message not found"},
	{engine.ErrQueryNotFound, fasthttp.StatusNotFound, "query_not_found", "query not found"},
	{raft.ErrUnknownMember, fasthttp.StatusNotFound, "unknown_member", "No such member: the cluster does not count this node id"},
	{engine.ErrTraceLimit, fasthttp.StatusConflict, "trace_limit", "The message holds as many traces as it may (256)"},
	{engine.ErrAlreadyConsumed, fasthttp.StatusConflict, "already_consumed", "Message already consumed by this consumer group"},
	{errOriginNotAllowed, fasthttp.StatusForbidden, "origin_not_allowed", "Origin not allowed"},
	{errClusterClosed, fasthttp.StatusForbidden, "cluster_closed", "Cluster membership is closed: start every node with --cluster-secret (QUEEN_CLUSTER_SECRET) and send it in X-Queen-Cluster-Secret"},
	{errClusterSecret, fasthttp.StatusForbidden, "cluster_secret_invalid", "Missing or wrong cluster secret (X-Queen-Cluster-Secret)"},
	{raft.ErrNotPreparable, fasthttp.StatusBadRequest, "not_preparable", ""},
	{errLeaderSpools, fasthttp.StatusServiceUnavailable, codeLeaderSpools, "Push maintenance is on: the node that received the push buffers it"},
	{raft.ErrQuorumRisk, fasthttp.StatusConflict, "quorum_at_risk", ""},
	{raft.ErrDraining, fasthttp.StatusServiceUnavailable, "draining", ""},
	{raft.ErrSpansGroups, fasthttp.StatusConflict, "spans_groups", ""},
	{raft.ErrPlaced, fasthttp.StatusConflict, "placed_elsewhere", ""},
	{raft.ErrClusterVersion, fasthttp.StatusConflict, "cluster_version", ""},
	{errNotImplemented, fasthttp.StatusNotImplemented, "not_implemented", ""},
	{errNoSpool, fasthttp.StatusInternalServerError, "spool_unavailable", "Push maintenance is on and this node cannot buffer pushes"},
	{raft.ErrFaulted, fasthttp.StatusServiceUnavailable, "storage_fault", "This node's storage failed and is recovering; the command's outcome is unknown, retry it"},
	{errSpoolWrite, fasthttp.StatusInternalServerError, "spool_write_failed", "Push maintenance is on and this node could not write the push to its spool durably; nothing was kept"},
	{errOverloaded, fasthttp.StatusServiceUnavailable, "overloaded", "The server holds as many request bodies as it may; retry later"},
	{diskspace.ErrBelowReserve, fasthttp.StatusInsufficientStorage, "insufficient_storage", "Insufficient storage"},
	{raft.ErrNoLeader, fasthttp.StatusServiceUnavailable, "no_leader", "No leader: the cluster cannot accept commands right now"},
	{raft.ErrNotLeader, fasthttp.StatusServiceUnavailable, "not_leader", "This node is not the leader and could not forward the request"},
	{raft.ErrLeadershipLost, fasthttp.StatusServiceUnavailable, "leadership_lost", "Leadership changed while the command was in flight; its outcome is unknown"},
	{raft.ErrTimeout, fasthttp.StatusServiceUnavailable, "timeout", "The command was not committed in time; its outcome is unknown"},
	{raft.ErrLeadershipTransfer, fasthttp.StatusServiceUnavailable, "leadership_transfer", "The leader is handing its leadership over; the command was not applied, retry it"},
	{raft.ErrRestored, fasthttp.StatusServiceUnavailable, "snapshot_restored", "A snapshot was restored while the command was in flight; its outcome is unknown"},
	{engine.ErrQueueMoving, fasthttp.StatusServiceUnavailable, "queue_moving", "The queue is moving to another Raft group; retry the request"},
	{raft.ErrOutcomeUnknown, fasthttp.StatusServiceUnavailable, "outcome_unknown", "Part of the request went to another Raft group and its outcome is unknown; retry the whole request with the same transaction ids"},
	{raft.ErrShutdown, fasthttp.StatusServiceUnavailable, "shutting_down", "The node is shutting down"},
	{raft.ErrForward, fasthttp.StatusServiceUnavailable, "forward_failed", "Forwarding to the leader failed; if the request reached it, its outcome is unknown: retry it"},
	{errReadUnavailable, fasthttp.StatusServiceUnavailable, "read_unavailable", "No leader confirmed this read in time; retry, or ask ?consistency=stale for this node's state as it is"},
	{errForwardExpired, fasthttp.StatusServiceUnavailable, "forward_expired", "The relayed request arrived after its deadline and was not applied"},
	{engine.ErrClosed, fasthttp.StatusServiceUnavailable, "shutting_down", "The node is shutting down"},
	{context.DeadlineExceeded, fasthttp.StatusServiceUnavailable, "timeout", "The request timed out"},
	{context.Canceled, fasthttp.StatusServiceUnavailable, "canceled", "The request was canceled"},
}

// apiError carries the client-facing text of an error the edge detects; the
// sentinel it wraps picks the table row. Bad input found by the JSON
// scanner comes as the same type.
type apiError = wire.Error

// badRequest is a 400 invalid_argument with msg as the client's text.
func badRequest(msg string) error { return wire.BadRequest(msg) }

// notImplemented is a 501 not_implemented with msg as the client's text.
func notImplemented(msg string) error { return &apiError{Kind: errNotImplemented, Msg: msg} }

// classify maps err to its table row and public message. ok is false for
// an unknown error.
func classify(err error) (row errorCode, msg string, ok bool) {
	for _, r := range errorTable {
		if !errors.Is(err, r.err) {
			continue
		}
		var ae *apiError
		switch {
		case errors.As(err, &ae):
			msg = ae.Msg
		case auth.PublicMessage(err) != "":
			msg = auth.PublicMessage(err)
		case r.message != "":
			msg = r.message
		default:
			// engine: "engine: invalid argument: <detail>" -> "<detail>".
			msg = strings.TrimPrefix(strings.TrimPrefix(err.Error(), r.err.Error()), ": ")
			if msg == "" {
				msg = r.err.Error()
			}
		}
		return r, msg, true
	}
	return errorCode{}, "", false
}

// publicText is the client-facing text of an error, never empty: an error
// the table does not know reads "internal error" (it is logged where it
// arose, as writeError logs a 500's).
func publicText(err error) string {
	if _, msg, ok := classify(err); ok && msg != "" {
		return msg
	}
	return "internal error"
}

// isNotFound reports whether the error table answers err with 404.
func isNotFound(err error) bool {
	row, _, ok := classify(err)
	return ok && row.status == fasthttp.StatusNotFound
}

// writeError answers a request with the error's status and the docs/decisions.md C2 body
// {"error": "<message>", "code": "<code>"}. It is the only way handlers
// report errors.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, err error) {
	row, msg, ok := classify(err)
	if !ok {
		s.log.Error("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "err", err)
		row, msg = errorCode{status: fasthttp.StatusInternalServerError, code: "internal"}, "Internal Server Error"
	} else if row.status == fasthttp.StatusServiceUnavailable {
		level := slog.LevelWarn
		if errors.Is(err, engine.ErrQueueMoving) {
			// Expected for every command on a queue while it moves, and
			// retried by the node that sent it: a warning each would
			// flood the log (some 100 lines a second a node).
			level = slog.LevelDebug
		}
		s.log.Log(context.Background(), level, "request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "code", row.code, "err", err)
	}
	switch row.status {
	case fasthttp.StatusServiceUnavailable:
		ctx.Response.Header.Set("Retry-After", "1")
	case fasthttp.StatusInsufficientStorage:
		ctx.Response.Header.Set("Retry-After", storageRetryAfter)
	case fasthttp.StatusUnauthorized:
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="queen"`)
	case fasthttp.StatusInternalServerError:
		if ok {
			s.log.Error("request failed", "method", string(ctx.Method()), "path", string(ctx.Path()), "code", row.code, "err", err)
		}
	}
	w := startReply(ctx)
	w.Object("")
	w.Str("error", msg)
	w.Str("code", row.code)
	w.EndObject()
	sendReply(ctx, row.status, w)
}

// fasthttpError maps an error fasthttp met while reading a request (it
// calls Server.ErrorHandler before any handler runs) to a sentinel.
func fasthttpError(err error) error {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		return errBodyTooLarge
	case errors.As(err, &small):
		return errHeadersTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		return errRequestTimeout
	}
	return errMalformed
}
