package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// placementOf is GET /api/v1/system/placement's answer, as the R of N
// test reads it.
type placementOf struct {
	Nodes []struct {
		ID string `json:"id"`
	} `json:"nodes"`
	Replicas int `json:"replicas"`
	Groups   []struct {
		ID      uint32   `json:"id"`
		Members []string `json:"members"`
		Leader  string   `json:"leader"`
	} `json:"groups"`
}

// waitROfN waits until every node answers /health 200 and its placement
// (stale: this node's directory, which every node hosts; a linearizable
// read also lists the queues of groups a node does not host, which it
// reads from their leaders) shows r, the directory on every node, each of the groups data groups
// led and of r voters, and every node a voter of groups·r/nodes of them
// and leader of at most ceil(groups/nodes) (the Host hands a group to a
// preferred member some seconds after start: waiting for it keeps the
// hand-offs out of what follows), all nodes alike. It returns the placement.
func (c *cluster) waitROfN(groups, r int) placementOf {
	c.t.Helper()
	var out placementOf
	per := groups * r / len(c.nodes)
	waitFor(c.t, 90*time.Second, fmt.Sprintf("%d groups of %d voters, %d a node, on every node's placement", groups, r, per), func() (bool, string) {
		var first string
		for i, n := range c.nodes {
			if h, err := c.health(n); err != nil || h.Code != http.StatusOK {
				return false, fmt.Sprintf("%s /health: %v %v", n.id, h, err)
			}
			code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/system/placement?consistency=stale"), nil)
			var p placementOf
			if err == nil {
				err = json.Unmarshal(b, &p)
			}
			if err != nil || code != http.StatusOK || p.Replicas != r || len(p.Nodes) != len(c.nodes) || len(p.Groups) != groups+1 ||
				len(p.Groups[0].Members) != len(c.nodes) {
				return false, fmt.Sprintf("%s: %d %v %s", n.id, code, err, b)
			}
			voter, leads := map[string]int{}, map[string]int{}
			for _, g := range p.Groups[1:] {
				if len(g.Members) != r || !slices.Contains(g.Members, g.Leader) {
					return false, fmt.Sprintf("%s: group %+v", n.id, g)
				}
				for _, m := range g.Members {
					voter[m]++
				}
				leads[g.Leader]++
			}
			for _, d := range p.Nodes {
				if voter[d.ID] != per || leads[d.ID] > (groups+len(c.nodes)-1)/len(c.nodes) {
					return false, fmt.Sprintf("%s: voters by node %v, leaders %v", n.id, voter, leads)
				}
			}
			if s := fmt.Sprint(p.Groups); i == 0 {
				first, out = s, p
			} else if s != first {
				return false, fmt.Sprintf("%s sees %s, %s %s", n.id, s, c.nodes[0].id, first)
			}
		}
		return true, ""
	})
	return out
}

// doLed is c.do, asked again while the answer is 503 not_leader (a group's
// leadership moving: the command was not proposed) for up to 30 s.
func (c *cluster) doLed(method, url string, body []byte) (int, []byte, error) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, b, err := c.do(10*time.Second, method, url, body)
		// not_leader, no_leader and leadership_transfer: nothing was
		// proposed (docs/api.md), so asking again is safe.
		e, _ := c2(b)
		transient := e.Code == "not_leader" || e.Code == "no_leader" || e.Code == "leadership_transfer"
		if err != nil || code != http.StatusServiceUnavailable || !transient || time.Now().After(deadline) {
			return code, b, err
		}
	}
}

// TestGroups_FourNodesThreeReplicas runs four processes with --groups 4
// --replicas 3 (issue 30, "R of N"): each group has three voters and each
// node is a voter of three groups; pushes through every node to queues of
// every group are queued; pops and acks through every node, three of the
// four of them not hosting the queue's group for some queue, deliver every
// message once; queen status shows the spread.
func TestGroups_FourNodesThreeReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "replicas test secret")
	c := startLoopback(t, 4, "--groups", "4", "--replicas", "3", "--cluster-secret-file", secret)
	p := c.waitROfN(4, 3)
	t.Logf("placement: %+v", p.Groups)
	start := time.Now()

	// Two queues in each group, each configured through another node.
	var queues []string
	for g := 1; g <= 4; g++ {
		for k := range 2 {
			q := fmt.Sprintf("r%d-%d", g, k)
			body, _ := json.Marshal(map[string]any{"queue": q, "raftGroup": g})
			via := c.nodes[(2*g+k)%4]
			waitFor(t, 30*time.Second, "configure "+q+" via "+via.id, func() (bool, string) {
				code, b, err := c.do(10*time.Second, "POST", via.url("/api/v1/configure"), body)
				return err == nil && code == http.StatusOK && strings.Contains(string(b), fmt.Sprintf(`"raftGroup":%d`, g)), fmt.Sprint(code, err, string(b))
			})
			queues = append(queues, q)
		}
	}
	// Each node pushes three messages to every queue in one request.
	const each = 3
	pushed := map[string]bool{}
	for i, n := range c.nodes {
		var items []pushItem
		for _, q := range queues {
			for k := range each {
				txn := fmt.Sprintf("%s-%s-%d", q, n.id, k)
				items = append(items, pushItem{Queue: q, TransactionID: txn, Payload: map[string]any{"n": i, "k": k}})
				pushed[txn] = true
			}
		}
		for k, r := range c.mustPush([]*qnode{n}, 30*time.Second, items) {
			if r.Status != "queued" {
				t.Fatalf("push via %s: item %d (%s) answered %+v", n.id, k, items[k].TransactionID, r)
			}
		}
	}
	// Every node pops a batch of each queue in turn and acks it through
	// itself, until the queue is drained: each message comes once.
	delivered := map[string]string{} // transaction id -> the node that popped it
	for _, q := range queues {
		got, popsBy := 0, map[string]int{}
		for try := 0; got < each*len(c.nodes); try++ {
			n := c.nodes[len(popsBy)%len(c.nodes)] // the next node once this one popped
			if try > 40 {
				t.Fatalf("%s: %d of %d messages after %d pops", q, got, each*len(c.nodes), try)
			}
			code, b, err := c.doLed("GET", n.url("/api/v1/pop/queue/"+q+"?batch="+fmt.Sprint(each)+"&wait=true&timeout=2000"), nil)
			var pop popResponse
			if err == nil && code == http.StatusOK {
				err = json.Unmarshal(b, &pop)
			}
			if err != nil || (code != http.StatusOK && code != http.StatusNoContent) {
				t.Fatalf("pop %s via %s: %d %v %s", q, n.id, code, err, b)
			}
			if len(pop.Messages) == 0 {
				t.Logf("%v: pop %s via %s: %d %s", time.Since(start), q, n.id, code, b)
				continue // nothing within the wait: the same node asks again
			}
			var acks []ackItem
			for _, m := range pop.Messages {
				if by, twice := delivered[m.TransactionID]; twice || !pushed[m.TransactionID] {
					t.Fatalf("pop %s via %s: %s (delivered before via %q, pushed %v)", q, n.id, m.TransactionID, by, pushed[m.TransactionID])
				}
				delivered[m.TransactionID] = n.id
				acks = append(acks, ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: pop.LeaseID, Status: "completed"})
			}
			got += len(pop.Messages)
			popsBy[n.id] += len(pop.Messages)
			body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
			code, b, err = c.doLed("POST", n.url("/api/v1/ack/batch"), body)
			var res []ackResult
			if err == nil && code == http.StatusOK {
				err = json.Unmarshal(b, &res)
			}
			if err != nil || code != http.StatusOK || len(res) != len(acks) || slices.ContainsFunc(res, func(r ackResult) bool { return !r.Success }) {
				t.Fatalf("ack %s via %s: %d %v %s", q, n.id, code, err, b)
			}
		}
		if len(popsBy) != len(c.nodes) {
			t.Fatalf("%s: messages popped by node %v, want every node", q, popsBy)
		}
	}
	t.Logf("configured, pushed, popped and acked in %v", time.Since(start))
	if len(delivered) != len(pushed) {
		t.Fatalf("%d of %d pushed messages delivered", len(delivered), len(pushed))
	}
	// Drained: a pop of any queue through any node finds nothing.
	for i, q := range queues {
		n := c.nodes[i%len(c.nodes)]
		code, b, err := c.doLed("GET", n.url("/api/v1/pop/queue/"+q+"?batch=10"), nil)
		if err != nil || code != http.StatusNoContent {
			t.Fatalf("pop of drained %s via %s: %d %v %s; want 204", q, n.id, code, err, b)
		}
	}

	// queen status: on every node, the one group it is not a voter of is
	// role none, with the leader the directory records.
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, n.url(""))
	}
	out, err := exec.Command(queenBinary(t), "status", "--json", "--url", strings.Join(urls, ",")).Output()
	var nodes []nodeStatus
	if err == nil {
		err = json.Unmarshal(out, &nodes)
	}
	if err != nil || len(nodes) != len(c.nodes) {
		t.Fatalf("queen status --json: %v:\n%s", err, out)
	}
	for _, n := range nodes {
		var none []uint32
		for _, g := range n.Groups {
			if g.Role != notHosted {
				continue
			}
			none = append(none, g.Group)
			if rec := p.Groups[g.Group]; slices.Contains(rec.Members, n.ID) || g.Leader == "" || g.Lag != 0 {
				t.Fatalf("queen status: %s shows group %+v as not hosted; placement %+v", n.ID, g, rec)
			}
		}
		if len(none) != 1 {
			t.Fatalf("queen status: %s hosts all but groups %v, want all but one:\n%s", n.ID, none, out)
		}
	}
}

// queen status's spread table: each node with how many data groups it is
// a voter of and leads, the directory left out, and whether it votes in
// the directory or follows it; none for one group.
func TestStatus_SpreadTable(t *testing.T) {
	t.Parallel()
	var p placement
	if err := json.Unmarshal([]byte(`{"nodes":[{"id":"n1"},{"id":"n2"},{"id":"n3"},{"id":"n4"}],"replicas":3,"groups":[
		{"id":0,"members":["n1","n2","n3"],"leader":"n1"},
		{"id":1,"members":["n1","n2","n3"],"leader":"n1"},{"id":2,"members":["n1","n2","n4"],"leader":"n2"},
		{"id":3,"members":["n1","n3","n4"],"leader":"n1"},{"id":4,"members":["n2","n3","n4"],"leader":""}]}`), &p); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	spreadTable(&b, p)
	want := "\nNODE VOTER OF LEADS DIRECTORY\nn1 3 of 4 2 votes\nn2 3 of 4 1 votes\nn3 3 of 4 0 votes\nn4 3 of 4 0 follows\n"
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		got = append(got, strings.Join(strings.Fields(l), " "))
	}
	if strings.Join(got, "\n") != want {
		t.Fatalf("spread table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	p.Groups = p.Groups[1:2] // one group, 1: every node is its voter
	if spreadTable(&b, p); b.Len() != 0 {
		t.Fatalf("spread table of one group: %q, want none", b.String())
	}
}
