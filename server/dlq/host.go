package dlq

import (
	"context"
	"log/slog"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/envelope"
	"github.com/queenmq/queen/server/wire"
)

// Reader is the broker's applied state on this node, as the routes read
// it (server.Reader has it).
type Reader interface {
	Queue(name string) (engine.QueueInfo, error)
	ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error)
	DeadLettersAt(part engine.ID, txn string) ([]engine.DeadLetter, error)
	MessageAt(part engine.ID, txn string) (engine.StoredMessage, error)
	ListMessages(f engine.MessageFilter) ([]engine.ListedMessage, error)
}

// Host is what the routes need from the HTTP server per request: package
// server implements it.
type Host interface {
	// Proposer is the proposer for the request req answers: on
	// raft.ErrNotLeader it sends the command to the leader when it can.
	Proposer(req *fasthttp.RequestCtx) raft.Proposer
	// LocalProposer is this node's own proposer: on a follower it answers
	// raft.ErrNotLeader and sends nothing anywhere.
	LocalProposer() raft.Proposer
	// Relay relays the whole request to the leader after err
	// (raft.ErrNotLeader), and reports whether it did; the leader's answer
	// is then the client's.
	Relay(req *fasthttp.RequestCtx, err error) bool
	// ForwardOrFail answers a request whose proposal failed with err:
	// relayed whole to the leader on raft.ErrNotLeader when there is one
	// to relay to, else with the error.
	ForwardOrFail(req *fasthttp.RequestCtx, err error)
	// Fail answers the request with err as the edge's error table maps it
	// ({"error","code"}).
	Fail(req *fasthttp.RequestCtx, err error)
	// NotFound reports whether the edge's error table answers err with 404.
	NotFound(err error) bool
	// Seal seals it.Payload, and marks it sealed, if a push to it.Queue is
	// sealed now; else it leaves it alone.
	Seal(it *engine.PushItem) error
	// WritePushResult writes the member key: a push result as a push's
	// answer has it.
	WritePushResult(w *wire.Writer, key string, r *engine.PushResult)
}

// Metrics are the counters the routes bump.
type Metrics struct {
	// Replays counts dead letters replayed (queen_dlq_replays_total).
	Replays *metrics.Counter
	// Deletes counts dead-letter rows deleted (queen_dlq_deletes_total).
	Deletes *metrics.Counter
	// DeadLettered counts messages an operator moved to the DLQ
	// (queen_dead_letters_total{reason="admin"}).
	DeadLettered *metrics.Counter
	// Pushed counts the pushes a replay made, as a push's are counted.
	Pushed func([]engine.PushResult)
}

// Options is what the routes need for the server's whole life.
type Options struct {
	// Reader reads the broker's applied state.
	Reader Reader
	// Cipher opens the payloads the broker sealed; nil without a key.
	Cipher *envelope.Cipher
	// Metrics are the counters the routes bump.
	Metrics Metrics
	// Logger receives the redrive's failed rows.
	Logger *slog.Logger
	// Context is the context of every broker call (never the request's:
	// fasthttp recycles it).
	Context context.Context
}

// Routes answers the dead-letter and message routes.
type Routes struct {
	host Host
	opts Options
}

// New returns the routes over h and opts.
func New(h Host, opts Options) *Routes { return &Routes{host: h, opts: opts} }
