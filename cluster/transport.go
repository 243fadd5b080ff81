package cluster

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// TransportOptions configures a Transport.
type TransportOptions struct {
	// Secret is the cluster secret every node shares, sent with a node's
	// own requests (Sign); empty when the cluster has none.
	Secret string
	// TLS, when set, is how nodes reach each other's HTTP API.
	TLS *tls.Config
	// MaxResponseBodySize bounds an answer (default 64 MiB).
	MaxResponseBodySize int
}

// Transport is how a node reaches the other nodes' HTTP APIs: one fasthttp
// client, one TLS dialer and one request builder, shared by the commands a
// Client sends and by the edge's whole-request relay (server/relay), which
// must reach the other nodes without the cluster secret too.
type Transport struct {
	http   *fasthttp.Client
	secret string
	tls    *tls.Config
	scheme string
}

// NewTransport makes a node's Transport.
func NewTransport(o TransportOptions) *Transport {
	if o.MaxResponseBodySize == 0 {
		o.MaxResponseBodySize = 64 << 20
	}
	t := &Transport{secret: o.Secret, tls: o.TLS, scheme: "http", http: &fasthttp.Client{
		Name:                     "queen-cluster",
		NoDefaultUserAgentHeader: true,
		// The commands a Client sends and the relay's requests share the
		// pool: each had 512 of its own.
		MaxConnsPerHost:     1024,
		MaxIdleConnDuration: 30 * time.Second,
		// A relayed request goes as its client sent it.
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		MaxResponseBodySize:           o.MaxResponseBodySize,
		TLSConfig:                     o.TLS,
	}}
	if o.TLS != nil {
		t.scheme = "https"
	}
	return t
}

// Scheme is the scheme other nodes are reached with: https with TLS.
func (t *Transport) Scheme() string { return t.scheme }

// Address makes req a POST to path on the node at addr.
func (t *Transport) Address(req *fasthttp.Request, addr, path string) {
	req.SetRequestURI(t.scheme + "://" + addr + path)
	req.Header.SetMethod(fasthttp.MethodPost)
}

// Sign makes req a node's own request, sent by node from: ForwardedHeader
// (it is never relayed again) and the cluster secret when there is one.
func (t *Transport) Sign(req *fasthttp.Request, from string) {
	req.Header.Set(ForwardedHeader, from)
	if t.secret != "" {
		req.Header.Set(SecretHeader, t.secret)
	}
}

// Do sends req and reads its answer into resp, within timeout.
func (t *Transport) Do(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	return t.http.DoTimeout(req, resp, timeout)
}

// Dial opens a connection of its own to the HTTP API of the node at addr,
// over TLS when the nodes use it, within timeout: for an answer read as it
// comes (OpenStream) or a relayed long-poll that watches its client.
func (t *Transport) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if t.tls == nil {
		return d.Dial("tcp", addr)
	}
	cfg := t.tls.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, cfg)
}
