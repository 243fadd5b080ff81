package cluster_test

import (
	"crypto/tls"
	"go/ast"
	"go/token"
	"path/filepath"
	"testing"

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
