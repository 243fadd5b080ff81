package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/backup"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server"
	"github.com/queenmq/queen/server/servertest"
)

// TestGroups_ReadsThroughANodeOutsideTheGroup: four nodes, four groups of
// three voters (cluster.HostOptions.Replicas). A node outside a group keeps no
// state of it and reads it from the group's leader on the cluster path
// (POST /internal/v1/read): a write through it is seen by its own
// linearizable read right after, and every node lists every queue alike.
func TestGroups_ReadsThroughANodeOutsideTheGroup(t *testing.T) {
	t.Parallel()
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
		// Each request is asked again while an election on a busy
		// machine makes it fail for a moment (doAgain, pushedAgain: a
		// refusal, a read, a push whose transaction id makes a repeat a
		// duplicate); each answer is checked, and the listings below
		// count one message per queue.
		pushed := []pushResult{nc.pushedAgain(map[string]any{"queue": q, "transactionId": fmt.Sprintf("t-%d", g), "payload": map[string]int{"g": g}})}
		if pushed[0].Status != "queued" {
			t.Fatalf("push to %s through %s: %+v", q, c.Nodes[i].ID, pushed)
		}
		// At once, through the same node, which holds nothing of group g.
		var row queueRow
		nc.doAgain("GET", "/api/v1/resources/queues/"+q, nil).expect(t, 200).decode(t, &row)
		if row.Name != q || row.RaftGroup != g {
			t.Fatalf("queue %s through %s: %+v", q, c.Nodes[i].ID, row)
		}
		var msgs struct {
			Messages []struct {
				TransactionID string `json:"transactionId"`
			} `json:"messages"`
		}
		nc.doAgain("GET", "/api/v1/messages?queue="+q, nil).expect(t, 200).decode(t, &msgs)
		if len(msgs.Messages) != 1 || msgs.Messages[0].TransactionID != pushed[0].TransactionID {
			t.Fatalf("messages of %s through %s right after the push: %+v, want %s", q, c.Nodes[i].ID, msgs, pushed[0].TransactionID)
		}
		nc.doAgain("GET", "/api/v1/messages/"+pushed[0].PartitionID+"/"+pushed[0].TransactionID, nil).expect(t, 200)
		if c.Nodes[i].Host.Group(uint32(g)) != nil {
			t.Fatalf("%s holds a replica of group %d, which the directory places elsewhere", c.Nodes[i].ID, g)
		}
	}
	// Every node lists the four queues, each with its message, whether it
	// hosts the queue's group or not.
	for i := range c.Nodes {
		var list struct {
			Queues []queueRow `json:"queues"`
		}
		nodeClient(t, c, i).doAgain("GET", "/api/v1/resources/queues", nil).expect(t, 200).decode(t, &list)
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
	t.Parallel()
	c, fwd, ctx, addr := clusterPathFixture(t)
	leaders := c.WaitLayout()
	l := c.Nodes[0].Host.Layout()
	for g := uint32(1); g <= 4; g++ {
		// A leader that changes while the group is asked (an election on a
		// busy machine: the leader answers "leadership lost", or the node
		// that took over answers the read) has the group asked again of
		// the leaders then; any other wrong answer fails at once.
		for deadline := time.Now().Add(30 * time.Second); ; leaders = c.WaitLayout() {
			problem, moved := "", false
			for i, n := range c.Nodes {
				_, err := fwd.Read(ctx, addr(i), g, []byte(`{"op":"queues"}`))
				switch {
				case i == leaders[g] && err != nil:
					problem, moved = fmt.Sprintf("group %d's leader %s refused a read: %v", g, n.ID, err), raft.Transient(err)
				case i != leaders[g] && !errors.Is(err, raft.ErrNotLeader):
					problem = fmt.Sprintf("group %d: %s (voter %v, not its leader) answered %v, want not_leader",
						g, n.ID, slices.Contains(l.Groups[g].Members, n.ID), err)
					moved = err == nil || raft.Transient(err)
				}
				if problem != "" {
					break
				}
			}
			if problem == "" {
				break
			}
			if !moved || time.Now().After(deadline) {
				t.Fatal(problem)
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

// TestGroups_BackupThroughEveryNode: four nodes, four groups of three
// voters. A backup asked of any node holds every group's messages, the
// groups it does not host read from a voter on the cluster path
// (POST /internal/v1/backup) and copied into its file; before, such a
// group came out of its idle, empty replica here.
func TestGroups_BackupThroughEveryNode(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroupsOf(t, 4, 4, 3, nil)
	c.WaitLayout()
	for g := 1; g <= 4; g++ {
		nc := nodeClient(t, c, g%len(c.Nodes))
		q := fmt.Sprintf("kept-%d", g)
		configureIn(t, nc, q, g)
		for k := range g {
			// Pushed again while an election makes it fail for a
			// moment; the backups below count g messages in q.
			if r := nc.pushedAgain(map[string]any{"queue": q, "transactionId": fmt.Sprintf("t-%d", k), "payload": map[string]int{"k": k}}); r.Status != "queued" {
				t.Fatalf("push to %s: %+v", q, r)
			}
		}
	}
	for i, n := range c.Nodes {
		// A backup is a read: asked again while a group it reads has no
		// leader to confirm it (503).
		file := nodeClient(t, c, i).doAgain("GET", "/api/v1/system/backup", nil).expect(t, 200).body
		m, err := backup.Verify(bytes.NewReader(file))
		if err != nil {
			t.Fatalf("backup through %s: verify %d bytes: %v", n.ID, len(file), err)
		}
		var ids []uint32
		for _, gr := range m.Groups {
			ids = append(ids, gr.ID)
			if gr.ID == 0 {
				continue
			}
			q := fmt.Sprintf("kept-%d", gr.ID)
			if len(gr.Queues) != 1 || gr.Queues[q] != int64(gr.ID) {
				t.Fatalf("backup through %s (voter of %v): group %d holds %v, want %d messages in %s",
					n.ID, hostedBy(c, i), gr.ID, gr.Queues, gr.ID, q)
			}
		}
		if want := []uint32{0, 1, 2, 3, 4}; !slices.Equal(ids, want) {
			t.Fatalf("backup through %s holds groups %v, want %v", n.ID, ids, want)
		}
	}
}

// hostedBy lists the data groups node i is a voter of.
func hostedBy(c *servertest.Groups, i int) []int {
	l := c.Nodes[0].Host.Layout()
	var gs []int
	for g := 1; g < len(l.Groups); g++ {
		if slices.Contains(l.Groups[g].Members, c.Nodes[i].ID) {
			gs = append(gs, g)
		}
	}
	return gs
}

// The backup route itself: a voter of the group answers a one-group file,
// a node outside it refuses (not_leader: the asking node looks for a voter
// again), and a request without the cluster secret is refused.
func TestGroups_BackupRouteRefusals(t *testing.T) {
	t.Parallel()
	c, fwd, ctx, addr := clusterPathFixture(t)
	for i, n := range c.Nodes {
		hosted := hostedBy(c, i)
		for g := uint32(1); g <= 4; g++ {
			s, err := fwd.Backup(ctx, addr(i), g)
			if !slices.Contains(hosted, int(g)) {
				if !errors.Is(err, raft.ErrNotLeader) {
					t.Fatalf("group %d: %s, not its voter, answered %v, want not_leader", g, n.ID, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("group %d: its voter %s refused a backup: %v", g, n.ID, err)
			}
			m, err := backup.Verify(s)
			s.Close()
			if err != nil || len(m.Groups) != 1 || m.Groups[0].ID != g {
				t.Fatalf("group %d's backup from %s: %+v, %v; want that group alone", g, n.ID, m, err)
			}
		}
	}
	stranger := cluster.New(cluster.Options{NodeID: "stranger", Secret: "not-the-cluster-secret", Refusal: server.Refusal})
	if s, err := stranger.Backup(ctx, addr(0), uint32(hostedBy(c, 0)[0])); err == nil {
		s.Close()
		t.Fatal("a backup with the wrong cluster secret was answered")
	}
}

// The move route (POST /internal/v1/move), which the balancer on the
// directory's leader asks of a voter of the queue's group: a node that
// hosts no replica of the group refuses (not_leader), a voter answers once
// the move is recorded and the queue ends in the target group, and a
// request without the cluster secret is refused.
func TestGroups_MoveRouteRefusals(t *testing.T) {
	t.Parallel()
	c, fwd, ctx, addr := clusterPathFixture(t)
	const from, to = 1, 2
	configureIn(t, nodeClient(t, c, 0), "moved", from)
	voter, outside := -1, -1
	for i := range c.Nodes {
		if slices.Contains(hostedBy(c, i), from) {
			voter = i
		} else {
			outside = i
		}
	}
	// Each answer is asked for again while it is one a retry may change
	// (raft.Transient): under load (two busy cores, -race) the directory
	// can be without a leader for longer than a node waits for one
	// (cluster/proxy.go, addressWait), and the route answers 503 no_leader.
	// A node that hosts no replica of the group runs nothing, nor does a
	// move of a queue never placed, so any such answer is asked again;
	// the voter's move only when nothing was done (raft.NotApplied), since
	// a move recorded and asked again is refused as moving already.
	move := func(i int, queue string, again func(error) bool) error {
		return askAgain(t, fmt.Sprintf("a move of %s through %s", queue, c.Nodes[i].ID), again, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return fwd.StartMove(ctx, addr(i), queue, to)
		})
	}
	nothingDone := func(err error) bool { return raft.Transient(err) && raft.NotApplied(err) }
	if err := move(outside, "moved", func(err error) bool { return raft.Transient(err) && !errors.Is(err, raft.ErrNotLeader) }); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("%s, not a voter of group %d, answered %v, want not_leader", c.Nodes[outside].ID, from, err)
	}
	stranger := cluster.New(cluster.Options{NodeID: "stranger", Secret: "not-the-cluster-secret", Refusal: server.Refusal})
	if err := stranger.StartMove(ctx, addr(voter), "moved", to); err == nil {
		t.Fatal("a move with the wrong cluster secret was started")
	}
	if err := move(voter, "no-such-queue", raft.Transient); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a move of a queue never placed answered %v, want invalid", err)
	}
	if err := move(voter, "moved", nothingDone); err != nil {
		t.Fatalf("%s, a voter of group %d, refused the move: %v", c.Nodes[voter].ID, from, err)
	}
	// A move whose step fails is undone (cluster/hostmove.go): under load,
	// a group or the directory can be without a leader for longer than a
	// step is retried. The voter's directory replica showed the move
	// before the voter answered 202; once it shows neither the move nor
	// the queue in the target, the move was undone, and the voter is asked
	// again, as the balancer would ask. The queue must still end in the
	// target.
	v := c.Nodes[voter].Host
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if g := c.Nodes[0].Host.Placement("moved"); g == to && len(c.Nodes[0].Host.Moves()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("moved is in group %d, moves under way %+v; want group %d", c.Nodes[0].Host.Placement("moved"), c.Nodes[0].Host.Moves(), to)
		}
		if v.Placement("moved") == from && len(v.Moves()) == 0 {
			t.Logf("the move of moved was undone on %s; asking it again", c.Nodes[voter].ID)
			if err := move(voter, "moved", nothingDone); err != nil {
				t.Fatalf("%s, a voter of group %d, refused the move asked again: %v", c.Nodes[voter].ID, from, err)
			}
		}
	}
}

// askAgain calls ask, up to a minute, while again says its answer is one
// to ask again, and returns its last answer.
func askAgain(t *testing.T, what string, again func(error) bool, ask func() error) error {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := ask()
		if err == nil || !again(err) || time.Now().After(deadline) {
			return err
		}
		t.Logf("%s answered %v; asking again", what, err)
	}
}

// clusterPathFixture starts four nodes of four groups of three voters and
// gives a client of the cluster path with the cluster secret, a context
// for its calls (30 s) and node i's HTTP address.
func clusterPathFixture(t *testing.T) (*servertest.Groups, *cluster.Client, context.Context, func(int) string) {
	c := servertest.StartGroupsOf(t, 4, 4, 3, nil)
	c.WaitLayout()
	fwd := cluster.New(cluster.Options{NodeID: "test", Secret: servertest.GroupSecret, Refusal: server.Refusal})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c, fwd, ctx, func(i int) string { return strings.TrimPrefix(c.Nodes[i].URL, "http://") }
}
