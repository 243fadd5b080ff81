package cluster_test

import (
	"context"
	"net"
	"reflect"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/raft"
)

// serveHealth answers GET /health with body and status, as a node does.
func serveHealth(t *testing.T, status int, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/health" {
			ctx.SetStatusCode(fasthttp.StatusNotFound)
			return
		}
		ctx.SetStatusCode(status)
		ctx.SetBodyString(body)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// A node's versions come from its /health, healthy or not; an older node's
// /health, without commandVersion, answers command version 0 (read as 1
// by package raft); the versions it holds of the others come with it; what
// is not a queen node's /health is an error.
func TestClient_NodeVersion(t *testing.T) {
	c := newClient()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   raft.NodeVersion
		fails  bool
	}{
		{"new", 200, `{"status":"healthy","server":"queen","version":"v0.9.0","id":"n2","commandVersion":3}`,
			raft.NodeVersion{ID: "n2", Binary: "v0.9.0", Command: 3}, false},
		{"with what it heard", 200, `{"status":"healthy","server":"queen","version":"v0.9.0","id":"n2","commandVersion":3,` +
			`"nodes":[{"id":"n1","version":"v0.9.0","commandVersion":3,"known":true},{"id":"n3","version":"","commandVersion":2,"known":false}]}`,
			raft.NodeVersion{ID: "n2", Binary: "v0.9.0", Command: 3, Others: []raft.NodeVersion{
				{ID: "n1", Binary: "v0.9.0", Command: 3, Known: true}, {ID: "n3", Command: 2}}}, false},
		{"unhealthy", 503, `{"status":"unhealthy","server":"queen","version":"v0.9.0","id":"n2","commandVersion":1}`,
			raft.NodeVersion{ID: "n2", Binary: "v0.9.0", Command: 1}, false},
		{"older", 200, `{"status":"healthy","server":"queen","version":"v0.8.0","id":"n3"}`,
			raft.NodeVersion{ID: "n3", Binary: "v0.8.0"}, false},
		{"not queen", 200, `{"status":"ok"}`, raft.NodeVersion{}, true},
		{"not json", 502, `bad gateway`, raft.NodeVersion{}, true},
	} {
		got, err := c.NodeVersion(context.Background(), serveHealth(t, tc.status, tc.body))
		if (err != nil) != tc.fails || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v, fails %v", tc.name, got, err, tc.want, tc.fails)
		}
	}
	if _, err := c.NodeVersion(context.Background(), closedAddr(t)); err == nil {
		t.Errorf("a node that does not answer: no error")
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
