package relay

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/listener"
	"github.com/queenmq/queen/server/memory"
)

// Timeout bounds a relayed request that is not a long-poll, and a node's
// post to another.
const Timeout = 10 * time.Second

// Options is what Requests needs from the server.
type Options struct {
	// NodeID is this node's id: the forwarded header of what it sends.
	// It is called when a request is sent, not before.
	NodeID func() string
	// Transport is how this node reaches the others (package cluster,
	// shared with its Client): its HTTP client, its TLS, and the cluster
	// secret sent with this node's own posts.
	Transport *cluster.Transport
	// Reads is the node's read consistency: a relayed answer waits until
	// this node has applied what the leader had (nil without replicas).
	Reads   *Reads
	Metrics *metrics.Set
	Logger  *slog.Logger
}

// Requests relays whole client requests to a leader and copies the
// answers back, and makes this node's own posts to other nodes (storage
// reports, analytics shipments, read-index asks, membership changes). A
// command decoded from a request goes on package cluster's path instead;
// this is for the requests whose answer the leader must write.
type Requests struct {
	o         Options
	forwarded *metrics.Counter
	abandoned *metrics.Counter
	released  *metrics.Counter
}

// NewRequests makes the relay of a node.
func NewRequests(o Options) *Requests {
	return &Requests{o: o,
		forwarded: o.Metrics.GetOrCreateCounter(`queen_forwarded_requests_total`),
		abandoned: o.Metrics.GetOrCreateCounter(`queen_pop_abandoned_total`),
		released:  o.Metrics.GetOrCreateCounter(`queen_pop_released_total`),
	}
}

// Forwarded reports whether another node sent this request (the forwarded
// header): it is never relayed again, so a request hops at most once.
func Forwarded(ctx *fasthttp.RequestCtx) bool {
	return len(ctx.Request.Header.Peek(cluster.ForwardedHeader)) > 0
}

// Expired reports whether a relayed request arrived after the node that
// relayed it gave up (cluster.DeadlineHeader): it is refused, so a request
// held up by a network cut is never applied after its client was told it
// failed.
func Expired(ctx *fasthttp.RequestCtx) bool {
	v := ctx.Request.Header.Peek(cluster.DeadlineHeader)
	if len(v) == 0 {
		return false
	}
	deadline, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil && time.Now().UnixMicro() > deadline
}

// nowhere reports whether there is no leader to relay ctx to: it was
// relayed here already, or st names no other node's HTTP address.
func nowhere(ctx *fasthttp.RequestCtx, st raft.Status) bool {
	return Forwarded(ctx) || st.LeaderHTTP == "" || st.Leader == st.ID
}

// wholeRequest makes req the relay of ctx's request to st's leader, given
// up on after timeout.
func (r *Requests) wholeRequest(ctx *fasthttp.RequestCtx, req *fasthttp.Request, st raft.Status, timeout time.Duration) {
	relayCopy(&ctx.Request, req)
	req.URI().SetScheme(r.o.Transport.Scheme())
	req.SetHost(st.LeaderHTTP)
	req.Header.Set(cluster.ForwardedHeader, st.ID)
	SetDeadline(req, timeout)
}

// SetDeadline tells the receiving node when this one gives up on req.
func SetDeadline(req *fasthttp.Request, timeout time.Duration) {
	req.Header.Set(cluster.DeadlineHeader, strconv.FormatInt(time.Now().Add(timeout).UnixMicro(), 10))
}

// Request relays ctx's request to the leader st names and copies the
// leader's answer into ctx. It is used only for a request the node
// answered raft.ErrNotLeader (or would: it knows its leader before
// reading a body), which it does before proposing anything, so the
// relayed request cannot be applied twice. poll is the time a relayed
// long-poll may park on the leader (0 for any other request). relayed is
// false when there is nowhere to relay to (Forwarded, or no leader address
// known yet: the caller answers 503 and the client retries); err, when
// relayed, is the client's answer (raft.ErrForward).
func (r *Requests) Request(ctx *fasthttp.RequestCtx, st raft.Status, poll time.Duration) (relayed bool, err error) {
	if nowhere(ctx, st) {
		return false, nil
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	timeout := Timeout + poll
	r.wholeRequest(ctx, req, st, timeout)
	if poll > 0 {
		err = r.longPoll(ctx, req, resp, st.LeaderHTTP, timeout)
		if errors.Is(err, errClientGone) {
			return true, nil
		}
	} else {
		err = r.Do(req, resp, timeout)
	}
	if err != nil {
		r.o.Logger.Warn("forward to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
		return true, errors.Join(raft.ErrForward, err)
	}
	r.o.Reads.NoteApplied(resp)
	if settlesHere(ctx.Path()) {
		r.o.Reads.Settle()
	}
	relayAnswer(resp, &ctx.Response)
	r.forwarded.Inc()
	return true, nil
}

// relayCopy makes dst the request to relay for src: everything is copied
// but the body, which is lent. It is src's own buffer (the server's
// takeBody), which outlives the relay and which nothing writes to, so the
// relay costs no copy of it and leaves nothing large in fasthttp's
// request pool.
func relayCopy(src, dst *fasthttp.Request) {
	body := src.Body()
	src.SetBodyRaw(nil)
	src.CopyTo(dst)
	src.SetBodyRaw(body)
	dst.SetBodyRaw(body)
}

// relayAnswer copies the leader's answer into the client's response. A
// large body is moved rather than copied: taken out of resp's pooled buffer
// and lent to dst for this answer only, so neither the relay's pool nor the
// client's connection keeps it.
func relayAnswer(resp, dst *fasthttp.Response) {
	if len(resp.Body()) <= memory.LargeBody {
		resp.CopyTo(dst)
		return
	}
	body := resp.SwapBody(nil)
	resp.CopyTo(dst)
	dst.SetBodyRaw(body)
}

// To makes req a node-to-node POST to path on the node at addr, from this
// node: the forwarded header (it is never relayed again) and the cluster
// secret when there is one.
func (r *Requests) To(req *fasthttp.Request, addr, path string) {
	r.o.Transport.Address(req, addr, path)
	r.o.Transport.Sign(req, r.o.NodeID())
}

// Do sends req and reads its answer into resp, within timeout.
func (r *Requests) Do(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	if len(req.Header.UserAgent()) == 0 {
		req.Header.SetUserAgent(userAgent)
	}
	return r.o.Transport.Do(req, resp, timeout)
}

// userAgent is what the relay's requests sent with Do name themselves
// when their client's names nothing, as the relay's own HTTP client did
// before it shared package cluster's (cluster.Transport).
const userAgent = "queen-forward"

// Post posts a JSON body (lent, not copied) to path on the node at addr
// (To), and returns the answer's status and a copy of its body.
func (r *Requests) Post(addr, path string, body []byte, timeout time.Duration) (int, []byte, error) {
	return r.post(addr, path, "", body, timeout)
}

// PostGroup is Post of a request about Raft group g (cluster.GroupHeader).
func (r *Requests) PostGroup(addr, path string, g uint32, body []byte, timeout time.Duration) (int, []byte, error) {
	return r.post(addr, path, strconv.FormatUint(uint64(g), 10), body, timeout)
}

func (r *Requests) post(addr, path, group string, body []byte, timeout time.Duration) (int, []byte, error) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	r.To(req, addr, path)
	req.Header.SetContentType("application/json")
	if group != "" {
		req.Header.Set(cluster.GroupHeader, group)
	}
	req.SetBodyRaw(body)
	if err := r.Do(req, resp, timeout); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

// errClientGone: a relayed long-poll's client left before the answer.
var errClientGone = errors.New("relay: client left during a relayed long-poll")

// pollCheck is how often a relayed long-poll looks at its client.
const pollCheck = 100 * time.Millisecond

// longPoll relays a long-poll over a connection of its own and watches the
// client meanwhile. The leader parks the poll and watches its own peer,
// which here is this relay: when the client leaves, closing the relay's
// connection is what tells the leader, so the poll ends there without
// taking a lease. If the leader answered with messages just as the client
// left, their lease is given back (a relayed "retry" ack) instead of being
// left to expire.
func (r *Requests) longPoll(ctx *fasthttp.RequestCtx, req *fasthttp.Request, resp *fasthttp.Response, addr string, timeout time.Duration) error {
	conn, err := r.o.Transport.Dial(addr, Timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() {
		conn.SetDeadline(time.Now().Add(timeout))
		if err := send(conn, req); err != nil {
			done <- err
			return
		}
		done <- resp.Read(bufio.NewReader(conn))
	}()
	tick := time.NewTicker(pollCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil || !listener.PeerClosed(ctx.Conn()) {
				return err
			}
			return r.clientGone(ctx, req, resp, addr, nil)
		case <-tick.C:
			if listener.PeerClosed(ctx.Conn()) {
				conn.Close() // the leader sees its peer gone and ends the park
				return r.clientGone(ctx, req, resp, addr, <-done)
			}
		}
	}
}

// send writes req on conn.
func send(conn net.Conn, req *fasthttp.Request) error {
	bw := bufio.NewWriter(conn)
	if err := req.Write(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// clientGone ends a relayed long-poll whose client left: an answer that
// did come back (err nil) has its lease given back.
func (r *Requests) clientGone(ctx *fasthttp.RequestCtx, req *fasthttp.Request, resp *fasthttp.Response, addr string, err error) error {
	if err == nil {
		r.release(req, resp, addr)
	}
	r.abandoned.Inc()
	ctx.SetConnectionClose()
	return errClientGone
}

// settlesHere reports whether a relayed request to path is answered only
// once this node has applied it (Reads.Settle): a maintenance switch,
// whose state this node reads itself to route the pushes and pops it is
// sent next (it spools, or answers an empty pop, from its own replica).
func settlesHere(path []byte) bool {
	return bytes.HasPrefix(path, []byte("/api/v1/system/maintenance"))
}
