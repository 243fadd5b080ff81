package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// The waits and the push the Host tests share with raft's (there in
// node_test.go, membership_test.go and version_test.go).

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 10 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 20s waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func eventually(cond func() bool) bool {
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func push(t *testing.T, n *raft.Node, queue, txn string) engine.PushResult {
	t.Helper()
	res, err := raft.Propose[[]engine.PushResult](ctxT(t), n, engine.PushCmd{Items: []engine.PushItem{{Queue: queue, TransactionID: txn, Payload: []byte(`{"t":"` + txn + `"}`)}}})
	if err != nil {
		t.Fatalf("push %s: %v", txn, err)
	}
	return res[0]
}
