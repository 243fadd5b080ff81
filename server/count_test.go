package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
)

// notLeader follows the leader at leaderHTTP and proposes nothing itself:
// its server sends pushes (prepared) and acks to the leader on the cluster
// path (with the cluster secret) or relays them whole, and relays pops
// whole.
type notLeader struct{ followerEngine }

func (notLeader) Propose(context.Context, engine.Command) (engine.Result, error) {
	return engine.Result{}, raft.ErrNotLeader
}

// Pushes, pops and acks sent to every node are counted once in the
// cluster (ARCHITECTURE.md, "Counting once"): summed over the nodes,
// /metrics and the leader's analytics say n for n. A push or an ack a
// follower sent on the cluster path is counted by that follower, which
// answers it; a request relayed whole is counted by the leader, whose
// handler answers it.
func TestCount_OnceWhicheverNodeIsAsked(t *testing.T) {
	t.Parallel()
	const secret = "count-test-secret-count-test-sec"
	clock := &fakeClock{t: t0}
	lb := memberEngine{newEngineBroker(t, clock)}
	leader, _ := analyticsServer(t, lb, clock, server.Options{ClusterSecret: secret})
	addr := strings.TrimPrefix(leader.base, "http://")
	prepares, _ := analyticsServer(t, notLeader{followerEngine{lb, addr}}, clock, server.Options{ClusterSecret: secret})
	relays, _ := analyticsServer(t, notLeader{followerEngine{lb, addr}}, clock, server.Options{Logger: quietLogger()})
	nodes := []*client{leader, prepares, relays}
	leader.configure("c", nil)

	const each = 3
	for i, n := range nodes {
		var items []map[string]any
		for k := range each {
			items = append(items, map[string]any{"queue": "c", "transactionId": fmt.Sprintf("t%d-%d", i, k), "payload": k})
		}
		for _, r := range n.push(items...) {
			if r.Status != "queued" {
				t.Fatalf("push via node %d: %+v", i, r)
			}
		}
	}
	// Each node pops a batch, and the next one acks it.
	for i, n := range nodes {
		p := n.mustPop(popPath("c", fmt.Sprintf("batch=%d", each)))
		if len(p.Messages) != each {
			t.Fatalf("pop via node %d: %d messages, want %d", i, len(p.Messages), each)
		}
		statuses := []string{"completed", "completed", "completed"}
		for _, r := range nodes[(i+1)%len(nodes)].ackBatch("", p.Messages, statuses...) {
			if !r.Success {
				t.Fatalf("ack via node %d: %+v", (i+1)%len(nodes), r)
			}
		}
	}

	const total = each * 3
	for name, want := range map[string][3]float64{
		// The relaying node's whole push and ack are the leader's; the
		// ones sent on the cluster path the follower's.
		`queen_push_messages_total{status="queued"}`: {2 * each, each, 0},
		`queen_pop_messages_total`:                   {total, 0, 0},
		`queen_ack_messages_total{result="success"}`: {2 * each, each, 0},
	} {
		var got [3]float64
		for i, n := range nodes {
			got[i] = n.metric(name)
		}
		if got != want {
			t.Errorf("%s on leader, preparing and relaying follower: %v, want %v (sum %d)", name, got, want, total)
		}
	}

	// The leader's analytics merge the preparing follower's minutes (the
	// relaying one has no secret to ship with, and counted nothing).
	const wide = "?from=2026-03-04T09:00:00Z&to=2026-03-04T12:00:00Z"
	sums := func() (push, pop, ack int64) {
		var ops queueOps
		leader.get("/api/v1/analytics/queue-ops"+wide, &ops)
		for _, s := range ops.Series {
			push, pop, ack = push+s.PushMessages, pop+s.PopMessages, ack+s.AckSuccess
		}
		return push, pop, ack
	}
	waitFor(t, 20*time.Second, "the follower's minutes on the leader", func() bool {
		clock.advance(time.Minute)
		push, _, _ := sums()
		return push >= total
	})
	if push, pop, ack := sums(); push != total || pop != total || ack != total {
		t.Fatalf("analytics count %d pushed, %d popped, %d acked, want %d each", push, pop, ack, total)
	}
	var wm struct{ Summary map[string]float64 }
	leader.get("/api/v1/analytics/worker-metrics"+wide, &wm)
	if wm.Summary["totalPushMessages"] != total {
		t.Fatalf("worker-metrics summary %v, want totalPushMessages %d", wm.Summary, total)
	}
}
