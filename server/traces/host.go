package traces

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// Reader is the read side of traces a broker offers (raft.Node and the
// tests' brokers, through their engine).
type Reader interface {
	Traces(part engine.ID, txn string) ([]engine.Trace, error)
	TracesByName(name string, limit, offset int) ([]engine.TraceAt, int, error)
	TraceNames(limit, offset int) ([]engine.TraceName, int, error)
}

// Host is what the routes need from the HTTP server: package server
// implements it.
type Host interface {
	// Proposer is the proposer for the request req answers: on
	// raft.ErrNotLeader it sends the command to the leader when it can.
	Proposer(req *fasthttp.RequestCtx) raft.Proposer
	// ForwardOrFail answers a request whose proposal failed with err:
	// relayed whole to the leader on raft.ErrNotLeader when there is one
	// to relay to, else with the error.
	ForwardOrFail(req *fasthttp.RequestCtx, err error)
	// Fail answers the request with err as the edge's error table maps it
	// ({"error","code"}).
	Fail(req *fasthttp.RequestCtx, err error)
	// NodeID names this node: the worker_id of the traces it adds.
	NodeID() string
	// Reader is the broker's trace reader, or the error to answer when
	// the broker keeps no traces.
	Reader() (Reader, error)
}

// Routes answers the trace routes.
type Routes struct {
	host Host
	ctx  context.Context
}

// New returns the routes over h; ctx is the context of every broker call
// (never the request's: fasthttp recycles it).
func New(ctx context.Context, h Host) *Routes { return &Routes{host: h, ctx: ctx} }
