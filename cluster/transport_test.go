package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"go/ast"
	"go/token"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
)

// TestTransport_Sign: a node's own request names it and carries the
// cluster secret, and carries none when the cluster has none (the edge
// relays client requests without one).
func TestTransport_Sign(t *testing.T) {
	for _, secret := range []string{"s3cret", ""} {
		tr := cluster.NewTransport(cluster.TransportOptions{Secret: secret})
		req := fasthttp.AcquireRequest()
		tr.Address(req, "10.0.0.2:6632", cluster.StoragePath)
		tr.Sign(req, "n1")
		if got, want := string(req.URI().Path()), cluster.StoragePath; got != want {
			t.Errorf("secret %q: path %q, want %q", secret, got, want)
		}
		if got, want := string(req.Header.Method()), fasthttp.MethodPost; got != want {
			t.Errorf("secret %q: method %q, want %q", secret, got, want)
		}
		if got, want := string(req.Header.Peek(cluster.ForwardedHeader)), "n1"; got != want {
			t.Errorf("secret %q: %s %q, want %q", secret, cluster.ForwardedHeader, got, want)
		}
		if got, want := string(req.Header.Peek(cluster.SecretHeader)), secret; got != want {
			t.Errorf("%s %q, want %q", cluster.SecretHeader, got, want)
		}
		fasthttp.ReleaseRequest(req)
	}
}

// TestTransport_Scheme: nodes that serve TLS are reached over https.
func TestTransport_Scheme(t *testing.T) {
	for _, c := range []struct {
		tls  *tls.Config
		want string
	}{{nil, "http"}, {&tls.Config{}, "https"}} {
		tr := cluster.NewTransport(cluster.TransportOptions{TLS: c.tls})
		req := fasthttp.AcquireRequest()
		tr.Address(req, "10.0.0.2:6632", cluster.ReadIndexPath)
		if got := string(req.URI().Scheme()); got != c.want || tr.Scheme() != c.want {
			t.Errorf("TLS %v: scheme %q (Scheme %q), want %q", c.tls != nil, got, tr.Scheme(), c.want)
		}
		if got, want := string(req.Host()), "10.0.0.2:6632"; got != want {
			t.Errorf("host %q, want %q", got, want)
		}
		fasthttp.ReleaseRequest(req)
	}
}

// TestTransport_TLS: a Transport made with TLS reaches a node serving it,
// on the shared client (Do) and on a connection of its own (OpenStream),
// verifying the node's certificate for the address it dials.
func TestTransport_TLS(t *testing.T) {
	node := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path+" from "+r.Header.Get(cluster.ForwardedHeader))
	}))
	node.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted dial's handshake
	node.StartTLS()
	defer node.Close()
	roots := x509.NewCertPool()
	roots.AddCert(node.Certificate())
	tr := cluster.NewTransport(cluster.TransportOptions{Secret: "s3cret", TLS: &tls.Config{RootCAs: roots}})
	addr := node.Listener.Addr().String()
	want := cluster.ReadIndexPath + " from n1"

	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	tr.Address(req, addr, cluster.ReadIndexPath)
	tr.Sign(req, "n1")
	if err := tr.Do(req, resp, 5*time.Second); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if got := string(resp.Body()); got != want {
		t.Errorf("Do: %q, want %q", got, want)
	}

	s, err := tr.OpenStream(addr, req, 5*time.Second, 5*time.Second)
	if err != nil {
		t.Fatalf("OpenStream: %v", err)
	}
	defer s.Close()
	b, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("read the stream: %v", err)
	}
	if got := string(b); got != want {
		t.Errorf("OpenStream: %q, want %q", got, want)
	}

	untrusted := cluster.NewTransport(cluster.TransportOptions{TLS: &tls.Config{}})
	if _, err := untrusted.Dial(addr, 5*time.Second); err == nil {
		t.Error("Dial verified a certificate signed by no trusted root")
	}
}

// TestTransport_OneClient fails on a fasthttp.Client (or HostClient) made
// in a non-test file other than transport.go: every request between nodes goes through
// the Transport (issue 43). bench's load driver is a client of the broker,
// not a node, and makes its own.
func TestTransport_OneClient(t *testing.T) {
	made := 0
	walkSource(t, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Client" && sel.Sel.Name != "HostClient") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "fasthttp" {
				return true
			}
			switch {
			case rel == filepath.Join("cluster", "transport.go"):
				made++
			case filepath.Dir(rel) == "bench":
			default:
				t.Errorf("%s:%d: a fasthttp.Client of its own: reach other nodes through cluster.Transport", rel, fset.Position(lit.Pos()).Line)
			}
			return true
		})
	})
	if made != 1 {
		t.Errorf("cluster/transport.go makes %d fasthttp clients, want 1: the walk does not see it", made)
	}
}
