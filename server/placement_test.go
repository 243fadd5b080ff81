package server_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server/servertest"
)

// placementAnswer is GET /api/v1/system/placement's answer.
type placementAnswer struct {
	Nodes []struct {
		ID   string `json:"id"`
		HTTP string `json:"http"`
		Live bool   `json:"live"`
	} `json:"nodes"`
	Groups []struct {
		ID      uint32   `json:"id"`
		Members []string `json:"members"`
		Leader  string   `json:"leader"`
	} `json:"groups"`
	Queues []placedQueue `json:"queues"`
	Moves  []any         `json:"moves"`
}

type placedQueue struct {
	Queue string `json:"queue"`
	Group uint32 `json:"group"`
	Epoch int    `json:"epoch"`
}

func getPlacement(t *testing.T, c *client) placementAnswer {
	t.Helper()
	var p placementAnswer
	c.do("GET", "/api/v1/system/placement", nil).expect(t, 200).decode(t, &p)
	if p.Moves == nil || len(p.Moves) != 0 {
		t.Fatalf("moves %v, want []", p.Moves)
	}
	return p
}

func TestPlacement_OneEngineIsOneNodeAndOneGroup(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	c.configure("b", nil)
	c.configure("a", nil)
	p := getPlacement(t, c)
	if len(p.Nodes) != 1 || p.Nodes[0].ID != "local" || !p.Nodes[0].Live {
		t.Fatalf("nodes %+v, want this node alone, live", p.Nodes)
	}
	if len(p.Groups) != 1 || p.Groups[0].ID != 1 || !slices.Equal(p.Groups[0].Members, []string{"local"}) || p.Groups[0].Leader != "local" {
		t.Fatalf("groups %+v, want group 1 of this node, which leads it", p.Groups)
	}
	if want := []placedQueue{{"a", 1, 1}, {"b", 1, 1}}; !slices.Equal(p.Queues, want) {
		t.Fatalf("queues %+v, want %+v", p.Queues, want)
	}
}

func TestGroups_PlacementListsEveryGroupAndQueueAlikeOnEveryNode(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 2, nil)
	leaders := c.WaitLeaders()
	clients := []*client{nodeClient(t, c, 0), nodeClient(t, c, 1), nodeClient(t, c, 2)}
	configureIn(t, clients[0], "pinned", 2)
	anywhere := uint32(configureIn(t, clients[1], "anywhere", 0))
	want := []placedQueue{{"anywhere", anywhere, 1}, {"pinned", 2, 1}}

	// The read is linearizable: a follower of group 2 lists the queue
	// configured through another node, in its group, at once.
	f := c.Follower(2)
	if got := getPlacement(t, clients[f]).Queues; !slices.Equal(got, want) {
		t.Fatalf("%s lists queues %+v, want %+v", c.Nodes[f].ID, got, want)
	}

	ids := []string{"n1", "n2", "n3"}
	check := func(p placementAnswer) string {
		if len(p.Nodes) != len(ids) {
			return fmt.Sprintf("nodes %+v", p.Nodes)
		}
		for i, n := range p.Nodes {
			if n.ID != ids[i] || "http://"+n.HTTP != c.Nodes[i].URL || !n.Live {
				return fmt.Sprintf("node %+v, want %s at %s, live", n, ids[i], c.Nodes[i].URL)
			}
		}
		if len(p.Groups) != 3 {
			return fmt.Sprintf("groups %+v, want the directory and groups 1 and 2", p.Groups)
		}
		for i, g := range p.Groups {
			if g.ID != uint32(i) || !slices.Equal(g.Members, ids) || g.Leader != c.Nodes[leaders[g.ID]].ID {
				return fmt.Sprintf("group %+v, want group %d of %v led by %s", g, i, ids, c.Nodes[leaders[g.ID]].ID)
			}
		}
		if !slices.Equal(p.Queues, want) {
			return fmt.Sprintf("queues %+v, want %+v", p.Queues, want)
		}
		return ""
	}
	// Liveness comes from the nodes' reads of each other's /health, every
	// 5 s: poll until every node has read every other.
	var why []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		why = why[:0]
		var first placementAnswer
		for i, cl := range clients {
			p := getPlacement(t, cl)
			if w := check(p); w != "" {
				why = append(why, c.Nodes[i].ID+": "+w)
			}
			if i == 0 {
				first = p
			} else if !reflect.DeepEqual(p, first) {
				why = append(why, fmt.Sprintf("%s answers %+v, %s %+v", c.Nodes[i].ID, p, c.Nodes[0].ID, first))
			}
		}
		if len(why) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("placement not settled in 30 s:\n%s", strings.Join(why, "\n"))
		}
	}
}

// A queue moved over HTTP: POST .../move answers once it lives in the
// group asked for, at the next epoch, which every node's placement then
// shows; its messages pop from there. Bad requests are 400.
func TestGroups_MoveQueueOverHTTP(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 2, nil)
	c.WaitLeaders()
	cl := nodeClient(t, c, 0)
	configureIn(t, cl, "orders", 2)
	for i := range 5 {
		cl.pushOne("orders", "", fmt.Sprintf("t-%d", i), map[string]int{"n": i})
	}
	cl.do("POST", "/api/v1/system/queues/orders/move", map[string]any{}).expectError(t, 400, "invalid_argument")
	var out struct {
		Queue  string `json:"queue"`
		From   int    `json:"from"`
		Group  int    `json:"group"`
		Epoch  int    `json:"epoch"`
		Chunks int    `json:"chunks"`
	}
	// The cluster runs the move's commands once every node runs this
	// binary's command version: a moment after it starts.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := cl.do("POST", "/api/v1/system/queues/orders/move", map[string]any{"group": 1})
		if r.status == 409 && time.Now().Before(deadline) {
			continue
		}
		r.expect(t, 200).decode(t, &out)
		break
	}
	if out.Queue != "orders" || out.From != 2 || out.Group != 1 || out.Epoch != 2 || out.Chunks < 1 {
		t.Fatalf("move answered %+v", out)
	}
	cl.do("POST", "/api/v1/system/queues/orders/move", map[string]any{"group": 1}).expectError(t, 400, "invalid_argument")
	cl.do("POST", "/api/v1/system/queues/orders/move", map[string]any{"group": 7}).expectError(t, 400, "invalid_argument")
	for i := range c.Nodes {
		nc := nodeClient(t, c, i)
		waitPlacement(t, nc, placedQueue{"orders", 1, 2})
		// Every node's directory replica counts the move ended and the
		// queue in its new group, in the batch that flipped its placement.
		for name, want := range map[string]float64{`queen_group_queues{group="1"}`: 1, `queen_group_queues{group="2"}`: 0, "queen_queue_moves_in_progress": 0} {
			if got := nc.metric(name); got != want {
				t.Errorf("%s: %s %v, want %v", c.Nodes[i].ID, name, got, want)
			}
		}
	}
	// The node that ran the move counted it (a 409 above refused the
	// move before it was recorded: no move).
	if done, n, bytes := cl.metric(`queen_queue_moves_total{result="done"}`), cl.metric("queen_queue_move_seconds_count"),
		cl.metric("queen_queue_move_bytes_total"); done != 1 || n != 1 || bytes < 1 {
		t.Errorf("the mover's metrics: %v done, %v timed, %v bytes", done, n, bytes)
	}
	if done := nodeClient(t, c, 1).metric(`queen_queue_moves_total{result="done"}`); done != 0 {
		t.Errorf("another node counted %v moves done", done)
	}
	p := nodeClient(t, c, 1).mustPop("/api/v1/pop/queue/orders?batch=10")
	if len(p.Messages) != 5 {
		t.Fatalf("popped %d messages after the move, want 5", len(p.Messages))
	}
}

// waitPlacement polls c's placement until it lists want.
func waitPlacement(t *testing.T, c *client, want placedQueue) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p := getPlacement(t, c)
		if slices.Contains(p.Queues, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("placement %+v, want %+v listed", p.Queues, want)
		}
	}
}
