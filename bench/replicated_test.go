package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
)

// The replicated push path in process: raft.Propose(node, PushCmd) → proposer (group commit)
// → hashicorp/raft on a local transport → the Pebble log store, synced →
// FSM → engine batch. It is what a single node runs under HTTP, minus HTTP;
// BenchmarkHTTPPush adds the server and the load driver on loopback.
// Concurrent callers let group commit form: with 32 callers of batch 1 one
// fsync carries many commands, so the rate can pass the batch=1 limit.

// openBenchNode starts a single-voter node with production options (synced
// Raft log) on b.TempDir(), and waits until it leads.
func openBenchNode(b *testing.B) *raft.Node {
	b.Helper()
	o := raft.DefaultOptions()
	o.ID, o.Dir = "n1", b.TempDir()
	o.Transport = raft.NewLocalTransport("n1")
	o.Bootstrap = true
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.HeartbeatTimeout, o.ElectionTimeout, o.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
	o.RetentionInterval = 0 // no sweeps in the measurements
	node, err := raft.Open(o)
	if err != nil {
		b.Fatalf("open node: %v", err)
	}
	b.Cleanup(func() { node.Close() })
	for deadline := time.Now().Add(10 * time.Second); node.Status().Role != "leader"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("node did not lead within 10s")
		}
	}
	return node
}

var replicatedCases = []struct{ batch, callers int }{{1, 1}, {1, 32}, {100, 1}, {100, 32}}

// BenchmarkReplicatedPush measures a proposed PushCmd of batch 1 KiB JSON messages
// from concurrent callers; each caller pushes to its own partition.
func BenchmarkReplicatedPush(b *testing.B) {
	docs := Payloads(1000, 1024, 7)
	for _, c := range replicatedCases {
		b.Run(fmt.Sprintf("batch=%d/callers=%d", c.batch, c.callers), func(b *testing.B) {
			node := openBenchNode(b)
			ctx := context.Background()
			var next atomic.Int64
			var failed atomic.Value
			var wg sync.WaitGroup
			b.SetBytes(int64(c.batch * 1024))
			b.ReportAllocs()
			b.ResetTimer()
			for g := range c.callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					items := make([]engine.PushItem, c.batch)
					part := "p" + strconv.Itoa(g)
					for seq := 0; next.Add(1) <= int64(b.N); {
						for i := range items {
							items[i] = engine.PushItem{Queue: "bench", Partition: part,
								TransactionID: "t" + strconv.Itoa(seq), Payload: docs[(g*131+seq)%len(docs)]}
							seq++
						}
						res, err := raft.Propose[[]engine.PushResult](ctx, node, engine.PushCmd{Items: items})
						if err == nil && (len(res) != len(items) || res[0].Status != engine.Queued) {
							err = fmt.Errorf("push: %d results, first %+v", len(res), res[0])
						}
						if err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N*c.batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkHTTPPush is BenchmarkReplicatedPush behind the HTTP server on
// 127.0.0.1, driven by the load driver (Run) with 32 connections: the whole
// push path of `queen bench` against one node, in one process. Driver and
// broker share the CPUs, as they do on one machine.
func BenchmarkHTTPPush(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d/conns=32", batch), func(b *testing.B) {
			node := openBenchNode(b)
			url := serveBench(b, node)
			o := DefaultOptions()
			o.URLs = []string{url}
			o.Batch, o.Messages, o.Seed = batch, int64(b.N*batch), 7
			b.SetBytes(int64(batch * 1024))
			b.ResetTimer()
			rep, err := Run(context.Background(), o, nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(rep.Errors) > 0 || rep.Pushed != o.Messages {
				b.Fatalf("pushed %d of %d, errors %v", rep.Pushed, o.Messages, rep.Errors)
			}
			b.ReportMetric(float64(rep.Pushed)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(rep.Ops["push"].Latency.P99, "p99-ms")
		})
	}
}

// serveBench serves node over HTTP on a fresh 127.0.0.1 port until cleanup.
func serveBench(b *testing.B, node *raft.Node) string {
	b.Helper()
	srv, err := server.New(node, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := listenLoopback()
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return "http://" + ln.Addr().String()
}
