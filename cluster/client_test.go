package cluster_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// proposerFunc is the consumer interface's fake: what a Host would answer.
type proposerFunc func(ctx context.Context, g uint32, entry []byte) (engine.Result, error)

func (f proposerFunc) ProposeEntry(ctx context.Context, g uint32, entry []byte) (engine.Result, error) {
	return f(ctx, g, entry)
}

// errRefused is what the test node's error answers stand for.
var errRefused = errors.New("refused")

// serve runs, on 127.0.0.1, the receiving end of the exchange as the
// server's route does: it checks the secret, answers with cluster.Answer,
// stamps the applied index, and answers an error as 503.
func serve(t *testing.T, p cluster.Proposer, applied string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != cluster.ProposePath || string(ctx.Request.Header.Peek(cluster.SecretHeader)) != "s3cret" {
			ctx.SetStatusCode(fasthttp.StatusForbidden)
			return
		}
		g, err := cluster.ParseGroup(ctx.Request.Header.Peek(cluster.GroupHeader))
		if err != nil {
			ctx.SetStatusCode(fasthttp.StatusBadRequest)
			return
		}
		out, _, err := cluster.Answer(ctx, p, g, ctx.PostBody())
		ctx.Response.Header.Set(cluster.AppliedHeader, applied)
		if err != nil {
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			ctx.SetBodyString(err.Error())
			return
		}
		ctx.SetBody(out)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

func newClient() *cluster.Client {
	return cluster.New(cluster.Options{NodeID: "n1", Secret: "s3cret",
		Refusal: func(status int, body []byte) error {
			return errors.Join(errRefused, errors.New(strconv.Itoa(status)+" "+string(body)))
		}})
}

func entry(c engine.Command) []byte {
	return command.AppendEntry(nil, []command.Stamped{{Cmd: c}})
}

// A forwarded command reaches the receiver's proposer on the group sent,
// and its typed result comes back with the receiver's applied index for
// that group.
func TestClient_Forward(t *testing.T) {
	want := []engine.AckResult{{TransactionID: "t1", Success: true, Queue: "q", Partition: "p"}}
	var gotGroup uint32
	var gotCmd engine.Command
	addr := serve(t, proposerFunc(func(_ context.Context, g uint32, b []byte) (engine.Result, error) {
		cmds, err := command.DecodeEntry(b)
		if err != nil {
			return engine.Result{}, err
		}
		gotGroup, gotCmd = g, cmds[0].Cmd
		return engine.Result{Value: want}, nil
	}), "0:7,2:42")
	c := newClient()
	ack := engine.AckCmd{Items: []engine.AckItem{{TransactionID: "t1", PartitionID: engine.ID{1}, Group: "g"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, applied, err := c.Forward(ctx, addr, 2, entry(ack))
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	if gotGroup != 2 {
		t.Fatalf("proposed on group %d, want 2", gotGroup)
	}
	if a, ok := gotCmd.(engine.AckCmd); !ok || len(a.Items) != 1 || a.Items[0].TransactionID != "t1" {
		t.Fatalf("proposed %#v, want the ack sent", gotCmd)
	}
	if got, ok := r.Value.([]engine.AckResult); !ok || len(got) != 1 || got[0] != want[0] {
		t.Fatalf("result %#v, want %#v", r.Value, want)
	}
	if applied != 42 {
		t.Fatalf("applied %d, want group 2's 42", applied)
	}
}

// A refusal reads back through Options.Refusal, a command's own error
// included; an unreachable node is raft.ErrForward (the outcome unknown);
// bytes that are not one command are refused before they are sent.
func TestClient_Forward_Errors(t *testing.T) {
	addr := serve(t, proposerFunc(func(context.Context, uint32, []byte) (engine.Result, error) {
		return engine.Result{Value: 0, Err: engine.ErrInvalid}, nil
	}), "")
	c := newClient()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	upd := entry(engine.UpdateSubscriptionCmd{Group: "g"})
	if _, _, err := c.Forward(ctx, addr, 1, upd); !errors.Is(err, errRefused) {
		t.Fatalf("a command answering ErrInvalid: err %v, want the refusal", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if _, _, err := c.Forward(ctx, dead, 1, upd); !errors.Is(err, raft.ErrForward) {
		t.Fatalf("a node that does not answer: err %v, want raft.ErrForward", err)
	}
	if _, _, err := c.Forward(ctx, addr, 1, []byte{1, 2, 3}); !errors.Is(err, command.ErrCorrupt) {
		t.Fatalf("not an entry: err %v, want ErrCorrupt", err)
	}
	if cluster.New(cluster.Options{NodeID: "n1"}) != nil {
		t.Fatal("a client without the cluster secret was made")
	}
}
