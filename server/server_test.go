package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// fasthttp refreshes its Date header once a second from a goroutine
		// it starts once per process and never stops.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		// A stopped worker pool's cleaner notices the stop only after its
		// current sleep (MaxIdleWorkerDuration, 10 s), well after Shutdown.
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		// A server relaying to another (a follower's spool replay) dials
		// through fasthttp's default dialer, whose address-cache cleaner
		// runs once per process and never stops, and its client's cleaners
		// exit only after their current sleep (up to MaxIdleConnDuration).
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		// hashicorp/raft's TCP transport closes its listener but neither
		// its pooled connections nor the handlers of those it accepted:
		// the in-process groups (servertest.Groups) leave them behind.
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}

// newBroker is the one place the suite gets its broker: swap it for a real
// Raft node to run the whole suite over replication.
func newBroker(t *testing.T) server.Broker {
	return servertest.NewLocalBroker(t)
}

// client drives one server over real HTTP, as the SDKs do.
type client struct {
	t      *testing.T
	base   string
	http   *http.Client
	broker server.Broker
	// header is sent on every request (the SDK's defaults).
	header http.Header
}

// newClient starts a server over a fresh broker.
func newClient(t *testing.T) *client {
	return newClientOptions(t, newBroker(t), server.Options{})
}

func newClientOptions(t *testing.T, b server.Broker, opts server.Options) *client {
	t.Helper()
	base := servertest.StartOptions(t, b, opts)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, base: base, broker: b, http: &http.Client{Transport: tr, Timeout: 60 * time.Second},
		header: http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}}
}

// response is one HTTP answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request. body is nil (no body), a string or []byte (sent as
// is), or anything else (JSON-encoded).
func (c *client) do(method, path string, body any) *response {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			c.t.Fatalf("encode body: %v", err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatalf("new request: %v", err)
	}
	for k, v := range c.header {
		if body == nil && k == "Content-Type" {
			continue
		}
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}
}

// expect fails unless the status is want; it returns r for chaining.
func (r *response) expect(t *testing.T, want int) *response {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
	return r
}

// decode unmarshals the body into v.
func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r *response) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.decode(t, &m)
	return m
}

// expectError checks a docs/decisions.md C2 error reply: status and stable code.
func (r *response) expectError(t *testing.T, status int, code string) {
	t.Helper()
	r.expect(t, status)
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	r.decode(t, &e)
	if e.Code != code || e.Error == "" {
		t.Fatalf("error body %s, want code %q and a message", r.body, code)
	}
}

// Wire shapes, as the SDKs read them.

type pushResult struct {
	Index         int     `json:"index"`
	MessageID     string  `json:"message_id"`
	TransactionID string  `json:"transaction_id"`
	PartitionID   string  `json:"partition_id"`
	TraceID       *string `json:"trace_id"`
	QueueName     string  `json:"queueName"`
	Status        string  `json:"status"`
	Error         string  `json:"error"`
}

type message struct {
	ID              string          `json:"id"`
	TransactionID   string          `json:"transactionId"`
	TraceID         *string         `json:"traceId"`
	Data            json.RawMessage `json:"data"`
	ProducerSub     *string         `json:"producerSub"`
	CreatedAt       string          `json:"createdAt"`
	PartitionID     string          `json:"partitionId"`
	Partition       string          `json:"partition"`
	LeaseID         string          `json:"leaseId"`
	ConsumerGroup   string          `json:"consumerGroup"`
	Queue           string          `json:"queue"`
	RetryCount      int             `json:"retryCount"`
	DeliveryAttempt int             `json:"deliveryAttempt"`
}

type popped struct {
	Success           bool      `json:"success"`
	Queue             string    `json:"queue"`
	Partition         string    `json:"partition"`
	PartitionID       string    `json:"partitionId"`
	LeaseID           string    `json:"leaseId"`
	ConsumerGroup     string    `json:"consumerGroup"`
	PartitionsClaimed int       `json:"partitionsClaimed"`
	Messages          []message `json:"messages"`
}

type ackResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
	Noop          bool    `json:"noop"`
	Dropped       bool    `json:"dropped"`
}

type deadLetter struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  string          `json:"errorMessage"`
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     string          `json:"createdAt"`
	FailedAt      string          `json:"failedAt"`
	EnqueuedAt    string          `json:"enqueuedAt"`
	Deliveries    int             `json:"deliveries"`
}

type dlqPage struct {
	Messages   []deadLetter `json:"messages"`
	Pagination struct {
		Limit   int  `json:"limit"`
		Offset  int  `json:"offset"`
		HasMore bool `json:"hasMore"`
	} `json:"pagination"`
	Total int `json:"total"`
}

// High-level helpers. Each fails the test on an unexpected status.

// configure sets queue options (and creates the queue).
func (c *client) configure(queue string, options map[string]any) map[string]any {
	c.t.Helper()
	return c.do("POST", "/api/v1/configure", map[string]any{"queue": queue, "options": options}).expect(c.t, 200).object(c.t)
}

// push pushes items (maps) in one request.
func (c *client) push(items ...map[string]any) []pushResult {
	c.t.Helper()
	var res []pushResult
	c.do("POST", "/api/v1/push", map[string]any{"items": items}).expect(c.t, 201).decode(c.t, &res)
	if len(res) != len(items) {
		c.t.Fatalf("push: %d results for %d items", len(res), len(items))
	}
	return res
}

// pushOne pushes one payload to queue/partition with a transaction id ("":
// server-minted) and requires it queued.
func (c *client) pushOne(queue, partition, txn string, payload any) pushResult {
	c.t.Helper()
	item := map[string]any{"queue": queue, "payload": payload}
	if partition != "" {
		item["partition"] = partition
	}
	if txn != "" {
		item["transactionId"] = txn
	}
	res := c.push(item)[0]
	if res.Status != "queued" {
		c.t.Fatalf("push %s/%s %q: %+v", queue, partition, txn, res)
	}
	return res
}

// pop GETs path (a pop route with its query) and returns the envelope, or
// nil on 204.
func (c *client) pop(path string) *popped {
	c.t.Helper()
	r := c.do("GET", path, nil)
	switch r.status {
	case 204:
		if len(r.body) != 0 {
			c.t.Fatalf("204 with a body: %s", r.body)
		}
		return nil
	case 200:
		var p popped
		r.decode(c.t, &p)
		if !p.Success || len(p.Messages) == 0 {
			c.t.Fatalf("200 pop without messages: %s", r.body)
		}
		return &p
	}
	c.t.Fatalf("pop %s: status %d: %s", path, r.status, r.body)
	return nil
}

// mustPop pops and requires messages.
func (c *client) mustPop(path string) *popped {
	c.t.Helper()
	p := c.pop(path)
	if p == nil {
		c.t.Fatalf("pop %s: 204, want messages", path)
	}
	return p
}

// mustBeEmpty pops and requires 204.
func (c *client) mustBeEmpty(path string) {
	c.t.Helper()
	if p := c.pop(path); p != nil {
		c.t.Fatalf("pop %s: got %d messages (%s...), want 204", path, len(p.Messages), p.Messages[0].TransactionID)
	}
}

// ack acks one message (single route) with status, under its lease.
func (c *client) ack(m message, status, errText string) ackResult {
	c.t.Helper()
	body := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": status,
		"leaseId": m.LeaseID, "consumerGroup": m.ConsumerGroup}
	if errText != "" {
		body["error"] = errText
	}
	var res []ackResult
	c.do("POST", "/api/v1/ack", body).expect(c.t, 200).decode(c.t, &res)
	if len(res) != 1 {
		c.t.Fatalf("ack: %d results, want 1", len(res))
	}
	return res[0]
}

// ackBatch acks messages with one status each (statuses[i] for msgs[i]).
func (c *client) ackBatch(group string, msgs []message, statuses ...string) []ackResult {
	c.t.Helper()
	var acks []map[string]any
	for i, m := range msgs {
		acks = append(acks, map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
			"status": statuses[i], "leaseId": m.LeaseID})
	}
	var res []ackResult
	c.do("POST", "/api/v1/ack/batch", map[string]any{"acknowledgments": acks, "consumerGroup": group}).
		expect(c.t, 200).decode(c.t, &res)
	if len(res) != len(msgs) {
		c.t.Fatalf("ack batch: %d results for %d items", len(res), len(msgs))
	}
	return res
}

// dlq reads the DLQ with a query string.
func (c *client) dlq(query string) dlqPage {
	c.t.Helper()
	var p dlqPage
	c.do("GET", "/api/v1/dlq?"+query, nil).expect(c.t, 200).decode(c.t, &p)
	return p
}

// elapse lets d pass for leases (the LocalBroker's clock moves; a real
// cluster sleeps).
func (c *client) elapse(d time.Duration) { servertest.Elapse(c.broker, d) }

// txns lists the transaction ids of messages.
func txns(ms []message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.TransactionID
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// popPath builds a pop URL for queue (any partition) with a query.
func popPath(queue, query string) string {
	return fmt.Sprintf("/api/v1/pop/queue/%s?%s", queue, query)
}
