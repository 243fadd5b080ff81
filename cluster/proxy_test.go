package cluster_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/rafttest"
)

// leaderPath is a Forwarder that proposes on the node whose HTTP address
// it is sent to, in process, as a node's route would (ProposeEntry), and
// answers that node's applied index; answer, when set, answers instead.
type leaderPath struct {
	c      *rafttest.Cluster
	sent   atomic.Int32
	answer func() error
}

func (p *leaderPath) Forward(ctx context.Context, addr string, g uint32, entry []byte) (engine.Result, uint64, error) {
	p.sent.Add(1)
	if p.answer != nil {
		return engine.Result{}, 0, p.answer()
	}
	for _, n := range p.c.Nodes {
		if "http-"+n.Status().ID == addr {
			r, err := n.ProposeEntry(ctx, g, entry)
			return r, n.Applied(), err
		}
	}
	return engine.Result{}, 0, raft.ErrForward
}

// knowsLeader waits until f knows its leader's HTTP address.
func knowsLeader(t *testing.T, f *raft.Node) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); f.Status().LeaderHTTP == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the follower never learnt its leader's address")
		}
	}
}

func onePush(queue string) engine.PushCmd {
	return engine.PushCmd{Items: []engine.PushItem{{Queue: queue, Payload: []byte(`1`)}}}
}

// A follower's push goes to the leader on the cluster path, once, and is
// answered with the leader's typed results; the follower notes the index
// the leader had applied, which its reads wait for, and does not wait for
// it itself (a client's command).
func TestProxy_FollowerSendsARelayableCommandToTheLeader(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	leader, f := c.Leader(), c.Followers()[0]
	knowsLeader(t, f)
	path := &leaderPath{c: c}
	p := cluster.NewProxy(f, cluster.ProxyOptions{Forward: path})
	res, err := raft.Propose[[]engine.PushResult](cluster.WithoutApplyWait(context.Background()), p, onePush("q"))
	if err != nil || len(res) != 1 || res[0].Status != engine.Queued {
		t.Fatalf("push through the follower: %+v, %v", res, err)
	}
	if n := path.sent.Load(); n != 1 {
		t.Fatalf("sent %d times, want once", n)
	}
	if w, a := f.Written(), leader.Applied(); w == 0 || w > a {
		t.Fatalf("the follower noted %d, the leader has applied %d", w, a)
	}
	if _, err := leader.Engine().Queue("q"); err != nil {
		t.Fatalf("the leader does not have the queue: %v", err)
	}
	// On the leader the Proxy proposes here, and sends nothing.
	if _, err := cluster.NewProxy(leader, cluster.ProxyOptions{Forward: path}).Propose(context.Background(), onePush("q")); err != nil ||
		path.sent.Load() != 1 {
		t.Fatalf("push on the leader: %v, %d sends", err, path.sent.Load())
	}
}

// What the cluster path does not carry is answered with the follower's
// own raft.ErrNotLeader, before anything was proposed, for the edge to
// relay the request whole: a command without a result codec, a request
// another node relayed here (a second hop), an entry past the leader's
// body limit, and a leader that says it no longer leads or has no such
// path. A send that failed is raft.ErrForward: its outcome is unknown.
func TestProxy_WhatThePathDoesNotCarryIsTheFollowersNotLeader(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	f := c.Followers()[0]
	knowsLeader(t, f)
	errOld := errors.New("an older leader: no such route")
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		cmd   engine.Command
		opts  cluster.ProxyOptions
		reply func() error
		sends int32
		want  error
	}{
		{name: "no result codec", cmd: engine.DeleteQueueCmd{Queue: "q"}, want: raft.ErrNotLeader},
		{name: "relayed here", ctx: cluster.WithoutRelay(context.Background()), cmd: onePush("q"), want: raft.ErrNotLeader},
		{name: "past the body limit", cmd: onePush("q"), opts: cluster.ProxyOptions{MaxEntry: 8}, want: raft.ErrNotLeader},
		{name: "leader no longer leads", cmd: onePush("q"), reply: func() error { return raft.ErrNotLeader }, sends: 1, want: raft.ErrNotLeader},
		{name: "no such path", cmd: onePush("q"), reply: func() error { return errOld }, sends: 1, want: raft.ErrNotLeader,
			opts: cluster.ProxyOptions{NoPath: func(err error) bool { return errors.Is(err, errOld) }}},
		{name: "send failed", cmd: onePush("q"), reply: func() error { return raft.ErrForward }, sends: 1, want: raft.ErrForward},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := &leaderPath{c: c, answer: tc.reply}
			o := tc.opts
			o.Forward, o.Logger = path, slog.New(slog.DiscardHandler)
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			_, err := cluster.NewProxy(f, o).Propose(ctx, tc.cmd)
			if !errors.Is(err, tc.want) || path.sent.Load() != tc.sends {
				t.Fatalf("answered %v after %d sends, want %v after %d", err, path.sent.Load(), tc.want, tc.sends)
			}
			if errors.Is(tc.want, raft.ErrNotLeader) && errors.Is(err, errOld) {
				t.Fatalf("answered the leader's refusal %v, want the follower's own", err)
			}
			if got, want := errors.Is(err, cluster.ErrNoPath), tc.opts.NoPath != nil || tc.opts.MaxEntry > 0; got != want {
				t.Fatalf("answered %v: ErrNoPath %v, want %v", err, got, want)
			}
		})
	}
	// Without the cluster path nothing is sent.
	if _, err := cluster.NewProxy(f, cluster.ProxyOptions{}).Propose(context.Background(), onePush("q")); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("no path: %v", err)
	}
}

// unannounced is a follower that has not learnt its leader's HTTP address
// until known is set (its leader was elected a moment ago).
type unannounced struct {
	*raft.Node
	known atomic.Bool
}

func (u *unannounced) Status() raft.Status {
	st := u.Node.Status()
	if !u.known.Load() {
		st.LeaderHTTP = ""
	}
	return st
}

// A follower that does not know its leader's address yet waits for it, as
// a Host does, and sends the command once it is known; past the wait it
// answers its own raft.ErrNotLeader, having sent nothing.
func TestProxy_WaitsForTheLeadersAddress(t *testing.T) {
	t.Parallel()
	c := rafttest.MakeCluster(t, 3)
	f := &unannounced{Node: c.Followers()[0]}
	knowsLeader(t, f.Node)
	path := &leaderPath{c: c}
	p := cluster.NewProxy(f, cluster.ProxyOptions{Forward: path})
	learnt := time.AfterFunc(300*time.Millisecond, func() { f.known.Store(true) })
	defer learnt.Stop()
	res, err := raft.Propose[[]engine.PushResult](context.Background(), p, onePush("q"))
	if err != nil || len(res) != 1 || res[0].Status != engine.Queued || path.sent.Load() != 1 {
		t.Fatalf("push while the address was unknown: %+v, %v after %d sends", res, err, path.sent.Load())
	}

	f.known.Store(false)
	start := time.Now()
	if _, err := p.Propose(context.Background(), onePush("q")); !errors.Is(err, raft.ErrNotLeader) || path.sent.Load() != 1 {
		t.Fatalf("the address never known: %v after %d sends, want ErrNotLeader after 1", err, path.sent.Load())
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("gave up after %v, want the bounded wait for the address", waited)
	}
}
