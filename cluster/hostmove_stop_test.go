package cluster_test

import (
	"errors"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
)

// TestHost_StopWaitingAnswersCommandsOnAFrozenQueue: a push that waits
// for a frozen queue (a stray mark, which the group's leader would
// thaw only after MoveTimeout, 3 s here) answers the move's refusal as
// soon as StopWaiting is called, and a push after it does not wait at all:
// a node shutting down must not hold requests for up to MoveWait (30 s),
// past queen serve's shutdown deadline (the chaos suite's seed 2222).
func TestHost_StopWaitingAnswersCommandsOnAFrozenQueue(t *testing.T) {
	c := openOutboxHosts(t)
	c.place("orders", 1)
	r, err := c.h[2].Propose(ctxT(t), engine.FreezeQueueCmd{Group: 1, Queue: "orders", Epoch: 5})
	if err != nil || r.Err != nil || r.Value != true {
		t.Fatalf("freeze: %v %v %v", r.Value, err, r.Err)
	}
	frozen := time.Now()
	push := engine.PushCmd{Items: []engine.PushItem{{Queue: "orders", TransactionID: "held", Payload: []byte(`1`)}}}
	answered := make(chan error, 1)
	go func() {
		r, err := c.h[1].Propose(ctxT(t), push)
		answered <- errors.Join(err, r.Err)
	}()
	// Not a condition the test waits for: the push is most likely
	// parked by now, and the answer must come at once either way.
	time.Sleep(300 * time.Millisecond)
	c.h[1].StopWaiting()
	select {
	case err := <-answered:
		if !errors.Is(err, engine.ErrQueueMoving) {
			t.Fatalf("the held push answered %v, want ErrQueueMoving", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held push still waits 10 s after StopWaiting")
	}
	if took := time.Since(frozen); took > 2*time.Second {
		t.Fatalf("the held push answered %v after the freeze: it waited for the thaw, not for StopWaiting", took)
	}
	start := time.Now()
	r, err = c.h[1].Propose(ctxT(t), push)
	if err = errors.Join(err, r.Err); !errors.Is(err, engine.ErrQueueMoving) || time.Since(start) > time.Second {
		t.Fatalf("a push after StopWaiting: %v after %v, want ErrQueueMoving at once", err, time.Since(start))
	}
}
