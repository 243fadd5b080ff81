package server_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// TestGroups_ReadsThroughANodeOutsideTheGroup: four nodes, four groups of
// three voters (raft.HostOptions.Replicas). A node outside a group keeps no
// state of it and reads it from the group's leader on the cluster path
// (POST /internal/v1/read): a write through it is seen by its own
// linearizable read right after, and every node lists every queue alike.
func TestGroups_ReadsThroughANodeOutsideTheGroup(t *testing.T) {
	c := servertest.StartGroupsOf(t, 4, 4, 3, nil)
	l := c.Nodes[0].Host.Layout()
	outside := map[int]int{} // a data group's node that is not its voter
	for g := 1; g <= 4; g++ {
		for i, n := range c.Nodes {
			if !slices.Contains(l.Groups[g].Members, n.ID) {
				outside[g] = i
			}
		}
	}
	type queueRow struct {
		Name     string `json:"name"`
		Messages struct {
			Total int `json:"total"`
		} `json:"messages"`
		RaftGroup int `json:"raftGroup"`
	}
	for g := 1; g <= 4; g++ {
		i := outside[g]
		nc := nodeClient(t, c, i)
		q := fmt.Sprintf("outside-%d", g)
		if got := configureIn(t, nc, q, g); got != g {
			t.Fatalf("configure %s in group %d through %s answered group %d", q, g, c.Nodes[i].ID, got)
		}
		var pushed []struct {
			Status        string `json:"status"`
			TransactionID string `json:"transaction_id"`
			PartitionID   string `json:"partition_id"`
		}
		nc.do("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": q, "payload": map[string]int{"g": g}}}}).
			expect(t, 201).decode(t, &pushed)
		if len(pushed) != 1 || pushed[0].Status != "queued" {
			t.Fatalf("push to %s through %s: %+v", q, c.Nodes[i].ID, pushed)
		}
		// At once, through the same node, which holds nothing of group g.
		var row queueRow
		nc.do("GET", "/api/v1/resources/queues/"+q, nil).expect(t, 200).decode(t, &row)
		if row.Name != q || row.RaftGroup != g {
			t.Fatalf("queue %s through %s: %+v", q, c.Nodes[i].ID, row)
		}
		var msgs struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
			} `json:"messages"`
		}
		nc.do("GET", "/api/v1/messages?queue="+q, nil).expect(t, 200).decode(t, &msgs)
		if len(msgs.Messages) != 1 || msgs.Messages[0].TransactionID != pushed[0].TransactionID {
			t.Fatalf("messages of %s through %s right after the push: %+v, want %s", q, c.Nodes[i].ID, msgs, pushed[0].TransactionID)
		}
		nc.do("GET", "/api/v1/messages/"+pushed[0].PartitionID+"/"+pushed[0].TransactionID, nil).expect(t, 200)
		if qs, err := c.Nodes[i].Host.Group(uint32(g)).Queues(); err != nil || len(qs) != 0 {
			t.Fatalf("group %d's idle replica on %s holds %+v, %v", g, c.Nodes[i].ID, qs, err)
		}
	}
	// Every node lists the four queues, each with its message, whether it
	// hosts the queue's group or not.
	for i := range c.Nodes {
		var list struct {
			Queues []queueRow `json:"queues"`
		}
		nodeClient(t, c, i).do("GET", "/api/v1/resources/queues", nil).expect(t, 200).decode(t, &list)
		var names []string
		for _, q := range list.Queues {
			if q.Messages.Total != 1 {
				t.Fatalf("%s lists %s with %d messages, want 1", c.Nodes[i].ID, q.Name, q.Messages.Total)
			}
			names = append(names, q.Name)
		}
		slices.Sort(names)
		if want := []string{"outside-1", "outside-2", "outside-3", "outside-4"}; !slices.Equal(names, want) {
			t.Fatalf("%s lists queues %v, want %v", c.Nodes[i].ID, names, want)
		}
	}
}

// The read route itself: a node that does not lead the group refuses
// (not_leader, which the asking node reads as raft.ErrNotLeader and looks
// again), a read it does not know is bad input, and a node's read without
// the cluster secret is refused.
func TestGroups_ReadRouteRefusals(t *testing.T) {
	c := servertest.StartGroupsOf(t, 4, 4, 3, nil)
	leaders := c.WaitLayout()
	fwd := cluster.New(cluster.Options{NodeID: "test", Secret: servertest.GroupSecret, Refusal: server.Refusal})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := func(i int) string { return strings.TrimPrefix(c.Nodes[i].URL, "http://") }
	l := c.Nodes[0].Host.Layout()
	for g := uint32(1); g <= 4; g++ {
		for i, n := range c.Nodes {
			_, err := fwd.Read(ctx, addr(i), g, []byte(`{"op":"queues"}`))
			switch {
			case i == leaders[g] && err != nil:
				t.Fatalf("group %d's leader %s refused a read: %v", g, n.ID, err)
			case i != leaders[g] && !errors.Is(err, raft.ErrNotLeader):
				t.Fatalf("group %d: %s (voter %v, not its leader) answered %v, want not_leader",
					g, n.ID, slices.Contains(l.Groups[g].Members, n.ID), err)
			}
		}
	}
	if _, err := fwd.Read(ctx, addr(leaders[1]), 1, []byte(`{"op":"no-such-read"}`)); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("an unknown read answered %v, want invalid", err)
	}
	stranger := cluster.New(cluster.Options{NodeID: "stranger", Secret: "not-the-cluster-secret", Refusal: server.Refusal})
	if _, err := stranger.Read(ctx, addr(leaders[1]), 1, []byte(`{"op":"queues"}`)); err == nil {
		t.Fatal("a read with the wrong cluster secret was answered")
	}
}
