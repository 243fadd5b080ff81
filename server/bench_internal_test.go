package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/auth"
)

// stubBroker answers the hot-path commands with canned results, so the
// benchmarks measure the edge alone (decode, call, encode).
type stubBroker struct {
	Broker
	pop engine.PopResult
}

func (stubBroker) Status() raft.Status { return raft.Status{ID: "n1", Role: "leader", Leader: "n1"} }

func (b stubBroker) Propose(_ context.Context, c engine.Command) (engine.Result, error) {
	switch c := c.(type) {
	case engine.PushCmd:
		return engine.Result{Value: queuedAll(c.Items)}, nil
	case engine.PopCmd:
		return engine.Result{Value: b.pop}, nil
	case engine.AckCmd:
		res := make([]engine.AckResult, len(c.Items))
		for i := range c.Items {
			res[i] = engine.AckResult{TransactionID: c.Items[i].TransactionID, Success: true, Queue: "q", Partition: "Default"}
		}
		return engine.Result{Value: res}, nil
	}
	return engine.Result{}, fmt.Errorf("stubBroker: %T", c)
}

// queuedAll answers a push of items as if every one was queued.
func queuedAll(items []engine.PushItem) []engine.PushResult {
	res := make([]engine.PushResult, len(items))
	for i := range items {
		res[i] = engine.PushResult{Status: engine.Queued, TransactionID: items[i].TransactionID, Queue: items[i].Queue, Partition: "Default"}
	}
	return res
}

func benchServer(b *testing.B, broker Broker) *Server {
	s, err := New(broker, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// run serves one prepared request b.N times.
func run(b *testing.B, s *Server, method, uri, body string, wantStatus int) {
	runHeader(b, s, method, uri, body, "", wantStatus)
}

// runHeader is run with an Authorization header (none when "").
func runHeader(b *testing.B, s *Server, method, uri, body, authorization string, wantStatus int) {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	if authorization != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, authorization)
	}
	req.SetRequestURI(uri)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil)
	raw := []byte(body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// Each iteration is a request of its own: the body is set again
		// (without a copy), as a server lets go of it once it answered.
		ctx.Request.SetBodyRaw(raw)
		ctx.Response.Reset()
		s.handle(&ctx)
		if ctx.Response.StatusCode() != wantStatus {
			b.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

func BenchmarkPush100(b *testing.B) {
	var items []string
	payload := `{"orderId":12345,"customer":"c-77","lines":[{"sku":"A1","qty":2},{"sku":"B7","qty":1}],"note":"` + strings.Repeat("x", 900) + `"}`
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"queue":"orders","partition":"Default","payload":%s,"transactionId":"0190b0f0-0000-7000-8000-%012d"}`, payload, i))
	}
	run(b, benchServer(b, stubBroker{}), "POST", "/api/v1/push", `{"items":[`+strings.Join(items, ",")+`]}`, 201)
}

func BenchmarkPop100(b *testing.B) {
	payload := []byte(`{"orderId":12345,"customer":"c-77","note":"` + strings.Repeat("x", 900) + `"}`)
	res := engine.PopResult{Group: engine.QueueMode, LeaseID: engine.ID{1},
		Claims: []engine.Claim{{Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, LeaseExpiresAt: 1 << 50}}}
	for i := range 100 {
		res.Messages = append(res.Messages, engine.Message{ID: engine.ID{byte(i)}, TransactionID: fmt.Sprint("t", i),
			Payload: payload, CreatedAt: 1 << 50, Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, Attempt: 1})
	}
	run(b, benchServer(b, stubBroker{pop: res}), "GET", "/api/v1/pop/queue/orders?batch=100&wait=false", "", 200)
}

func BenchmarkAckBatch100(b *testing.B) {
	var acks []string
	for i := range 100 {
		acks = append(acks, fmt.Sprintf(`{"transactionId":"t%d","partitionId":"0190b0f0-0000-7000-8000-000000000002","status":"completed","leaseId":"0190b0f0-0000-7000-8000-000000000001"}`, i))
	}
	run(b, benchServer(b, stubBroker{}), "POST", "/api/v1/ack/batch", `{"acknowledgments":[`+strings.Join(acks, ",")+`],"consumerGroup":"g"}`, 200)
}

// BenchmarkAuth measures what verifying a JWT adds to a request: a push of
// one small item and of 100 1 KiB items, each without auth (the baseline of
// the same run) and with an HS256, RS256 and EdDSA token (static keys).
func BenchmarkAuth(b *testing.B) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	pemOf := func(pub any) string {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			b.Fatal(err)
		}
		return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	}
	const secret = "an-hs256-secret-of-at-least-32-bytes!"
	claims := jwt.MapClaims{"sub": "svc", "role": "read-write", "exp": time.Now().Add(time.Hour).Unix()}
	sign := func(m jwt.SigningMethod, key any) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(key)
		if err != nil {
			b.Fatal(err)
		}
		return "Bearer " + s
	}
	modes := []struct {
		name, alg, secret, pem, header string
	}{
		{"off", "", "", "", ""},
		{"HS256", auth.HS256, secret, "", sign(jwt.SigningMethodHS256, []byte(secret))},
		{"RS256", auth.RS256, "", pemOf(&rsaKey.PublicKey), sign(jwt.SigningMethodRS256, rsaKey)},
		{"EdDSA", auth.EdDSA, "", pemOf(edPub), sign(jwt.SigningMethodEdDSA, edKey)},
	}
	payload := `{"orderId":12345,"note":"` + strings.Repeat("x", 1000) + `"}`
	var items []string
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"queue":"orders","payload":%s,"transactionId":"t-%d"}`, payload, i))
	}
	bodies := map[string]string{"push1": `{"items":[{"queue":"orders","payload":{"id":1}}]}`, "push100": `{"items":[` + strings.Join(items, ",") + `]}`}
	for _, size := range []string{"push1", "push100"} {
		for _, m := range modes {
			b.Run(size+"/"+m.name, func(b *testing.B) {
				o := Options{Logger: slog.New(slog.DiscardHandler)}
				if m.alg != "" {
					ao := auth.DefaultOptions()
					ao.Enabled, ao.Algorithm, ao.Secret, ao.PublicKey, ao.Logger = true, m.alg, m.secret, m.pem, o.Logger
					v, err := auth.New(ao)
					if err != nil {
						b.Fatal(err)
					}
					defer v.Close()
					o.Auth = v
				}
				s, err := New(stubBroker{}, o)
				if err != nil {
					b.Fatal(err)
				}
				runHeader(b, s, "POST", "/api/v1/push", bodies[size], m.header, 201)
			})
		}
	}
}

// BenchmarkServe runs the hot-path requests of the benchmarks above through
// a real fasthttp server on loopback TCP, one request at a time: the
// handler's cost plus fasthttp reading the request and its body off the
// connection, which the benchmarks that call handle directly leave out.
func BenchmarkServe(b *testing.B) {
	var items, acks []string
	payload := `{"orderId":12345,"customer":"c-77","lines":[{"sku":"A1","qty":2},{"sku":"B7","qty":1}],"note":"` + strings.Repeat("x", 900) + `"}`
	for i := range 100 {
		items = append(items, fmt.Sprintf(`{"queue":"orders","partition":"Default","payload":%s,"transactionId":"0190b0f0-0000-7000-8000-%012d"}`, payload, i))
		acks = append(acks, fmt.Sprintf(`{"transactionId":"t%d","partitionId":"0190b0f0-0000-7000-8000-000000000002","status":"completed","leaseId":"0190b0f0-0000-7000-8000-000000000001"}`, i))
	}
	pop := engine.PopResult{Group: engine.QueueMode, LeaseID: engine.ID{1},
		Claims: []engine.Claim{{Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, LeaseExpiresAt: 1 << 50}}}
	for i := range 100 {
		pop.Messages = append(pop.Messages, engine.Message{ID: engine.ID{byte(i)}, TransactionID: fmt.Sprint("t", i),
			Payload: []byte(payload), CreatedAt: 1 << 50, Queue: "orders", Partition: "Default", PartitionID: engine.ID{2}, Attempt: 1})
	}
	cases := []struct {
		name, method, uri, body string
		status                  int
	}{
		{"Push1", "POST", "/api/v1/push", `{"items":[{"queue":"orders","payload":{"id":1}}]}`, 201},
		{"Push100", "POST", "/api/v1/push", `{"items":[` + strings.Join(items, ",") + `]}`, 201},
		{"Pop100", "GET", "/api/v1/pop/queue/orders?batch=100&wait=false", "", 200},
		{"AckBatch100", "POST", "/api/v1/ack/batch", `{"acknowledgments":[` + strings.Join(acks, ",") + `],"consumerGroup":"g"}`, 200},
	}
	s := benchServer(b, stubBroker{pop: pop})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	}()
	hc := &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 1}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var req fasthttp.Request
			var resp fasthttp.Response
			req.Header.SetMethod(c.method)
			req.SetRequestURI("http://" + hc.Addr + c.uri)
			if c.body != "" {
				req.SetBodyString(c.body)
			}
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := hc.Do(&req, &resp); err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode() != c.status {
					b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
				}
			}
		})
	}
}
