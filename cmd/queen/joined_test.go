package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGroups_FifthNodeJoinsUnderLoad: four processes, --groups 4
// --replicas 3, pushes going on through every node. A fifth started with
// --join ends a voter of two or three groups (replicas moved onto it,
// add-then-remove), no node a voter of more than ceil(G·R/N) = 3, every
// group three voters; every push answered queued, before, during and
// after the join, is delivered exactly once.
func TestGroups_FifthNodeJoinsUnderLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	c := newCluster(t)
	ports := freePorts(t, 10)
	secret := writeSecret(t, "joined test secret")
	var peers []string
	for i := range 4 {
		peers = append(peers, fmt.Sprintf("n%d@127.0.0.1:%d", i+1, ports[5+i]))
	}
	for i := range 5 {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		args := []string{"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[5+i]), "--retention-interval", "0",
			"--cluster-secret-file", secret, "--groups", "4", "--replicas", "3"}
		if i < 4 {
			args = append(args, "--peers", strings.Join(peers, ","))
		} else {
			args = append(args, "--join", "http://"+fmt.Sprintf("127.0.0.1:%d", ports[0]))
		}
		c.addNode(fmt.Sprintf("n%d", i+1), httpAddr, nil, args...)
	}
	founders, joiner := c.nodes[:4], c.nodes[4]
	for _, n := range founders {
		n.start()
	}
	all := c.nodes
	c.nodes = founders // waitROfN counts c.nodes
	c.waitROfN(4, 3)
	c.nodes = all
	load := c.roundsOver(c.groupQueues("join", 4, founders))
	for range 5 {
		load.push(founders)
	}
	joiner.start()
	joined := time.Now()
	var last string
	for spread := false; !spread; {
		if time.Since(joined) > 150*time.Second {
			for _, n := range all {
				t.Logf("%s's log:\n%s", n.id, n.logTail(4000))
			}
			t.Fatalf("the joiner did not take its share in 150 s: %s", last)
		}
		// Through every node in turn, the joiner too: one that does not
		// answer yet is passed over for the next.
		k := load.round % len(all)
		load.push(append(slices.Clone(all[k:]), all[:k]...))
		spread, last = c.spreadOver(all, 4, 3)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s took its share %v after it started; %d rounds pushed", joiner.id, time.Since(joined).Round(100*time.Millisecond), load.round)
	load.push(all)
	c.drainOnce(all, load.queues, load.pushed)
}

// spreadOver reports whether every node of nodes sees, in its own
// directory, every node of nodes, each data group with r voters, every
// node a voter of between floor and ceil of groups·r/len(nodes) groups.
func (c *cluster) spreadOver(nodes []*qnode, groups, r int) (bool, string) {
	lo, hi := groups*r/len(nodes), (groups*r+len(nodes)-1)/len(nodes)
	for _, n := range nodes {
		code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/system/placement?consistency=stale"), nil)
		var p placementOf
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || code != http.StatusOK || len(p.Nodes) != len(nodes) || len(p.Groups) != groups+1 {
			return false, fmt.Sprintf("%s: %d %v %s", n.id, code, err, b)
		}
		voter := map[string]int{}
		for _, g := range p.Groups[1:] {
			if len(g.Members) != r || !slices.Contains(g.Members, g.Leader) {
				return false, fmt.Sprintf("%s: group %+v", n.id, g)
			}
			for _, m := range g.Members {
				voter[m]++
			}
		}
		for _, d := range nodes {
			if voter[d.id] < lo || voter[d.id] > hi {
				return false, fmt.Sprintf("%s: voters by node %v, want %d to %d each", n.id, voter, lo, hi)
			}
		}
	}
	return true, ""
}
