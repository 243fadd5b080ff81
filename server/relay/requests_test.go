package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/listener"
	"github.com/queenmq/queen/server/memory"
	"github.com/queenmq/queen/server/relay"
)

// serve runs h on a real fasthttp server on 127.0.0.1 until the test
// ends, and returns its address.
func serve(t *testing.T, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: h}
	go srv.Serve(ln) //nolint:errcheck // ends when the listener closes
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.ShutdownWithContext(c) //nolint:errcheck
	})
	return ln.Addr().String()
}

// newRequests is the relay of node "n2", whose transport carries secret
// with the node's own posts.
func newRequests(secret string, reads *relay.Reads) (*relay.Requests, *metrics.Set) {
	set := metrics.NewSet()
	r := relay.NewRequests(relay.Options{
		NodeID:    func() string { return "n2" },
		Transport: cluster.NewTransport(cluster.TransportOptions{Secret: secret}),
		Reads:     reads,
		Metrics:   set,
		Logger:    slog.New(slog.DiscardHandler),
	})
	return r, set
}

// follower is node n2 whose leader is n1, reached at leaderAddr.
func follower(leaderAddr string) raft.Status {
	return raft.Status{ID: "n2", Role: "follower", Leader: "n1", LeaderHTTP: leaderAddr}
}

// outcome is what Request answered on the follower.
type outcome struct {
	relayed bool
	err     error
}

// relaying is a follower's handler that relays every request with
// Request (poll as given), answers 503 when it was not relayed, and
// reports each outcome on the channel it returns.
func relaying(r *relay.Requests, st raft.Status, poll time.Duration) (fasthttp.RequestHandler, <-chan outcome) {
	out := make(chan outcome, 16)
	return func(ctx *fasthttp.RequestCtx) {
		relayed, err := r.Request(ctx, st, poll)
		switch {
		case !relayed:
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		case err != nil:
			ctx.SetStatusCode(fasthttp.StatusBadGateway)
		}
		out <- outcome{relayed, err}
	}, out
}

// recorder is a leader's handler that keeps a copy of each request it is
// sent and answers with answer.
func recorder(answer func(ctx *fasthttp.RequestCtx)) (fasthttp.RequestHandler, <-chan *fasthttp.Request) {
	got := make(chan *fasthttp.Request, 16)
	return func(ctx *fasthttp.RequestCtx) {
		var req fasthttp.Request
		ctx.Request.CopyTo(&req)
		got <- &req
		answer(ctx)
	}, got
}

// send sends req to the node at addr and returns its answer.
func send(t *testing.T, addr string, req *fasthttp.Request) *fasthttp.Response {
	t.Helper()
	req.SetHost(addr)
	resp := new(fasthttp.Response)
	if err := fasthttp.DoTimeout(req, resp, 20*time.Second); err != nil {
		t.Fatalf("send %s: %v", req.URI(), err)
	}
	return resp
}

// receive waits for one value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s within 20 s", what)
		var zero T
		return zero
	}
}

// A relayed request reaches the leader as the client sent it (method,
// path and query, headers, body) with the relaying node's id and a
// deadline, and not the cluster secret: the leader checks the client's own
// token, so a relay never makes a request a node's. The leader's status,
// headers and body come back whole; the applied header is the relaying
// node's, not its client's.
func TestRequests_Request_RelaysWhole(t *testing.T) {
	leader, got := recorder(func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusCreated)
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("X-Answer", "from-leader")
		ctx.Response.Header.Set(cluster.AppliedHeader, "1:7")
		ctx.SetBodyString(`{"pushed":2}`)
	})
	r, set := newRequests("s3cret", nil)
	handler, outcomes := relaying(r, follower(serve(t, leader)), 0)
	addr := serve(t, handler)

	req := new(fasthttp.Request)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + addr + "/api/v1/push?trace=1")
	req.Header.Set(fasthttp.HeaderAuthorization, "Bearer client-token")
	req.Header.Set("X-Client", "c1")
	req.SetBodyString(`{"items":[{"queue":"q"},{"queue":"q"}]}`)
	before := time.Now()
	resp := send(t, addr, req)
	after := time.Now()

	if o := receive(t, outcomes, "outcome"); !o.relayed || o.err != nil {
		t.Fatalf("Request = %v, %v; want relayed, no error", o.relayed, o.err)
	}
	sent := receive(t, got, "relayed request")
	for _, c := range []struct{ name, got, want string }{
		{"method", string(sent.Header.Method()), fasthttp.MethodPost},
		{"uri", string(sent.URI().RequestURI()), "/api/v1/push?trace=1"},
		{"body", string(sent.Body()), `{"items":[{"queue":"q"},{"queue":"q"}]}`},
		{"Authorization", string(sent.Header.Peek(fasthttp.HeaderAuthorization)), "Bearer client-token"},
		{"X-Client", string(sent.Header.Peek("X-Client")), "c1"},
		{cluster.ForwardedHeader, string(sent.Header.Peek(cluster.ForwardedHeader)), "n2"},
		{cluster.SecretHeader, string(sent.Header.Peek(cluster.SecretHeader)), ""},
	} {
		if c.got != c.want {
			t.Errorf("leader got %s %q, want %q", c.name, c.got, c.want)
		}
	}
	deadline, err := strconv.ParseInt(string(sent.Header.Peek(cluster.DeadlineHeader)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", cluster.DeadlineHeader, err)
	}
	if d := time.UnixMicro(deadline); d.Before(before.Add(relay.Timeout).Truncate(time.Microsecond)) || d.After(after.Add(relay.Timeout)) {
		t.Errorf("deadline %v, want Timeout (%v) after the relay, between %v and %v", d, relay.Timeout, before, after)
	}

	for _, c := range []struct{ name, got, want string }{
		{"status", strconv.Itoa(resp.StatusCode()), "201"},
		{"Content-Type", string(resp.Header.ContentType()), "application/json"},
		{"X-Answer", string(resp.Header.Peek("X-Answer")), "from-leader"},
		{"body", string(resp.Body()), `{"pushed":2}`},
		{cluster.AppliedHeader, string(resp.Header.Peek(cluster.AppliedHeader)), ""},
	} {
		if c.got != c.want {
			t.Errorf("client got %s %q, want %q", c.name, c.got, c.want)
		}
	}
	if got, want := set.GetOrCreateCounter(`queen_forwarded_requests_total`).Get(), uint64(1); got != want {
		t.Errorf("queen_forwarded_requests_total = %d, want %d", got, want)
	}
}

// An answer larger than memory.LargeBody is moved to the client rather
// than copied, and arrives whole all the same; so does the request's body,
// lent to the relay rather than copied, which stays the request's.
func TestRequests_Request_LargeAnswer(t *testing.T) {
	large := bytes.Repeat([]byte("0123456789abcdef"), (memory.LargeBody+16)/16+1)
	leader, got := recorder(func(ctx *fasthttp.RequestCtx) { ctx.SetBody(large) })
	r, _ := newRequests("", nil)
	st := follower(serve(t, leader))
	bodyAfter := make(chan []byte, 1)
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		if relayed, err := r.Request(ctx, st, 0); !relayed || err != nil {
			ctx.Error(fmt.Sprint("not relayed: ", relayed, err), fasthttp.StatusBadGateway)
		}
		bodyAfter <- append([]byte(nil), ctx.Request.Body()...)
	})
	req := new(fasthttp.Request)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + addr + "/api/v1/push")
	req.SetBody(large[:1000])
	resp := send(t, addr, req)
	if resp.StatusCode() != fasthttp.StatusOK || !bytes.Equal(resp.Body(), large) {
		t.Errorf("client got %d and %d bytes, want 200 and the leader's %d", resp.StatusCode(), len(resp.Body()), len(large))
	}
	if sent := receive(t, got, "relayed request"); !bytes.Equal(sent.Body(), large[:1000]) {
		t.Errorf("leader got a body of %d bytes, want the client's 1000", len(sent.Body()))
	}
	if b := receive(t, bodyAfter, "request body"); !bytes.Equal(b, large[:1000]) {
		t.Errorf("the request's body after the relay is %d bytes, want the client's 1000", len(b))
	}
}

// A request another node relayed here is never relayed again (one hop),
// and a node that knows no other leader's address has nowhere to relay
// to: relayed is false, and the leader is sent nothing.
func TestRequests_Request_Nowhere(t *testing.T) {
	var hits atomic.Int32
	leaderAddr := serve(t, func(ctx *fasthttp.RequestCtx) { hits.Add(1) })
	for _, c := range []struct {
		name      string
		st        raft.Status
		forwarded bool
	}{
		{"forwarded", follower(leaderAddr), true},
		{"no leader address", raft.Status{ID: "n2", Role: "follower", Leader: "n1"}, false},
		{"no leader", raft.Status{ID: "n2", Role: "candidate"}, false},
		{"leads itself", raft.Status{ID: "n2", Role: "leader", Leader: "n2", LeaderHTTP: leaderAddr}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, set := newRequests("", nil)
			handler, outcomes := relaying(r, c.st, 0)
			addr := serve(t, handler)
			req := new(fasthttp.Request)
			req.SetRequestURI("http://" + addr + "/api/v1/push")
			if c.forwarded {
				req.Header.Set(cluster.ForwardedHeader, "n3")
			}
			if got, want := send(t, addr, req).StatusCode(), fasthttp.StatusServiceUnavailable; got != want {
				t.Errorf("status %d, want %d", got, want)
			}
			if o := receive(t, outcomes, "outcome"); o.relayed || o.err != nil {
				t.Errorf("Request = %v, %v; want not relayed, no error", o.relayed, o.err)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("leader was sent %d requests, want none", n)
			}
			if got := set.GetOrCreateCounter(`queen_forwarded_requests_total`).Get(); got != 0 {
				t.Errorf("queen_forwarded_requests_total = %d, want 0", got)
			}
		})
	}
}

// A leader that cannot be reached fails the relay with raft.ErrForward:
// it was relayed (the caller must not answer 503 and have it retried as
// if nothing was sent).
func TestRequests_Request_LeaderUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	r, _ := newRequests("", nil)
	handler, outcomes := relaying(r, follower(gone), 0)
	addr := serve(t, handler)
	req := new(fasthttp.Request)
	req.SetRequestURI("http://" + addr + "/api/v1/push")
	send(t, addr, req)
	if o := receive(t, outcomes, "outcome"); !o.relayed || !errors.Is(o.err, raft.ErrForward) {
		t.Errorf("Request = %v, %v; want relayed, raft.ErrForward", o.relayed, o.err)
	}
}

// The deadline SetDeadline writes is what Expired reads on the receiving
// node: a request that arrives after its sender gave up is expired, one
// within its time or without a deadline (a client's own) is not.
func TestSetDeadline_Expired(t *testing.T) {
	expired := make(chan bool, 1)
	addr := serve(t, func(ctx *fasthttp.RequestCtx) { expired <- relay.Expired(ctx) })
	for _, c := range []struct {
		name string
		set  func(req *fasthttp.Request)
		want bool
	}{
		{"in time", func(req *fasthttp.Request) { relay.SetDeadline(req, time.Minute) }, false},
		{"given up", func(req *fasthttp.Request) { relay.SetDeadline(req, -time.Second) }, true},
		{"no deadline", func(req *fasthttp.Request) {}, false},
		{"not a number", func(req *fasthttp.Request) { req.Header.Set(cluster.DeadlineHeader, "soon") }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := new(fasthttp.Request)
			req.SetRequestURI("http://" + addr + "/api/v1/push")
			c.set(req)
			send(t, addr, req)
			if got := receive(t, expired, "Expired"); got != c.want {
				t.Errorf("Expired = %v, want %v", got, c.want)
			}
		})
	}
}

// A node's own post carries the cluster secret (when there is one), the
// node's id as the forwarded header, and the group it is about; its
// answer's status and body come back.
func TestRequests_Post(t *testing.T) {
	leader, got := recorder(func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		ctx.SetBodyString(`{"ok":true}`)
	})
	addr := serve(t, leader)
	for _, secret := range []string{"s3cret", ""} {
		r, _ := newRequests(secret, nil)
		status, body, err := r.PostGroup(addr, "/internal/v1/read-index", 3, []byte(`{"a":1}`), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if status != fasthttp.StatusAccepted || string(body) != `{"ok":true}` {
			t.Errorf("answer %d %q, want 202 {\"ok\":true}", status, body)
		}
		sent := receive(t, got, "post")
		for _, c := range []struct{ name, got, want string }{
			{"method", string(sent.Header.Method()), fasthttp.MethodPost},
			{"path", string(sent.URI().Path()), "/internal/v1/read-index"},
			{"Content-Type", string(sent.Header.ContentType()), "application/json"},
			{"body", string(sent.Body()), `{"a":1}`},
			{cluster.SecretHeader, string(sent.Header.Peek(cluster.SecretHeader)), secret},
			{cluster.ForwardedHeader, string(sent.Header.Peek(cluster.ForwardedHeader)), "n2"},
			{cluster.GroupHeader, string(sent.Header.Peek(cluster.GroupHeader)), "3"},
			{"User-Agent", string(sent.Header.UserAgent()), "queen-forward"},
		} {
			if c.got != c.want {
				t.Errorf("secret %q: leader got %s %q, want %q", secret, c.name, c.got, c.want)
			}
		}
	}
}

// Stream relays a request as Request does and copies the answer's status,
// its content headers and its body as they come.
func TestRequests_Stream(t *testing.T) {
	leader, got := recorder(func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/octet-stream")
		ctx.Response.Header.Set("Content-Disposition", `attachment; filename="backup"`)
		ctx.SetBodyString("store bytes")
	})
	r, _ := newRequests("s3cret", nil)
	st := follower(serve(t, leader))
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		if relayed, err := r.Stream(ctx, st); !relayed || err != nil {
			ctx.Error(fmt.Sprint("not relayed: ", relayed, err), fasthttp.StatusBadGateway)
		}
	})
	req := new(fasthttp.Request)
	req.SetRequestURI("http://" + addr + "/api/v1/system/backup")
	resp := send(t, addr, req)
	for _, c := range []struct{ name, got, want string }{
		{"status", strconv.Itoa(resp.StatusCode()), "200"},
		{"Content-Type", string(resp.Header.ContentType()), "application/octet-stream"},
		{"Content-Disposition", string(resp.Header.Peek("Content-Disposition")), `attachment; filename="backup"`},
		{"body", string(resp.Body()), "store bytes"},
	} {
		if c.got != c.want {
			t.Errorf("client got %s %q, want %q", c.name, c.got, c.want)
		}
	}
	if sent := receive(t, got, "relayed request"); string(sent.Header.Peek(cluster.ForwardedHeader)) != "n2" {
		t.Errorf("leader got %s %q, want n2", cluster.ForwardedHeader, sent.Header.Peek(cluster.ForwardedHeader))
	}
}

// pollRequest is a client's long-poll, as written on the wire.
const pollRequest = "GET /api/v1/pop/queue/q?wait=true&timeout=30000 HTTP/1.1\r\n" +
	"Host: queen\r\nAuthorization: Bearer client-token\r\n\r\n"

// popAnswer is a leader's answer to a pop: two messages of partition p1
// and one of p2, under one lease.
const popAnswer = `{"leaseId":"L1","consumerGroup":"g","messages":[` +
	`{"transactionId":"t1","partitionId":"p1"},{"transactionId":"t2","partitionId":"p1"},` +
	`{"transactionId":"t3","partitionId":"p2"}]}`

// dialPoll sends a long-poll to the node at addr on a connection of its
// own, which the caller closes to leave.
func dialPoll(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, pollRequest); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A relayed long-poll whose client stays is answered with the leader's
// answer, as any relayed request.
func TestRequests_Request_LongPollAnswered(t *testing.T) {
	leader, _ := recorder(func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(popAnswer) })
	r, set := newRequests("", nil)
	handler, outcomes := relaying(r, follower(serve(t, leader)), 30*time.Second)
	conn := dialPoll(t, serve(t, handler))
	var resp fasthttp.Response
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != fasthttp.StatusOK || string(resp.Body()) != popAnswer {
		t.Errorf("client got %d %q, want 200 and the leader's answer", resp.StatusCode(), resp.Body())
	}
	if o := receive(t, outcomes, "outcome"); !o.relayed || o.err != nil {
		t.Errorf("Request = %v, %v; want relayed, no error", o.relayed, o.err)
	}
	if got := set.GetOrCreateCounter(`queen_pop_abandoned_total`).Get(); got != 0 {
		t.Errorf("queen_pop_abandoned_total = %d, want 0", got)
	}
}

// parked is a leader's handler that parks each pop until its peer (the
// relaying node) goes away, or until answer is closed, and records each
// ack it is sent.
type parked struct {
	polls  chan struct{}          // a pop arrived
	ended  chan bool              // a pop ended: true when its peer went away first
	answer chan struct{}          // closed: answer the parked pops (popAnswer)
	acks   chan *fasthttp.Request // the acks sent
}

func newParked() *parked {
	return &parked{polls: make(chan struct{}, 4), ended: make(chan bool, 4), answer: make(chan struct{}),
		acks: make(chan *fasthttp.Request, 4)}
}

func (p *parked) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == "/api/v1/ack/batch" {
		var req fasthttp.Request
		ctx.Request.CopyTo(&req)
		p.acks <- &req
		ctx.SetBodyString(`[]`)
		return
	}
	p.polls <- struct{}{}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-p.answer:
			ctx.SetBodyString(popAnswer)
			p.ended <- false
			return
		case <-tick.C:
			if listener.PeerClosed(ctx.Conn()) {
				p.ended <- true
				return
			}
		case <-deadline:
			p.ended <- false
			return
		}
	}
}

// A relayed long-poll whose client leaves while the leader parks it
// closes the relay's connection, which is what tells the leader: the
// park ends there, nothing is answered, and nothing is released. The poll
// is counted abandoned.
func TestRequests_Request_LongPollClientGone(t *testing.T) {
	leader := newParked()
	r, set := newRequests("", nil)
	handler, outcomes := relaying(r, follower(serve(t, leader.handle)), 30*time.Second)
	conn := dialPoll(t, serve(t, handler))
	receive(t, leader.polls, "relayed poll")
	conn.Close()
	if peerGone := receive(t, leader.ended, "end of the park"); !peerGone {
		t.Error("the leader's park ended without its peer going away")
	}
	if o := receive(t, outcomes, "outcome"); !o.relayed || o.err != nil {
		t.Errorf("Request = %v, %v; want relayed, no error", o.relayed, o.err)
	}
	if got, want := set.GetOrCreateCounter(`queen_pop_abandoned_total`).Get(), uint64(1); got != want {
		t.Errorf("queen_pop_abandoned_total = %d, want %d", got, want)
	}
	select {
	case ack := <-leader.acks:
		t.Errorf("a poll the leader never answered released %q", ack.Body())
	default:
	}
}

// A relayed long-poll whose leader answered with messages just as its
// client left gives their lease back: one "retry" ack per partition, on
// its first message, under the pop's lease and consumer group, sent to
// the leader with the pop's own Authorization and not the cluster secret.
//
// The relay looks at its client every 100 ms: an attempt in which it
// looked between the client leaving and the answer arriving closed the
// leader's connection first, so there was no answer to release (the
// previous test's case). The test tries again until the answer came
// first, which is nearly always at once.
func TestRequests_Request_LongPollReleasesAnswer(t *testing.T) {
	r, set := newRequests("s3cret", nil)
	var ack *fasthttp.Request
	for attempt := 1; ack == nil; attempt++ {
		if attempt > 20 {
			t.Fatal("no attempt released its answer")
		}
		leader := newParked()
		handler, outcomes := relaying(r, follower(serve(t, leader.handle)), 30*time.Second)
		conn := dialPoll(t, serve(t, handler))
		receive(t, leader.polls, "relayed poll")
		conn.Close()
		close(leader.answer)
		if o := receive(t, outcomes, "outcome"); !o.relayed || o.err != nil {
			t.Fatalf("Request = %v, %v; want relayed, no error", o.relayed, o.err)
		}
		if got, want := set.GetOrCreateCounter(`queen_pop_abandoned_total`).Get(), uint64(attempt); got != want {
			t.Fatalf("queen_pop_abandoned_total = %d after %d abandoned polls", got, want)
		}
		select {
		case ack = <-leader.acks: // released before Request returned
		default:
			t.Logf("attempt %d: nothing released (the relay may have seen its client leave before the answer)", attempt)
		}
	}

	if got, want := string(ack.URI().Path()), "/api/v1/ack/batch"; got != want {
		t.Errorf("release sent to %s, want %s", got, want)
	}
	for _, c := range []struct{ name, got, want string }{
		{"Authorization", string(ack.Header.Peek(fasthttp.HeaderAuthorization)), "Bearer client-token"},
		{cluster.SecretHeader, string(ack.Header.Peek(cluster.SecretHeader)), ""},
		{cluster.ForwardedHeader, string(ack.Header.Peek(cluster.ForwardedHeader)), "n2"},
	} {
		if c.got != c.want {
			t.Errorf("release has %s %q, want %q", c.name, c.got, c.want)
		}
	}
	type item struct{ TransactionID, PartitionID, LeaseID, Status string }
	var body struct {
		ConsumerGroup   string
		Acknowledgments []item
	}
	if err := json.Unmarshal(ack.Body(), &body); err != nil {
		t.Fatalf("release body %q: %v", ack.Body(), err)
	}
	want := []item{{"t1", "p1", "L1", "retry"}, {"t3", "p2", "L1", "retry"}}
	if body.ConsumerGroup != "g" || len(body.Acknowledgments) != len(want) {
		t.Fatalf("release body %q, want group g and acks %v", ack.Body(), want)
	}
	for i := range want {
		if body.Acknowledgments[i] != want[i] {
			t.Errorf("ack %d = %+v, want %+v", i, body.Acknowledgments[i], want[i])
		}
	}
	if got, want := set.GetOrCreateCounter(`queen_pop_released_total`).Get(), uint64(len(want)); got != want {
		t.Errorf("queen_pop_released_total = %d, want %d", got, want)
	}
}
