package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// keepingBroker keeps every item pushed, payload slices as they came, as a
// broker that proposes them asynchronously would.
type keepingBroker struct {
	Broker
	mu    sync.Mutex
	items []engine.PushItem
}

func (b *keepingBroker) Status() raft.Status {
	return raft.Status{ID: "n1", Role: "leader", Leader: "n1"}
}

func (b *keepingBroker) Propose(_ context.Context, c engine.Command) (engine.Result, error) {
	push, ok := c.(engine.PushCmd)
	if !ok {
		return engine.Result{}, fmt.Errorf("keepingBroker: %T", c)
	}
	b.mu.Lock()
	b.items = append(b.items, push.Items...)
	b.mu.Unlock()
	return engine.Result{Value: queuedAll(push.Items)}, nil
}

// TestServer_Push_PayloadOutlivesItsRequest: payloads are handed to the
// broker without a copy, and yet a payload kept by the broker is not
// overwritten by the next request on the same connection: the body buffer
// belongs to its request, not to fasthttp's per-connection buffers. Small
// bodies (within fasthttp's first 8 KiB) and large ones alike.
func TestServer_Push_PayloadOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	b := &keepingBroker{}
	s, err := New(b, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	})
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var want []string
	for i, size := range []int{100, 100, 50 << 10, 50 << 10, 3000, 200 << 10} {
		payload := fmt.Sprintf(`"%c%s"`, 'a'+i, strings.Repeat(string(rune('a'+i)), size))
		want = append(want, payload)
		resp, err := hc.Post("http://"+ln.Addr().String()+"/api/v1/push", "application/json",
			strings.NewReader(`{"items":[{"queue":"q","payload":`+payload+`}]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("push %d: %d", i, resp.StatusCode)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.items) != len(want) {
		t.Fatalf("broker kept %d items, want %d", len(b.items), len(want))
	}
	for i, it := range b.items {
		if got := string(it.Payload); got != want[i] {
			t.Errorf("payload %d changed after its request: got %.20q... (%d bytes), want %.20q... (%d bytes)", i, got, len(got), want[i], len(want[i]))
		}
	}
}
