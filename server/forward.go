package server

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/listener"
	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/reply"
	"github.com/queenmq/queen/server/wire"
)

// forwardedHeader marks a request a follower relayed to the leader; the
// leader never relays it again, so a request hops at most once.
const forwardedHeader = cluster.ForwardedHeader

// deadlineHeader carries the time (unix µs) after which the follower has
// given up on a relayed request. The leader refuses one that arrives later,
// so a request held up by a network cut is never applied after its client
// was told it failed.
const deadlineHeader = cluster.DeadlineHeader

// forwardTimeout bounds a relayed request that is not a long-poll.
const forwardTimeout = 10 * time.Second

// forward relays a request this node cannot serve to the leader and copies
// the leader's answer back. It is used only for raft.ErrNotLeader, which the
// node returns before proposing anything, so the relayed request cannot be
// applied twice. It reports false when there is nowhere to relay to: the
// request was already relayed once, or the leader's HTTP address is not
// known yet (the caller then answers 503 and the client retries).
func (s *Server) forward(ctx *fasthttp.RequestCtx) bool {
	return s.forwardAs(ctx, s.broker.Status())
}

// forwardNotLeader forwards a request the broker answered
// raft.ErrNotLeader: to the leader of the group a *raft.NotLeaderError
// names, else, with one group, to the leader. A grouped broker's plain
// ErrNotLeader (a relayed part answered so) is not forwarded: which group
// it meant is lost, and the client retries the 503.
func (s *Server) forwardNotLeader(ctx *fasthttp.RequestCtx, err error) bool {
	var nl *raft.NotLeaderError
	switch {
	case errors.As(err, &nl):
		return s.forwardAs(ctx, nl.Status)
	case !s.groups.leaderKnownUnread():
		return false
	}
	return s.forward(ctx)
}

// relayFirst relays a write to the leader before its body is read, when
// this node is not the leader and knows who is: a follower would decode,
// validate and seal the body only to be told raft.ErrNotLeader, and the
// leader does all of it again. Bad input is answered by the leader, with
// the same 400 the follower would have given. It reports whether the
// request was answered.
func (s *Server) relayFirst(ctx *fasthttp.RequestCtx) bool {
	if !s.groups.leaderKnownUnread() {
		return false // which group's leader serves it is in the body
	}
	st := s.broker.Status()
	return st.Role != "leader" && s.forwardAs(ctx, st)
}

func (s *Server) forwardAs(ctx *fasthttp.RequestCtx, st raft.Status) bool {
	if len(ctx.Request.Header.Peek(forwardedHeader)) > 0 {
		return false
	}
	if st.LeaderHTTP == "" || st.Leader == st.ID {
		return false
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	relayCopy(&ctx.Request, req)
	req.URI().SetScheme(s.relayScheme())
	req.SetHost(st.LeaderHTTP)
	req.Header.Set(forwardedHeader, st.ID)
	// A relayed long-poll parks on the leader for up to its own timeout.
	timeout := forwardTimeout
	longPoll := queryBool(ctx.QueryArgs(), "wait", false)
	if longPoll {
		timeout += s.popTimeout(ctx.QueryArgs())
	}
	req.Header.Set(deadlineHeader, strconv.FormatInt(time.Now().Add(timeout).UnixMicro(), 10))
	var err error
	if longPoll {
		err = s.relayLongPoll(ctx, req, resp, st.LeaderHTTP, timeout)
		if errors.Is(err, errClientGone) {
			return true
		}
	} else {
		err = s.client.DoTimeout(req, resp, timeout)
	}
	if err != nil {
		s.log.Warn("forward to leader", "leader", st.Leader, "addr", st.LeaderHTTP, "err", err)
		s.writeError(ctx, errors.Join(raft.ErrForward, err))
		return true
	}
	s.reads.AwaitApplied(resp)
	relayAnswer(resp, &ctx.Response)
	s.m.forwarded.Inc()
	return true
}

// relayCopy makes dst the request to relay for src: everything is copied
// but the body, which is lent. It is src's own buffer (takeBody), which
// outlives the relay and which nothing writes to, so the relay costs no
// copy of it and leaves nothing large in fasthttp's request pool.
func relayCopy(src, dst *fasthttp.Request) {
	body := src.Body()
	src.SetBodyRaw(nil)
	src.CopyTo(dst)
	src.SetBodyRaw(body)
	dst.SetBodyRaw(body)
}

// relayAnswer copies the leader's answer into the client's response. A
// large body is moved rather than copied: taken out of resp's pooled buffer
// and lent to dst for this answer only (as send does), so neither the
// relay's pool nor the client's connection keeps it.
func relayAnswer(resp, dst *fasthttp.Response) {
	if len(resp.Body()) <= memory.LargeBody {
		resp.CopyTo(dst)
		return
	}
	body := resp.SwapBody(nil)
	resp.CopyTo(dst)
	dst.SetBodyRaw(body)
}

// Membership is implemented by brokers whose cluster can grow and shrink
// (raft.Node). The join and leave routes answer 501 without it.
// force makes a change the broker would refuse as a risk to its quorum.
type Membership interface {
	Join(id, addr string, force bool) error
	Leave(id string, force bool) error
}

// clustered reports whether the broker is a cluster of nodes (rather
// than one engine in process): other nodes send it reports.
func (s *Server) clustered() bool {
	_, ok := s.broker.(Membership)
	_, groups := s.broker.(GroupMembership)
	return ok || groups
}

// join adds a voter: POST /internal/v1/cluster/join {"id","addr","force"}.
func (s *Server) join(ctx *fasthttp.RequestCtx, _ *params) {
	s.membership(ctx, true)
}

// leave removes a server: POST /internal/v1/cluster/leave {"id","force"}.
func (s *Server) leave(ctx *fasthttp.RequestCtx, _ *params) {
	s.membership(ctx, false)
}

func (s *Server) membership(ctx *fasthttp.RequestCtx, join bool) {
	m, ok := s.broker.(Membership)
	gm, grouped := s.broker.(GroupMembership)
	if !ok && !grouped {
		s.writeError(ctx, notImplemented("this broker has no cluster membership"))
		return
	}
	var id, addr string
	var force bool
	err := wire.DecodeObject(ctx.PostBody(), false, func(sc *wire.Scanner, key []byte) (err error) {
		switch string(key) {
		case "id":
			id, _, err = sc.OptString("id")
		case "addr":
			addr, _, err = sc.OptString("addr")
		case "force":
			force, _, err = sc.OptBool("force")
		default:
			err = sc.Skip()
		}
		return err
	})
	switch {
	case err != nil:
	case id == "":
		err = badRequest("id is required")
	case join && addr == "":
		err = badRequest("addr (the node's Raft host:port) is required")
	case grouped:
		err = s.changeGroups(ctx, gm, join, id, addr, force)
	case join:
		err = m.Join(id, addr, force)
	default:
		err = m.Leave(id, force)
	}
	if err != nil {
		s.forwardOrFail(ctx, err) // a follower relays the change to the leader
		return
	}
	w := reply.Start(ctx)
	w.Object("")
	w.Bool("success", true)
	w.Str("id", id)
	w.EndObject()
	reply.Send(ctx, fasthttp.StatusOK, w)
}

// toNode makes req a node-to-node POST of body to path on the node at
// addr: as this node (forwardedHeader: a node's request is never relayed
// again) with the cluster secret. The body is lent, not copied.
func (s *Server) toNode(req *fasthttp.Request, addr, path, contentType string, body []byte) {
	req.SetRequestURI(s.relayScheme() + "://" + addr + path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType(contentType)
	req.Header.Set(forwardedHeader, s.nodeID())
	req.Header.Set(clusterSecretHeader, s.opts.ClusterSecret)
	req.SetBodyRaw(body)
}

// relayScheme is the scheme relays reach the leader with.
func (s *Server) relayScheme() string {
	if s.opts.RelayTLS != nil {
		return "https"
	}
	return "http"
}

// dialLeader opens a connection of its own to the leader's HTTP API, over
// TLS when the cluster uses it.
func (s *Server) dialLeader(addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: forwardTimeout}
	if s.opts.RelayTLS == nil {
		return d.Dial("tcp", addr)
	}
	cfg := s.opts.RelayTLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, cfg)
}

// expired reports whether a relayed request arrived after the follower
// that relayed it gave up.
func expired(ctx *fasthttp.RequestCtx) bool {
	v := ctx.Request.Header.Peek(deadlineHeader)
	if len(v) == 0 {
		return false
	}
	deadline, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil && time.Now().UnixMicro() > deadline
}

// errClientGone: a relayed long-poll's client left before the answer.
var errClientGone = errors.New("server: client left during a relayed long-poll")

// relayCheck is how often a relayed long-poll looks at its client.
const relayCheck = 100 * time.Millisecond

// relayLongPoll relays a long-poll over a connection of its own and watches
// the client meanwhile. The leader parks the poll and watches its own peer,
// which here is this relay: when the client leaves, closing the relay's
// connection is what tells the leader, so the poll ends there without taking
// a lease. If the leader answered with messages just as the client left, their
// lease is given back (a relayed "retry" ack) instead of being left to expire.
func (s *Server) relayLongPoll(ctx *fasthttp.RequestCtx, req *fasthttp.Request, resp *fasthttp.Response, addr string, timeout time.Duration) error {
	conn, err := s.dialLeader(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() {
		conn.SetDeadline(time.Now().Add(timeout))
		bw := bufio.NewWriter(conn)
		if err := req.Write(bw); err != nil {
			done <- err
			return
		}
		if err := bw.Flush(); err != nil {
			done <- err
			return
		}
		done <- resp.Read(bufio.NewReader(conn))
	}()
	tick := time.NewTicker(relayCheck)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil || !listener.PeerClosed(ctx.Conn()) {
				return err
			}
			return s.clientGone(ctx, req, resp, addr, nil)
		case <-tick.C:
			if listener.PeerClosed(ctx.Conn()) {
				conn.Close() // the leader sees its peer gone and ends the park
				return s.clientGone(ctx, req, resp, addr, <-done)
			}
		}
	}
}

// clientGone ends a relayed long-poll whose client left: an answer that did
// come back (err nil) has its lease given back.
func (s *Server) clientGone(ctx *fasthttp.RequestCtx, req *fasthttp.Request, resp *fasthttp.Response, addr string, err error) error {
	if err == nil {
		s.releaseRelayed(req, resp, addr)
	}
	s.m.popAbandoned.Inc()
	ctx.SetConnectionClose()
	return errClientGone
}

// releaseRelayed gives back the lease of a relayed pop answer nobody will
// read: a "retry" ack, relayed to the leader, on the first message of each
// partition (as release does for a local pop). It carries the pop's own
// Authorization header: the follower never acts on the leader under an
// identity of its own.
func (s *Server) releaseRelayed(pop *fasthttp.Request, resp *fasthttp.Response, addr string) {
	if resp.StatusCode() != fasthttp.StatusOK {
		return
	}
	var popped struct {
		LeaseID  string `json:"leaseId"`
		Group    string `json:"consumerGroup"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(resp.Body(), &popped); err != nil || popped.LeaseID == "" {
		return
	}
	type ackItem struct {
		TransactionID string `json:"transactionId"`
		PartitionID   string `json:"partitionId"`
		LeaseID       string `json:"leaseId"`
		Status        string `json:"status"`
	}
	body := struct {
		Group string    `json:"consumerGroup,omitempty"`
		Acks  []ackItem `json:"acknowledgments"`
	}{Group: popped.Group}
	seen := map[string]bool{}
	for _, m := range popped.Messages {
		if !seen[m.PartitionID] {
			seen[m.PartitionID] = true
			body.Acks = append(body.Acks, ackItem{m.TransactionID, m.PartitionID, popped.LeaseID, "retry"})
		}
	}
	data, err := json.Marshal(body)
	if err != nil || len(body.Acks) == 0 {
		return
	}
	req := fasthttp.AcquireRequest()
	ack := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(ack)
	req.SetRequestURI(s.relayScheme() + "://" + addr + "/api/v1/ack/batch")
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set(forwardedHeader, s.broker.Status().ID)
	if a := pop.Header.Peek(fasthttp.HeaderAuthorization); len(a) > 0 {
		req.Header.SetBytesV(fasthttp.HeaderAuthorization, a)
	}
	req.SetBody(data)
	if err := s.client.DoTimeout(req, ack, forwardTimeout); err != nil || ack.StatusCode() != fasthttp.StatusOK {
		s.log.Warn("release abandoned relayed pop", "err", err, "status", ack.StatusCode())
		return
	}
	s.m.popReleased.Add(len(body.Acks))
}
