package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// The exchange's headers (doc.go); its paths are in paths.go, and
// AppliedHeader with its format in applied.go.
const (
	SecretHeader    = "X-Queen-Cluster-Secret"
	ForwardedHeader = "X-Queen-Forwarded-By"
	GroupHeader     = "X-Queen-Group"
	DeadlineHeader  = "X-Queen-Forward-Deadline"
)

// Timeout bounds a forwarded command that its context does not bound
// sooner.
const Timeout = 10 * time.Second

// Options configures a Client.
type Options struct {
	// NodeID is this node's id, sent as ForwardedHeader.
	NodeID string
	// Secret is the cluster secret every node shares. A Client without
	// one is not made (New returns nil): the other nodes would refuse it.
	Secret string
	// TLS, when set, is how nodes reach each other's HTTP API.
	TLS *tls.Config
	// MaxResponseBodySize bounds an answer (default 64 MiB).
	MaxResponseBodySize int
	// Transport, when set, is what the Client sends on, shared with the
	// edge's relay: made with the same Secret, whose TLS and
	// MaxResponseBodySize it has instead of these. Nil: New makes one of
	// Secret, TLS and MaxResponseBodySize.
	Transport *Transport
	// Refusal turns a node's error answer (its status and body) into the
	// error it stands for: the HTTP edge's error table, read backwards.
	// Nil: every refusal is raft.ErrForward.
	Refusal func(status int, body []byte) error
	// Metrics, when set, counts forwarded commands in
	// queen_forwarded_requests_total, as the edge counts its relays.
	Metrics *metrics.Set
}

var _ Forwarder = (*Client)(nil)

// Client sends commands to other nodes (Forwarder).
type Client struct {
	opts      Options
	transport *Transport
	forwarded *metrics.Counter
}

// New makes a Client; nil when opts has no cluster secret.
func New(opts Options) *Client {
	if opts.Secret == "" {
		return nil
	}
	c := &Client{opts: opts, transport: opts.Transport}
	if c.transport == nil {
		c.transport = NewTransport(TransportOptions{Secret: opts.Secret, TLS: opts.TLS, MaxResponseBodySize: opts.MaxResponseBodySize})
	}
	if opts.Metrics != nil {
		c.forwarded = opts.Metrics.GetOrCreateCounter(`queen_forwarded_requests_total`)
	}
	return c
}

// Forward proposes entry (one command) on group g of the node at addr and
// answers its result and that node's applied index in g
// (Forwarder). A failure to reach the node or to read its answer is
// raft.ErrForward: the command's outcome is unknown.
func (c *Client) Forward(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, uint64, error) {
	t, err := command.EntryType(entry)
	if err != nil {
		return engine.Result{}, 0, err
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := c.post(ctx, addr, ProposePath, "application/octet-stream", g, entry, resp); err != nil {
		return engine.Result{}, 0, errors.Join(raft.ErrForward, fmt.Errorf("group %d at %s: %w", g, addr, err))
	}
	if c.forwarded != nil {
		c.forwarded.Inc()
	}
	applied := AppliedIn(resp.Header.Peek(AppliedHeader), g)
	if resp.StatusCode() != fasthttp.StatusOK {
		return engine.Result{}, applied, c.refusal(resp)
	}
	v, err := command.ReadResult(t, resp.Body())
	if err != nil {
		return engine.Result{}, applied, errors.Join(raft.ErrForward, fmt.Errorf("group %d at %s: the answer: %w", g, addr, err))
	}
	return engine.Result{Value: v}, applied, nil
}

// Read asks the node at addr for a read of group g, req as a Host
// encodes it, and answers that node's answer (Forwarder); the node
// answers it from its replica when it leads g (Host.AnswerRead). A
// failure to reach the node or to read its answer is raft.ErrForward; a
// refusal is the error Options.Refusal reads in it (a node that does not
// lead g: raft.ErrNotLeader).
func (c *Client) Read(ctx context.Context, addr string, g uint32, body []byte) ([]byte, error) {
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := c.post(ctx, addr, ReadPath, "application/json", g, body, resp); err != nil {
		return nil, errors.Join(raft.ErrForward, fmt.Errorf("read of group %d at %s: %w", g, addr, err))
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		return nil, c.refusal(resp)
	}
	return append([]byte(nil), resp.Body()...), nil // resp is released on return
}

// StartMove asks the node at addr to move queue to group to, a move it
// runs from its replica of the queue's group (Forwarder; the node
// runs Host.StartMove). It returns once the move is recorded there.
// A failure to reach the node or to read its answer is raft.ErrForward;
// a refusal is the error Options.Refusal reads in it (a node that hosts
// no replica of the queue's group: raft.ErrNotLeader).
func (c *Client) StartMove(ctx context.Context, addr, queue string, to uint32) error {
	body, err := json.Marshal(struct {
		Queue string `json:"queue"`
	}{queue})
	if err != nil {
		return err
	}
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	if err := c.post(ctx, addr, MovePath, "application/json", to, body, resp); err != nil {
		return errors.Join(raft.ErrForward, fmt.Errorf("move of %s to group %d at %s: %w", queue, to, addr, err))
	}
	if resp.StatusCode() != fasthttp.StatusAccepted {
		return c.refusal(resp)
	}
	return nil
}

// post sends body (lent: it outlives the request) to path on the node at
// addr for group g, as a node on the cluster path (its id, the secret,
// the deadline ctx leaves), into resp.
func (c *Client) post(ctx context.Context, addr, path, contentType string, g uint32, body []byte, resp *fasthttp.Response) error {
	timeout := timeoutFor(ctx)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	c.nodeRequest(req, addr, path, g, timeout)
	req.Header.SetContentType(contentType)
	req.SetBodyRaw(body)
	return c.transport.Do(req, resp, timeout)
}

// Transport is what the Client sends on, for the edge's relay to share.
func (c *Client) Transport() *Transport { return c.transport }

// nodeRequest makes req a POST to path on the node at addr for group g,
// as a node on the cluster path: its id, the secret, the deadline timeout
// leaves.
func (c *Client) nodeRequest(req *fasthttp.Request, addr, path string, g uint32, timeout time.Duration) {
	c.transport.Address(req, addr, path)
	c.transport.Sign(req, c.opts.NodeID)
	req.Header.Set(GroupHeader, strconv.FormatUint(uint64(g), 10))
	req.Header.Set(DeadlineHeader, strconv.FormatInt(time.Now().Add(timeout).UnixMicro(), 10))
}

func (c *Client) refusal(resp *fasthttp.Response) error {
	return c.refused(resp.StatusCode(), resp.Body())
}

// refused is the error a node's refusal (status, body) stands for.
func (c *Client) refused(status int, body []byte) error {
	if c.opts.Refusal != nil {
		return c.opts.Refusal(status, body)
	}
	return fmt.Errorf("%w: answered %d", raft.ErrForward, status)
}

// timeoutFor is a call's timeout: Timeout, or less when ctx ends sooner.
func timeoutFor(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return min(Timeout, time.Until(d))
	}
	return Timeout
}
