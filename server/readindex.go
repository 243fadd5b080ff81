package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/internal/rounds"
	"github.com/queenmq/queen/raft"
)

// Reads through any node see every write answered before them
// (docs/api.md §1, "Read consistency"). Two mechanisms, both here:
//
//   - A linearizable read (the default on every read route) first learns
//     the read index of each Raft group this node holds a replica of: the
//     leader confirms it still leads and answers the index it has applied
//     (raft.Node.ReadIndex); a follower asks it over readIndexPath. The
//     node then waits until its own replica has applied that far, and
//     answers from its own state. Concurrent reads share one ask per
//     group, and the leader shares one confirmation among concurrent asks
//     (internal/rounds), so a burst of reads costs a round trip, not one
//     each. ?consistency=stale skips all of it.
//   - A write this node relayed to a leader is answered only once this node
//     has applied what the leader had applied when it answered (appliedHeader),
//     so the client's next read here sees its write whatever it asks for.
//     A stale read thus never goes backwards on one node, and sees the
//     writes made through that node.

// readIndexPath is the route a node asks a group's leader for its read
// index on: the group in groupHeader; 200 with the index in decimal, or an
// error answer (503 not_leader from a node that does not lead the group).
const readIndexPath = "/internal/v1/read-index"

// appliedHeader is set by a node on its answer to a request another node
// relayed (a forwarded client request, a relayed command, a prepared push):
// "group:index" for each of its replicas, comma-separated, read after the
// request was served. The relaying node waits until it has applied as far
// before it answers its client.
const appliedHeader = cluster.AppliedHeader

// consistencyHeader asks for a read's consistency, as the consistency
// query parameter does (which wins when both are given): for a proxy that
// sets it for a whole client, a dashboard say, without touching its URLs.
const consistencyHeader = "X-Queen-Consistency"

// readIndexTimeout bounds a linearizable read's wait for a read index and
// for its replica to catch up: past it the read answers 503
// read_unavailable rather than stale state. It covers an election (a
// second or two) with room to spare.
const readIndexTimeout = 5 * time.Second

// readRetry is how long a read waits before asking again when no leader
// could be asked (none known yet, or the one asked had just lost office).
const readRetry = 20 * time.Millisecond

// Replicated is a broker whose state is a replica of one or more Raft
// groups (raft.Node, raft.Host), whose reads are made linearizable by a read
// index. A broker without it (raft.Local) holds the only copy of its state,
// so its reads are linearizable as they are.
type Replicated interface {
	Replicas() []*raft.Node
}

// readIndexes is the server's half of linearizable reads: this node's
// replicas, and one round of asks per group of them.
type readIndexes struct {
	replicas []*raft.Node
	asks     map[uint32]*rounds.Rounds[uint64] // by group
	wait     *metrics.PrometheusHistogram
	stale    *metrics.Counter
	slow     *metrics.Counter
}

func newReadIndexes(s *Server, b Replicated, set *metrics.Set) *readIndexes {
	r := &readIndexes{replicas: b.Replicas(), asks: map[uint32]*rounds.Rounds[uint64]{},
		wait:  set.GetOrCreatePrometheusHistogram(`queen_read_index_wait_seconds`),
		stale: set.GetOrCreateCounter(`queen_reads_total{consistency="stale"}`),
		slow:  set.GetOrCreateCounter(`queen_applied_wait_timeouts_total`)}
	for _, n := range r.replicas {
		r.asks[n.GroupID()] = rounds.New(readIndexTimeout, func(ctx context.Context) (uint64, error) {
			return s.askReadIndex(ctx, n)
		})
	}
	return r
}

// replica is this node's replica of group g, nil when it holds none.
func (r *readIndexes) replica(g uint32) *raft.Node {
	for _, n := range r.replicas {
		if n.GroupID() == g {
			return n
		}
	}
	return nil
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

// readBarrier readies a linearizable read: it returns once every replica
// of this node has applied what its group's leader had applied when the
// request arrived. It returns at once for a stale read or a broker without
// replicas. An error is the request's answer: 400 for a bad consistency,
// 503 read_unavailable when no leader confirmed in time.
func (s *Server) readBarrier(ctx *fasthttp.RequestCtx) error {
	stale, err := staleRead(ctx)
	switch {
	case err != nil:
		return err
	case s.reads == nil:
		return nil
	case stale:
		s.reads.stale.Inc()
		return nil
	}
	start := time.Now()
	c, cancel := context.WithTimeout(s.ctx, readIndexTimeout)
	defer cancel()
	reps := s.reads.replicas
	if len(reps) == 1 {
		err = s.catchUp(c, reps[0])
	} else {
		errs := make([]error, len(reps))
		var wg sync.WaitGroup
		for i, n := range reps {
			wg.Go(func() { errs[i] = s.catchUp(c, n) })
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
	s.reads.wait.UpdateDuration(start)
	return err
}

// catchUp waits until n has applied its group's read index.
func (s *Server) catchUp(ctx context.Context, n *raft.Node) error {
	var last error
	for {
		idx, err := n.ReadIndex(ctx) // the leader's own, confirmed
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrNoLeader) {
			if s.opts.ClusterSecret == "" {
				return errReadIndexRefused // the cluster plane is closed
			}
			idx, err = s.reads.asks[n.GroupID()].Do(ctx)
		}
		if err == nil {
			if err = n.WaitApplied(ctx, idx); err == nil {
				return nil
			}
		}
		if errors.Is(err, errReadIndexRefused) {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
			return &apiError{Kind: errReadUnavailable, Msg: fmt.Sprintf(
				"Group %d: no leader confirmed this read within %s (%v); retry, or ask ?consistency=stale for this node's state as it is",
				n.GroupID(), readIndexTimeout, last)}
		case <-time.After(readRetry):
		}
	}
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
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	s.toNode(req, st.LeaderHTTP, readIndexPath, "text/plain", nil)
	req.Header.Set(groupHeader, strconv.FormatUint(uint64(n.GroupID()), 10))
	if err := s.client.DoTimeout(req, resp, timeout); err != nil {
		return 0, errors.Join(raft.ErrForward, fmt.Errorf("read index of group %d at %s: %w", n.GroupID(), st.LeaderHTTP, err))
	}
	switch resp.StatusCode() {
	case fasthttp.StatusOK:
		idx, err := strconv.ParseUint(string(resp.Body()), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: read index of group %d: %q", raft.ErrForward, n.GroupID(), resp.Body())
		}
		return idx, nil
	case fasthttp.StatusUnauthorized, fasthttp.StatusForbidden:
		return 0, errReadIndexRefused
	}
	return 0, relayedError(resp)
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
		n = s.reads.replica(uint32(g))
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
	ctx.SetContentType("text/plain")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyString(strconv.FormatUint(idx, 10))
}

// stampApplied sets appliedHeader on the answer to a request another node
// relayed here.
func (s *Server) stampApplied(ctx *fasthttp.RequestCtx) {
	if s.reads == nil {
		return
	}
	var b []byte
	for i, n := range s.reads.replicas {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(n.GroupID()), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, n.Applied(), 10)
	}
	ctx.Response.Header.SetBytesV(appliedHeader, b)
}

// awaitApplied waits until this node has applied what the node that
// answered resp had (appliedHeader), so that a read here sees the write
// relayed there. The write is done whatever happens here: past
// readIndexTimeout the answer goes out anyway, and the wait is counted.
// The header is removed: it is for this node, not its client.
func (s *Server) awaitApplied(resp *fasthttp.Response) {
	v := string(resp.Header.Peek(appliedHeader))
	resp.Header.Del(appliedHeader)
	if v == "" || s.reads == nil {
		return
	}
	deadline := time.Now().Add(readIndexTimeout)
	for part := range strings.SplitSeq(v, ",") {
		gs, is, ok := strings.Cut(part, ":")
		g, err1 := strconv.ParseUint(gs, 10, 32)
		idx, err2 := strconv.ParseUint(is, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		if !s.awaitIndexUntil(uint32(g), idx, deadline) {
			return
		}
	}
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

// awaitIndex is awaitApplied for a command forwarded to group g's leader
// (package cluster), which answered with its applied index there.
func (s *Server) awaitIndex(g uint32, index uint64) {
	s.awaitIndexUntil(g, index, time.Now().Add(readIndexTimeout))
}

// awaitIndexUntil waits until this node's replica of group g has applied
// index, or deadline; false (and counted) when the deadline came first.
func (s *Server) awaitIndexUntil(g uint32, index uint64, deadline time.Time) bool {
	if index == 0 || s.reads == nil {
		return true
	}
	n := s.reads.replica(g)
	if n == nil {
		return true
	}
	c, cancel := context.WithDeadline(s.ctx, deadline)
	defer cancel()
	if err := n.WaitApplied(c, index); err != nil {
		s.reads.slow.Inc()
		s.log.Debug("relayed write: not applied here in time", "group", g, "index", index, "err", err)
		return false
	}
	return true
}
