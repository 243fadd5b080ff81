package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/cursor"
)

// leavingBroker delivers on the second pop, after the client has gone (it
// closes the client's connection during that pop), and records acks.
type leavingBroker struct {
	Broker
	client net.Conn
	mu     sync.Mutex
	pops   int
	acks   []engine.AckItem
}

func (b *leavingBroker) Propose(_ context.Context, c engine.Command) (engine.Result, error) {
	switch c := c.(type) {
	case engine.PopCmd:
		return engine.Result{Value: b.pop()}, nil
	case engine.AckCmd:
		return engine.Result{Value: b.ack(c.Items)}, nil
	}
	return engine.Result{}, fmt.Errorf("leavingBroker: %T", c)
}

func (b *leavingBroker) pop() engine.PopResult {
	b.mu.Lock()
	b.pops++
	n := b.pops
	b.mu.Unlock()
	if n == 1 {
		return engine.PopResult{Group: engine.QueueMode}
	}
	b.client.Close()
	time.Sleep(50 * time.Millisecond) // let the FIN arrive
	part := engine.ID{7}
	return engine.PopResult{Group: engine.QueueMode, LeaseID: engine.ID{9},
		Claims: []engine.Claim{{Queue: "q", Partition: "Default", PartitionID: part}},
		Messages: []engine.Message{
			{TransactionID: "a", PartitionID: part, Queue: "q", Partition: "Default"},
			{TransactionID: "b", PartitionID: part, Queue: "q", Partition: "Default"},
		}}
}

func (b *leavingBroker) ack(items []engine.AckItem) []engine.AckResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acks = append(b.acks, items...)
	return make([]engine.AckResult, len(items))
}

func (b *leavingBroker) Watch(string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	ch <- struct{}{} // re-check at once
	return ch, func() {}
}

// TestPark_ReleasesLeaseOfClientThatLeft: a long-poll whose client left
// while its pop was being applied gives the lease back with one budget-free
// "retry" ack per claimed partition.
func TestPark_ReleasesLeaseOfClientThatLeft(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := &leavingBroker{client: client}
	s, err := New(b, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	defer func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		<-done
	}()
	if _, err := client.Write([]byte("GET /api/v1/pop/queue/q?batch=2&wait=true&timeout=5000 HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		b.mu.Lock()
		acks := append([]engine.AckItem(nil), b.acks...)
		b.mu.Unlock()
		if len(acks) > 0 {
			want := engine.AckItem{TransactionID: "a", PartitionID: engine.ID{7}, Group: engine.QueueMode, Status: cursor.Retry, Lease: engine.ID{9}}
			if len(acks) != 1 || acks[0] != want {
				t.Fatalf("release acks %+v, want %+v", acks, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned pop's lease was not released")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
