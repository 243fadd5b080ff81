package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/queenmq/queen/server/servertest"
)

// loadAnswer is the load signal's part of GET /api/v1/system/placement.
type loadAnswer struct {
	Groups []struct {
		ID          uint32   `json:"id"`
		MsgsPerSec  *float64 `json:"msgsPerSec"`
		BytesPerSec *float64 `json:"bytesPerSec"`
		LoadAt      int64    `json:"loadAt"`
	} `json:"groups"`
	Queues []struct {
		Queue       string   `json:"queue"`
		Group       uint32   `json:"group"`
		MsgsPerSec  *float64 `json:"msgsPerSec"`
		BytesPerSec *float64 `json:"bytesPerSec"`
	} `json:"queues"`
}

// TestGroups_PlacementShowsTheLoadSignal: pushes into one queue of group
// 1 show in every node's placement as group 1's and the queue's rates of
// messages and bytes; group 2, idle, is reported at 0; the directory has
// none; a queue never pushed to has no rate.
func TestGroups_PlacementShowsTheLoadSignal(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroups(t, 3, 2, nil)
	c.WaitLeaders()
	clients := []*client{nodeClient(t, c, 0), nodeClient(t, c, 1), nodeClient(t, c, 2)}
	configureIn(t, clients[0], "busy", 1)
	configureIn(t, clients[0], "still", 2)
	// The pushes go on between looks at the placement, so that every
	// interval of the signal sees some.
	sent := 0
	push := func() {
		for range 10 {
			clients[sent%3].push(map[string]any{"queue": "busy", "transactionId": fmt.Sprintf("t-%d", sent), "payload": map[string]any{"n": sent}})
			sent++
		}
	}
	why := ""
	for deadline := time.Now().Add(30 * time.Second); ; push() {
		why = ""
		for i, cl := range clients {
			var p loadAnswer
			cl.do("GET", "/api/v1/system/placement", nil).expect(t, 200).decode(t, &p)
			for _, g := range p.Groups {
				switch {
				case g.ID == 0 && (g.MsgsPerSec != nil || g.BytesPerSec != nil):
					why = fmt.Sprintf("node %d: the directory has a load %+v", i, g)
				case g.ID == 1 && (g.MsgsPerSec == nil || *g.MsgsPerSec <= 0 || *g.BytesPerSec <= 0 || g.LoadAt <= 0):
					why = fmt.Sprintf("node %d: group 1's load %+v", i, g)
				case g.ID == 2 && (g.MsgsPerSec == nil || *g.MsgsPerSec != 0 || *g.BytesPerSec != 0):
					why = fmt.Sprintf("node %d: group 2's load %+v", i, g)
				}
			}
			for _, q := range p.Queues {
				switch {
				case q.Queue == "busy" && (q.MsgsPerSec == nil || *q.MsgsPerSec <= 0 || *q.BytesPerSec <= 0):
					why = fmt.Sprintf("node %d: busy's load %+v", i, q)
				case q.Queue == "still" && q.MsgsPerSec != nil && *q.MsgsPerSec != 0:
					why = fmt.Sprintf("node %d: still's load %+v", i, q)
				}
			}
		}
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load signal not shown in 30 s: %s", why)
		}
	}
}
