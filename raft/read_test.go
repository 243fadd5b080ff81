package raft_test

import (
	"context"
	"testing"
	"time"

	"github.com/queenmq/queen/raft/rafttest"
)

// TestNode_Publish: a follower learns that an entry committed only with
// the next entries its leader sends, which in a group with no other
// traffic come hashicorp/raft's CommitTimeout later (50 ms at least, here
// as in production). After Publish of a read index the follower applies it
// well before that: the barrier Publish appends carries the commit index.
// Timing on a shared machine varies, so most rounds, not all, must be fast;
// without Publish none is.
func TestNode_Publish(t *testing.T) {
	c := rafttest.MakeCluster(t, 3)
	leader := c.Leader()
	f := c.Followers()[0]
	push(t, leader, "q", "warm")
	const rounds, fastest = 5, 40 * time.Millisecond
	fast := 0
	for i := range rounds {
		push(t, leader, "q", "t"+string(rune('a'+i)))
		idx, err := leader.ReadIndex(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		leader.Publish(idx)
		leader.Publish(idx) // served by the same barrier
		ctx, cancel := context.WithTimeout(ctxT(t), 5*time.Second)
		err = f.WaitApplied(ctx, idx)
		cancel()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("round %d: the follower did not apply %d: %v", i, idx, err)
		}
		t.Logf("round %d: applied %d on the follower %v after Publish", i, idx, took)
		if took < fastest {
			fast++
		}
		time.Sleep(120 * time.Millisecond) // the group goes quiet again
	}
	if fast < 3 {
		t.Fatalf("the follower applied the published index within %v in %d rounds of %d, want 3 or more", fastest, fast, rounds)
	}
}
