package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGroups_LostNodeIsReplaced: four processes, --groups 4 --replicas 3
// --replace-after 3s. One node is killed -9 and its data directory
// deleted while pushes go on through the others: every group is back to
// three voters on the three left within the replace-after and the
// catch-up, the dead node leaves the directory, and every push answered
// queued, before and during the loss, is delivered exactly once.
func TestGroups_LostNodeIsReplaced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "replaced test secret")
	c := startLoopback(t, 4, "--groups", "4", "--replicas", "3", "--replace-after", "3s", "--cluster-secret-file", secret)
	p := c.waitROfN(4, 3)
	load := c.roundsOver(c.groupQueues("lost", 4, c.nodes))
	for range 5 {
		load.push(c.nodes)
	}
	// The victim: a voter of some group, not the directory's leader.
	var victim *qnode
	var survivors []*qnode
	for _, n := range c.nodes {
		if victim == nil && n.id != p.Groups[0].Leader {
			victim = n
			continue
		}
		survivors = append(survivors, n)
	}
	victim.kill()
	if err := os.RemoveAll(victim.dir); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	var last string
	for replaced := false; !replaced; {
		if time.Since(lost) > 120*time.Second {
			for _, n := range survivors {
				t.Logf("%s's log:\n%s", n.id, n.logTail(6000))
			}
			t.Fatalf("the lost node's replicas were not re-created in 120 s: %s", last)
		}
		load.push(survivors)
		replaced = true
		for _, n := range survivors {
			code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/system/placement?consistency=stale"), nil)
			var got placementOf
			if err == nil {
				err = json.Unmarshal(b, &got)
			}
			if err != nil || code != http.StatusOK || len(got.Groups) != 5 || len(got.Nodes) != 3 {
				replaced, last = false, fmt.Sprintf("%s: %d %v %s", n.id, code, err, b)
				break
			}
			for _, g := range got.Groups[1:] {
				if len(g.Members) != 3 || slices.Contains(g.Members, victim.id) || g.Leader == "" {
					replaced, last = false, fmt.Sprintf("%s: group %+v", n.id, g)
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s's replicas re-created and it left the directory %v after its kill (replace-after 3s); %d rounds pushed",
		victim.id, time.Since(lost).Round(100*time.Millisecond), load.round)
	// Drain every queue through the survivors: each push once.
	c.drainOnce(survivors, load.queues, load.pushed)
}

// groupQueues configures one queue in each data group, prefix-g in group
// g, through the nodes of via in turn, and returns them by group.
func (c *cluster) groupQueues(prefix string, groups int, via []*qnode) []string {
	c.t.Helper()
	var queues []string
	for g := 1; g <= groups; g++ {
		q := fmt.Sprintf("%s-%d", prefix, g)
		body, _ := json.Marshal(map[string]any{"queue": q, "raftGroup": g})
		waitFor(c.t, 30*time.Second, "configure "+q, func() (bool, string) {
			code, b, err := c.do(10*time.Second, "POST", via[g%len(via)].url("/api/v1/configure"), body)
			return err == nil && code == http.StatusOK, fmt.Sprint(code, err, string(b))
		})
		queues = append(queues, q)
	}
	return queues
}

// rounds pushes to its queues in rounds, one message to each queue a
// round (transaction id queue-rN), and keeps every push answered queued
// (or duplicate: a retry of one whose answer was lost).
type rounds struct {
	c      *cluster
	queues []string
	pushed map[string]bool
	round  int
}

func (c *cluster) roundsOver(queues []string) *rounds {
	return &rounds{c: c, queues: queues, pushed: map[string]bool{}}
}

// push pushes one round through the first of via that takes it.
func (r *rounds) push(via []*qnode) {
	r.c.t.Helper()
	var items []pushItem
	for _, q := range r.queues {
		items = append(items, pushItem{Queue: q, TransactionID: fmt.Sprintf("%s-r%d", q, r.round), Payload: r.round})
	}
	r.round++
	for k, res := range r.c.mustPush(via, 60*time.Second, items) {
		if res.Status != "queued" && res.Status != "duplicate" {
			r.c.t.Fatalf("push %s: %+v", items[k].TransactionID, res)
		}
		r.pushed[items[k].TransactionID] = true
	}
}

// drainOnce pops and acks every queue through nodes (each queue through
// one of them, in turn) until it is empty, and fails the test unless each
// push of pushed was delivered exactly once and nothing else was.
func (c *cluster) drainOnce(nodes []*qnode, queues []string, pushed map[string]bool) {
	t := c.t
	t.Helper()
	delivered := map[string]int{}
	for i, q := range queues {
		n := nodes[i%len(nodes)]
		for empty := 0; empty < 2; {
			code, b, err := c.doLed("GET", n.url("/api/v1/pop/queue/"+q+"?batch=100&wait=true&timeout=1000"), nil)
			var pop popResponse
			if err == nil && code == http.StatusOK {
				err = json.Unmarshal(b, &pop)
			}
			if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
				t.Fatalf("pop %s via %s: %d %v %s", q, n.id, code, err, b)
			}
			if len(pop.Messages) == 0 {
				empty++
				continue
			}
			var acks []ackItem
			for _, m := range pop.Messages {
				delivered[m.TransactionID]++
				acks = append(acks, ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: pop.LeaseID, Status: "completed"})
			}
			body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
			if code, b, err := c.doLed("POST", n.url("/api/v1/ack/batch"), body); err != nil || code != http.StatusOK {
				t.Fatalf("ack %s via %s: %d %v %s", q, n.id, code, err, b)
			}
		}
	}
	for txn := range pushed {
		if delivered[txn] != 1 {
			t.Errorf("%s delivered %d times", txn, delivered[txn])
		}
	}
	for txn, k := range delivered {
		if !pushed[txn] {
			t.Errorf("%s delivered %d times, never answered queued", txn, k)
		}
	}
}

// TestGroups_ForcedLeaveOfLostNode: five processes, --groups 6 --replicas
// 3. One node is killed -9 and its data directory deleted under push load,
// and `queen leave --force` removes it through a survivor that is no voter
// of at least one of its groups (the runbook's step; before, every survivor
// answered 503 no_leader: its idle replica of such a group knew no leader,
// and the removal stopped there half done). Every group is then back to
// three voters without it, and every push answered queued is delivered
// exactly once.
func TestGroups_ForcedLeaveOfLostNode(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	lostOfFive(t, true)
}

// TestGroups_LostNodeOfFiveIsReplaced: the same loss with --replace-after
// 5s and no operator: the directory's leader re-creates the lost node's
// replicas on the others and removes it.
func TestGroups_LostNodeOfFiveIsReplaced(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	lostOfFive(t, false)
}

func lostOfFive(t *testing.T, forced bool) {
	secret := writeSecret(t, "lost of five secret")
	args := []string{"--groups", "6", "--replicas", "3", "--cluster-secret-file", secret}
	if !forced {
		args = append(args, "--replace-after", "5s")
	}
	c := startLoopback(t, 5, args...)
	p := c.waitPlaced(c.nodes, 6, 3, "")
	load := c.roundsOver(c.groupQueues("gone", 6, c.nodes))
	for range 5 {
		load.push(c.nodes)
	}
	// The victim: not the directory's leader. The node asked: a survivor
	// that is no voter of some group the victim is a voter of.
	var victim, via *qnode
	for _, n := range c.nodes {
		if n.id != p.Groups[0].Leader {
			victim = n
			break
		}
	}
	for _, n := range c.others(victim) {
		for _, g := range p.Groups[1:] {
			if via == nil && slices.Contains(g.Members, victim.id) && !slices.Contains(g.Members, n.id) {
				via = n
			}
		}
	}
	if via == nil {
		t.Fatalf("every survivor is a voter of every group of %s: %+v", victim.id, p.Groups)
	}
	survivors := c.others(victim)
	victim.kill()
	if err := os.RemoveAll(victim.dir); err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	load.push(survivors)
	if forced {
		c.leaveForce(via, victim.id, secret)
	}
	load.push(survivors)
	c.waitPlaced(survivors, 6, 3, victim.id, func() { load.push(survivors) })
	t.Logf("every group on three voters without %s %v after its loss (forced leave: %v); %d rounds pushed",
		victim.id, time.Since(lost).Round(100*time.Millisecond), forced, load.round)
	// Asked again: the directory no longer counts it, 404 unknown_member.
	out, err := exec.Command(queenBinary(t), "leave", "--url", survivors[0].url(""), "--node-id", victim.id, "--force",
		"--cluster-secret-file", secret).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown_member") {
		t.Fatalf("queen leave of %s again: %v: %s (want exit 1 and 404 unknown_member)", victim.id, err, out)
	}
	c.drainOnce(survivors, load.queues, load.pushed)
}

// waitPlaced waits up to 120 s until every node of nodes answers a
// placement (its own directory's) of len(nodes) nodes, without gone, whose
// groups data groups each have r voters, none of them gone, and a leader;
// each round runs between first. It returns the first node's placement.
func (c *cluster) waitPlaced(nodes []*qnode, groups, r int, gone string, between ...func()) placementOf {
	c.t.Helper()
	var out placementOf
	waitFor(c.t, 120*time.Second, fmt.Sprintf("%d groups of %d voters on %s", groups, r, ids(nodes)), func() (bool, string) {
		for _, f := range between {
			f()
		}
		for i, n := range nodes {
			code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/system/placement?consistency=stale"), nil)
			var got placementOf
			if err == nil {
				err = json.Unmarshal(b, &got)
			}
			if err != nil || code != http.StatusOK || len(got.Groups) != groups+1 || len(got.Nodes) != len(nodes) {
				return false, fmt.Sprintf("%s: %d %v %s", n.id, code, err, b)
			}
			for _, g := range got.Groups[1:] {
				if len(g.Members) != r || (gone != "" && slices.Contains(g.Members, gone)) || g.Leader == "" {
					return false, fmt.Sprintf("%s: group %+v", n.id, g)
				}
			}
			if i == 0 {
				out = got
			}
		}
		return true, ""
	})
	return out
}
