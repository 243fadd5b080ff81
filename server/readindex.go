package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/relay"
	"github.com/queenmq/queen/server/urlquery"
)

// Reads through any node see every write answered before them
// (docs/api.md §1, "Read consistency"): package relay (Reads; its doc's
// "Read consistency") waits for them. Here are the routes' side: the
// consistency a request asks for, the barrier before a read, and the read
// index a leader answers a follower.

// consistencyHeader asks for a read's consistency, as the consistency
// query parameter does (which wins when both are given): for a proxy that
// sets it for a whole client, a dashboard say, without touching its URLs.
const consistencyHeader = "X-Queen-Consistency"

// readIndexTimeout bounds a linearizable read's wait (relay.ReadIndexTimeout).
const readIndexTimeout = relay.ReadIndexTimeout

// Replicated is a broker whose state is a replica of one or more Raft
// groups (raft.Node, cluster.Host), whose reads are made linearizable by a read
// index. A broker without it (raft.Local) holds the only copy of its state,
// so its reads are linearizable as they are.
type Replicated interface {
	Replicas() []*raft.Node
}

// hostsGroups is a broker that serves only some of its groups from its
// own replicas (cluster.Host with groups on R of N nodes): the others'
// replicas are idle, never waited for. A replica it is about to serve
// from (Joining) is waited for all the same, and it serves from it only
// once the read consistency has caught it up (SetReadCatchUp;
// cluster/hostlayout.go, "A replica that starts serving").
type hostsGroups interface {
	Hosts(g uint32) bool
	Joining(g uint32) bool
	SetReadCatchUp(f func(ctx context.Context, g uint32) error)
}

// newReads is the broker's read consistency (package relay).
func newReads(s *Server, b Replicated) *relay.Reads {
	var hosts func(uint32) bool
	hg, ok := b.(hostsGroups)
	if ok {
		hosts = func(g uint32) bool { return hg.Hosts(g) || hg.Joining(g) }
	}
	reads := relay.NewReads(b.Replicas, relay.ReadOptions{Hosts: hosts,
		Ctx: s.ctx, Ask: s.askReadIndex, Closed: s.opts.ClusterSecret == "", Refused: errReadIndexRefused,
		Unavailable: func(msg string) error { return &apiError{Kind: errReadUnavailable, Msg: msg} },
		Metrics:     s.opts.Metrics, Logger: s.log,
	})
	if ok {
		hg.SetReadCatchUp(func(ctx context.Context, g uint32) error {
			n := reads.Replica(g)
			if n == nil {
				return fmt.Errorf("no replica of group %d here", g)
			}
			err := reads.CatchUp(ctx, n)
			if errors.Is(err, errReadIndexRefused) {
				// The cluster plane is closed: a follower's linearizable
				// reads are relayed whole, and a stale read is what it is.
				return nil
			}
			return err
		})
	}
	return reads
}

// staleRead reports whether the request asks for a stale read
// (?consistency=stale, or consistencyHeader); anything but "stale" and
// "linearizable" is refused.
func staleRead(ctx *fasthttp.RequestCtx) (bool, error) {
	v := ctx.QueryArgs().Peek("consistency")
	if len(v) == 0 {
		v = ctx.Request.Header.Peek(consistencyHeader)
	}
	switch string(v) {
	case "", "linearizable":
		return false, nil
	case "stale":
		return true, nil
	}
	return false, badRequest(`consistency must be "linearizable" (the default) or "stale"`)
}

// readBarrier readies a read (relay.Reads): it returns once every
// replica of this node the read depends on has applied what its group's
// leader had applied when the request arrived, at once for a stale read
// or a broker without replicas. A read of one queue (ep.queueOf) of a
// broker of several data groups depends on the directory, caught up
// first (a queue placed through another node is known here then), and on
// the group the directory places the queue in (group 1, which answers
// for a queue placed nowhere, when it has none); any other read on every
// replica of the node. An error is the request's answer: 400 for a bad
// consistency, 503 read_unavailable when no leader confirmed in time.
func (s *Server) readBarrier(ctx *fasthttp.RequestCtx, ep *endpoint, p *params) error {
	stale, err := staleRead(ctx)
	if err != nil {
		return err
	}
	if s.queueReads && ep.queueOf != nil {
		if q := ep.queueOf(ctx, p); q != "" {
			return s.queueBarrier(stale, q)
		}
	}
	return s.reads.Barrier(stale)
}

// queueBarrier readies a read of one queue's state (relay.Reads.BarrierGroups):
// this node's directory replica first, so that a queue placed through
// another node is known here, then its replica of the group the directory
// places the queue in (group 1, which answers for a queue placed nowhere).
func (s *Server) queueBarrier(stale bool, queue string) error {
	return s.reads.BarrierGroups(stale, []uint32{raft.Directory}, func() []uint32 {
		return []uint32{cmp.Or(s.groups.holder(queue), 1)}
	})
}

// readsOneQueue are the linearizable routes whose answer is one queue's
// state, read from the group the queue is placed in alone (a Host's
// Queue, and its ListDLQ and ListMessages of one queue), by route name:
// each with the queue its request names, "" when it names none (a listing
// without a queue filter reads every group). A route here reads nothing of
// another queue, nor of another group: its barrier waits for the
// directory and that group alone (readBarrier).
var readsOneQueue = map[string]func(*fasthttp.RequestCtx, *params) string{
	"resources_queue":       pathQueue,
	"status_queue":          pathQueue,
	"status_queue_messages": pathQueue,
	"dlq":                   queryQueue,
	"messages":              queryQueue,
}

// pathQueue is the {queue} path parameter.
func pathQueue(_ *fasthttp.RequestCtx, p *params) string { return p.get("queue") }

// queryQueue is the queue filter (?queue=), as the handlers read it.
func queryQueue(ctx *fasthttp.RequestCtx, _ *params) string {
	return urlquery.String(ctx.QueryArgs(), "queue")
}

// checkQueueReads refuses a readsOneQueue entry that names no linearizable
// route of table: a route renamed would silently wait for every group
// again.
func checkQueueReads(table []route) error {
	for name := range readsOneQueue {
		if !slices.ContainsFunc(table, func(r route) bool { return r.name == name && r.read == linearizable }) {
			return fmt.Errorf("%w: readsOneQueue names %q, no linearizable route", engine.ErrInvalid, name)
		}
	}
	return nil
}

// askReadIndex asks the leader of n's group for its read index.
func (s *Server) askReadIndex(ctx context.Context, n *raft.Node) (uint64, error) {
	st := n.Status()
	if !st.HasLeader() || st.LeaderHTTP == "" || st.Leader == st.ID {
		return 0, raft.ErrNoLeader
	}
	timeout := readIndexTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	status, body, err := s.relay.PostGroup(st.LeaderHTTP, cluster.ReadIndexPath, n.GroupID(), nil, timeout)
	if err != nil {
		return 0, errors.Join(raft.ErrForward, fmt.Errorf("read index of group %d at %s: %w", n.GroupID(), st.LeaderHTTP, err))
	}
	switch status {
	case fasthttp.StatusOK:
		idx, err := strconv.ParseUint(string(body), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: read index of group %d: %q", raft.ErrForward, n.GroupID(), body)
		}
		return idx, nil
	case fasthttp.StatusUnauthorized, fasthttp.StatusForbidden:
		return 0, errReadIndexRefused
	}
	return 0, Refusal(status, body)
}

// readIndex answers POST /internal/v1/read-index: this node's read index
// of the group groupHeader names, when it leads it.
func (s *Server) readIndex(ctx *fasthttp.RequestCtx, _ *params) {
	if s.reads == nil {
		s.writeError(ctx, notImplemented("this broker has no replicas"))
		return
	}
	g, err := strconv.ParseUint(string(ctx.Request.Header.Peek(groupHeader)), 10, 32)
	var n *raft.Node
	if err == nil {
		n = s.reads.Replica(uint32(g))
	}
	if n == nil {
		s.writeError(ctx, badRequest(groupHeader+" must name a group this node holds"))
		return
	}
	c, cancel := context.WithTimeout(s.ctx, readIndexTimeout)
	defer cancel()
	idx, err := n.ReadIndex(c)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	n.Publish(idx) // the asking follower learns soon that idx committed
	ctx.SetContentType("text/plain")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyString(strconv.FormatUint(idx, 10))
}

// errReadUnavailable is returned for a linearizable read that no leader
// confirmed within readIndexTimeout; nothing stale was served.
var errReadUnavailable = errors.New("server: read not confirmed by a leader")

// errReadIndexRefused says a follower cannot ask its leader for a read
// index: it has no cluster secret (the cluster plane is closed), or the
// leader refused the one it sent. The read is then relayed to the leader
// whole, which answers it after its own confirmation; this is the answer
// when that relay is not possible either.
var errReadIndexRefused = &apiError{Kind: errReadUnavailable,
	Msg: "this node cannot confirm a read with its leader without a shared --cluster-secret, and could not relay it there; " +
		"retry, or ask ?consistency=stale for this node's state as it is"}
