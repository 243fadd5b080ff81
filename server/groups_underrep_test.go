package server_test

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/server/servertest"
)

// voterGauges reads, from one scrape of c's /metrics/prometheus, the
// series queen_raft_group_voters{group} and queen_groups_under_replicated,
// by their names with labels.
func (c *client) voterGauges() map[string]float64 {
	c.t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(string(c.do("GET", "/metrics/prometheus", nil).expect(c.t, 200).body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(name, "queen_raft_group_voters{") && name != "queen_groups_under_replicated" {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			c.t.Fatalf("metric %q", line)
		}
		out[name] = f
	}
	return out
}

// waitVoterGauges polls c's scrape, up to 30 s, until its voter gauges
// are exactly want.
func (c *client) waitVoterGauges(want map[string]float64) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := c.voterGauges()
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: voter gauges %v, want %v", c.base, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// voterWant is the voter gauges of a directory and groups data groups
// with dir and data voters each, under of them under-replicated.
func voterWant(groups, dir, data, under int) map[string]float64 {
	want := map[string]float64{`queen_raft_group_voters{group="0"}`: float64(dir), "queen_groups_under_replicated": float64(under)}
	for g := 1; g <= groups; g++ {
		want[`queen_raft_group_voters{group="`+strconv.Itoa(g)+`"}`] = float64(data)
	}
	return want
}

// TestGroups_UnderReplicatedAfterAForcedLeave: three nodes, three data
// groups of three voters (each node votes in every group). Healthy, every
// node's scrape shows three voters a group and none under-replicated. One
// node stops and is removed by a forced leave: no node is left to take its
// replicas, so every data group stays on two voters of the three it wants,
// and every remaining node's scrape says so (three groups
// under-replicated), while the directory, on both nodes left, wants two
// (min(5, nodes)) and is not counted.
func TestGroups_UnderReplicatedAfterAForcedLeave(t *testing.T) {
	t.Parallel()
	const groups = 3
	c := servertest.StartGroupsOf(t, 3, groups, 3, nil)
	clients := []*client{nodeClient(t, c, 0), nodeClient(t, c, 1), nodeClient(t, c, 2)}
	for _, cl := range clients {
		cl.waitVoterGauges(voterWant(groups, 3, 3, 0))
	}

	gone := c.Nodes[2].ID
	c.Stop(2)
	leave := clients[0]
	leave.header.Set("X-Queen-Cluster-Secret", servertest.GroupSecret)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := leave.do("POST", "/internal/v1/cluster/leave", map[string]any{"id": gone, "force": true})
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forced leave of %s: %d %s", gone, r.status, r.body)
		}
		t.Logf("forced leave of %s answered %d %s; asking again", gone, r.status, r.body)
	}
	for _, cl := range clients[:2] {
		cl.waitVoterGauges(voterWant(groups, 2, 2, groups))
	}
}

// TestGroups_AForcedLeaveRightAfterADeathIsAnsweredOnce: an operator's
// forced leave of a node that just died, through a survivor, meets the
// elections its death causes (it led the directory here). The server makes
// the change again while it is refused for a reason that passes (no leader
// yet, a relay that failed), so one request is answered 200: answered 503
// no_leader, the operator's shell had to retry.
func TestGroups_AForcedLeaveRightAfterADeathIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	c := servertest.StartGroupsOf(t, 3, 3, 3, nil)
	clients := []*client{nodeClient(t, c, 0), nodeClient(t, c, 1), nodeClient(t, c, 2)}
	for _, cl := range clients {
		cl.waitVoterGauges(voterWant(3, 3, 3, 0))
	}
	dead := -1
	for deadline := time.Now().Add(30 * time.Second); dead < 0; time.Sleep(20 * time.Millisecond) {
		for i, n := range c.Nodes {
			if n.Host.GroupStatus(0).Role == "leader" {
				dead = i
			}
		}
		if dead < 0 && time.Now().After(deadline) {
			t.Fatal("no node leads the directory")
		}
	}
	via := clients[(dead+1)%3]
	via.header.Set("X-Queen-Cluster-Secret", servertest.GroupSecret)
	gone := c.Nodes[dead].ID
	c.Stop(dead)
	r := via.do("POST", "/internal/v1/cluster/leave", map[string]any{"id": gone, "force": true})
	if r.status != http.StatusOK {
		t.Fatalf("forced leave of %s, which led the directory, right after it stopped: %d %s", gone, r.status, r.body)
	}
	via.waitVoterGauges(voterWant(3, 2, 2, 3))
}
