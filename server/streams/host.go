package streams

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/wire"
)

// Reader is the read side of streams a broker offers (raft.Node and the
// tests' brokers, through their engine).
type Reader interface {
	StreamQueryByID(id engine.ID) (engine.StreamQuery, bool, error)
	StreamState(f engine.StateFilter) ([]engine.StateRow, error)
}

// Items is how a cycle's push items are read and reported: package
// server's push decoding, so that a sink push is read as a push is.
type Items interface {
	// DecodePushItem reads one push item object; before are the items
	// already read, whose queue and partition names it reuses. Bad input
	// wraps engine.ErrInvalid.
	DecodePushItem(sc *wire.Scanner, before []engine.PushItem) (engine.PushItem, error)
	// PublicText is the client-facing text of an error, never empty.
	PublicText(err error) string
}

// Host is what the routes need from the HTTP server: package server
// implements it.
type Host interface {
	Items
	// Proposer is the proposer for the request req answers: on
	// raft.ErrNotLeader it sends the command to the leader when it can.
	Proposer(req *fasthttp.RequestCtx) raft.Proposer
	// ForwardOrFail answers a request whose proposal (or leader read)
	// failed with err: relayed whole to the leader on raft.ErrNotLeader
	// when there is one to relay to, else with the error.
	ForwardOrFail(req *fasthttp.RequestCtx, err error)
	// Fail answers the request with err as the edge's error table maps it
	// ({"error","code"}).
	Fail(req *fasthttp.RequestCtx, err error)
	// LeaderRead readies a read that must see every cycle a client was
	// answered for; a follower answers raft.ErrNotLeader.
	LeaderRead() error
	// Sealer returns the sealer of one request's push items: it seals an
	// item's payload, and marks it sealed, if a push to its queue is
	// sealed now.
	Sealer() func(it *engine.PushItem) error
	// Pushed counts the pushes a cycle made, as a push's are counted.
	Pushed(res []engine.PushResult)
	// WritePushResult writes an element of push_results as a push's
	// answer writes it.
	WritePushResult(w *wire.Writer, index int, it *engine.PushItem, r *engine.PushResult)
}

// Routes answers the streams routes.
type Routes struct {
	host   Host
	reader Reader
	ctx    context.Context
}

// New returns the routes over h and the broker's reader r (nil: the
// broker keeps no streams, and no query exists); ctx is the context of
// every broker call (never the request's: fasthttp recycles it).
func New(ctx context.Context, h Host, r Reader) *Routes {
	if r == nil {
		r = noStreams{}
	}
	return &Routes{host: h, reader: r, ctx: ctx}
}
