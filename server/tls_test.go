package server_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server"
)

// With Options.TLS the API is served over HTTPS only, and a parked
// long-poll still notices when its TLS client leaves (the peek sees the
// close_notify alert, not application data).
func TestServer_TLS(t *testing.T) {
	t.Parallel()
	ca := rafttest.NewCA(t, "http")
	c := newClientOptions(t, newBroker(t), server.Options{TLS: ca.ServerTLS("node", "127.0.0.1")})
	if !strings.HasPrefix(c.base, "https://") {
		t.Fatalf("base %q", c.base)
	}
	tr := &http.Transport{TLSClientConfig: ca.ClientTLS()}
	t.Cleanup(tr.CloseIdleConnections)
	c.http = &http.Client{Transport: tr, Timeout: 30 * time.Second}

	c.pushOne("q", "", "over-tls", 1)
	p := c.mustPop(popPath("q", "batch=1"))
	if p.Messages[0].TransactionID != "over-tls" {
		t.Fatalf("popped %q", p.Messages[0].TransactionID)
	}
	c.ack(p.Messages[0], "completed", "")
	// Plain HTTP to the TLS port gets no API answer.
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + strings.TrimPrefix(c.base, "https://") + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP was served on the TLS listener")
		}
	}

	conn, err := tls.Dial("tcp", strings.TrimPrefix(c.base, "https://"), ca.ClientTLS())
	if err != nil {
		t.Fatal(err)
	}
	req := "GET /api/v1/pop/queue/q?batch=1&wait=true&timeout=20000 HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the poll to park", func() bool { return watchers(t, c) == 1 })
	conn.Close() // close_notify, then FIN
	waitFor(t, 5*time.Second, "the abandoned TLS poll to end", func() bool { return watchers(t, c) == 0 })
	c.pushOne("q", "", "after", 1)
	if p := c.mustPop(popPath("q", "batch=1")); p.Messages[0].TransactionID != "after" {
		t.Fatalf("popped %q", p.Messages[0].TransactionID)
	}
}
