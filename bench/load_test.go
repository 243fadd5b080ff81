package bench

import (
	"context"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/raft/rafttest"
	"github.com/queenmq/queen/server"
)

// startBroker serves a one-node Raft cluster over HTTP on 127.0.0.1 and
// returns its base URL; everything stops at cleanup.
func startBroker(tb testing.TB) string {
	tb.Helper()
	c := rafttest.MakeCluster(tb, 1)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(c.Leader(), server.Options{Logger: log})
	if err != nil {
		tb.Fatalf("server.New: %v", err)
	}
	ln, err := listenLoopback()
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Errorf("server shutdown: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func checkNoErrors(t *testing.T, rep Report) {
	t.Helper()
	if len(rep.Errors) > 0 {
		t.Errorf("%s: errors %v", rep.Workload, rep.Errors)
	}
}

// TestRun_PushThenPopAck fills a queue, drains it in queue mode, and checks
// the report's counts agree with each other and with the broker.
func TestRun_PushThenPopAck(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	url := startBroker(t)
	o := DefaultOptions()
	o.URLs = []string{url}
	o.Conns, o.Batch, o.Size, o.Partitions = 4, 25, 512, 3
	o.Queue = "e2e"
	o.Messages, o.Duration = 1000, 2*time.Second
	push, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("push: %v", err)
	}
	checkNoErrors(t, push)
	t.Logf("push: %d msgs in %.2fs (%s)", push.Pushed, push.Seconds, push.Stop)
	if push.Pushed == 0 || push.Pushed > o.Messages {
		t.Fatalf("pushed %d, want 1..%d", push.Pushed, o.Messages)
	}
	if push.Stop == "messages" && push.Pushed != o.Messages {
		t.Errorf("stopped by messages after %d, want exactly %d", push.Pushed, o.Messages)
	}
	if op := push.Ops["push"]; op.Messages != push.Pushed || op.Requests < push.Pushed/int64(o.Batch) ||
		op.Latency.P50 <= 0 || op.Latency.P50 > op.Latency.P99 || op.Latency.P99 > op.Latency.Max {
		t.Errorf("push op report %+v", op)
	}

	// Idle is the drained run's end: generous, since on a busy machine (a
	// race build beside other test binaries) a pop's answer took over
	// 300 ms and a run ended "drained" before its first delivery; the
	// duration is only a bound (a drained run ends first).
	o.Workload, o.Messages, o.Idle, o.Duration = PopAck, 0, 2*time.Second, 30*time.Second
	pop, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("popack: %v", err)
	}
	checkNoErrors(t, pop)
	t.Logf("popack: %d msgs in %.2fs (%s)", pop.Acked, pop.Seconds, pop.Stop)
	if pop.Stop != "drained" {
		t.Errorf("popack stopped by %s, want drained", pop.Stop)
	}
	if pop.Acked != push.Pushed || pop.Popped != pop.Acked {
		t.Errorf("pushed %d, popped %d, acked %d: want all equal", push.Pushed, pop.Popped, pop.Acked)
	}
	if pop.Ops["pop"].Messages != pop.Popped || pop.Ops["ack"].Messages != pop.Acked || pop.Ops["ack"].Requests > pop.Ops["pop"].Requests {
		t.Errorf("op reports %+v", pop.Ops)
	}
}

// TestRun_MixedGroups pushes and consumes at once with two groups: each
// group receives every message.
func TestRun_MixedGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	url := startBroker(t)
	o := DefaultOptions()
	o.URLs = []string{url, url} // two "nodes": both paths are exercised
	o.Workload = Mixed
	o.Conns, o.Batch, o.Size, o.Partitions, o.Groups = 6, 20, 256, 2, 2
	o.Queue, o.Queues = "mixed", 2
	o.Messages, o.Duration, o.Idle = 600, 30*time.Second, 2*time.Second // Idle, Duration: see TestRun_PushThenPopAck
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatalf("mixed: %v", err)
	}
	checkNoErrors(t, rep)
	t.Logf("mixed: pushed %d, acked %d in %.2fs (%s)", rep.Pushed, rep.Acked, rep.Seconds, rep.Stop)
	if rep.Pushed == 0 || rep.Acked != rep.Popped || rep.Acked > 2*rep.Pushed {
		t.Errorf("pushed %d, popped %d, acked %d", rep.Pushed, rep.Popped, rep.Acked)
	}
	if rep.Stop != "duration" && rep.Acked != 2*rep.Pushed {
		t.Errorf("stopped by %s with %d acked, want every message acked by both groups (%d)", rep.Stop, rep.Acked, 2*rep.Pushed)
	}
}

// TestRun_Read reads a queue's resource, then a path that does not exist:
// successes are counted as reads with latencies, failures by status.
func TestRun_Read(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	url := startBroker(t)
	o := DefaultOptions()
	o.URLs = []string{url}
	o.Conns, o.Batch, o.Partitions, o.Queue = 2, 1, 1, "r"
	o.Messages, o.Duration = 1, 2*time.Second
	if _, err := Run(context.Background(), o, nil); err != nil { // creates the queue
		t.Fatal(err)
	}
	// Long enough for reads to be answered on a busy machine: in 300 ms a
	// loaded race build answered none.
	o.Workload, o.Messages, o.Duration = Read, 0, 2*time.Second
	o.ReadPath = "/api/v1/resources/queues/r?consistency=stale"
	rep, err := Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkNoErrors(t, rep)
	if op := rep.Ops["read"]; op.Messages == 0 || op.Requests != op.Messages || op.Latency.P50 <= 0 || op.Latency.P50 > op.Latency.P99 {
		t.Errorf("read op report %+v", op)
	}
	if _, ok := rep.Ops["pop"]; ok || rep.Pushed != 0 {
		t.Errorf("a read run reported pops or pushes: %+v", rep)
	}
	o.ReadPath = "/api/v1/resources/queues/absent"
	rep, err = Run(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ops["read"].Messages != 0 || rep.Errors["read/http_404"] == 0 {
		t.Errorf("reads of an absent queue: %+v, errors %v", rep.Ops["read"], rep.Errors)
	}
}

func TestRun_Cancelled(t *testing.T) {
	// A server that hangs up on every connection: each request fails. The
	// run is cancelled once one has, not after a fixed time, which under a
	// busy CI could pass before any request was made.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			if cancelledAt.CompareAndSwap(0, time.Now().UnixNano()) {
				cancel()
			}
		}
	}()
	o := DefaultOptions()
	o.URLs = []string{"http://" + ln.Addr().String()}
	o.Conns = 2
	rep, err := Run(ctx, o, nil)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if at := cancelledAt.Load(); at == 0 {
		t.Fatal("Run returned before any request reached the server")
	} else if took := time.Since(time.Unix(0, at)); took > 10*time.Second {
		t.Errorf("the run went on %v after it was cancelled", took)
	}
	if rep.Stop != "cancelled" || rep.Pushed != 0 || len(rep.Errors) == 0 {
		t.Errorf("report %+v", rep)
	}
}
