package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// metricSum sums Prometheus samples (each named with its labels) over
// the nodes' /metrics/prometheus.
func (c *cluster) metricSum(names ...string) float64 {
	c.t.Helper()
	var sum float64
	for _, n := range c.nodes {
		code, b, err := c.do(5*time.Second, "GET", n.url("/metrics/prometheus"), nil)
		if err != nil || code != http.StatusOK {
			c.t.Fatalf("%s /metrics/prometheus: %d %v", n.id, code, err)
		}
		for _, name := range names {
			m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
			if m == nil {
				c.t.Fatalf("%s has no %s", n.id, name)
			}
			v, err := strconv.ParseFloat(string(m[1]), 64)
			if err != nil {
				c.t.Fatalf("%s %s: %v", n.id, name, err)
			}
			sum += v
		}
	}
	return sum
}

// groupsHealth is /health's per-group rows (a node run with --groups).
type groupsHealth struct {
	Groups []struct {
		Group      uint32 `json:"group"`
		Role       string `json:"role"`
		Leader     string `json:"leader"`
		LeaderHTTP string `json:"leaderHttp"`
	} `json:"groups"`
}

// groupLeaders reads /health from every node and returns each group's
// leader (group id -> node id) when every node answers 200 and all agree
// on every group's leader and know its address; it also describes what it
// saw.
func (c *cluster) groupLeaders(nodes []*qnode, groups int) (map[uint32]string, bool, string) {
	leaders := map[uint32]string{}
	var desc []string
	ok := true
	for _, n := range nodes {
		code, b, err := c.do(2*time.Second, "GET", n.url("/health"), nil)
		var h groupsHealth
		if err == nil {
			err = json.Unmarshal(b, &h)
		}
		if err != nil || code != http.StatusOK || len(h.Groups) != groups+1 {
			desc = append(desc, fmt.Sprintf("%s: %d %v %d groups", n.id, code, err, len(h.Groups)))
			ok = false
			continue
		}
		var row []string
		for _, g := range h.Groups {
			row = append(row, fmt.Sprintf("g%d:%s", g.Group, g.Leader))
			if l, seen := leaders[g.Group]; g.Leader == "" || g.LeaderHTTP == "" || (seen && l != g.Leader) {
				ok = false
			}
			if g.Role == "leader" {
				leaders[g.Group] = n.id
			}
		}
		desc = append(desc, n.id+" "+strings.Join(row, " "))
	}
	return leaders, ok && len(leaders) == groups+1, strings.Join(desc, "; ")
}

// waitSpread waits until every node agrees on every group's leader and
// each node leads one data group.
func (c *cluster) waitSpread(nodes []*qnode, groups int) map[uint32]string {
	c.t.Helper()
	var leaders map[uint32]string
	waitFor(c.t, 90*time.Second, "one leader per group, spread over the nodes", func() (bool, string) {
		l, ok, desc := c.groupLeaders(nodes, groups)
		if !ok {
			return false, desc
		}
		led := map[string]bool{}
		for g := uint32(1); g <= uint32(groups); g++ {
			led[l[g]] = true
		}
		leaders = l
		return len(led) == min(groups, len(nodes)), desc
	})
	return leaders
}

// TestGroups_ThreeNodesThreeGroups runs three processes with --groups 3:
// every node leads one group; pushes, pops and acks on queues of every
// group go through every node; a transaction over two groups is refused;
// the leader of a group is killed under load and nothing acknowledged is
// lost; the directory's leader is killed and queues are still placed; the
// replicas of every group end identical.
func TestGroups_ThreeNodesThreeGroups(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "groups test secret")
	c := startLoopback(t, 3, "--groups", "3", "--cluster-secret-file", secret)
	leaders := c.waitSpread(c.nodes, 3)
	t.Logf("leaders: %v", leaders)
	c.statusShowsGroups(leaders)

	// Six queues, placed two per group by the directory; each node pushes
	// one item to each in one request, so every request spans the groups.
	queues := []string{"qa", "qb", "qc", "qd", "qe", "qf"}
	for i, n := range c.nodes {
		var items []pushItem
		for _, q := range queues {
			items = append(items, pushItem{Queue: q, TransactionID: fmt.Sprintf("%s-%d", q, i), Payload: map[string]any{"n": i}})
		}
		res := c.mustPush([]*qnode{n}, 30*time.Second, items)
		for k, r := range res {
			if r.Status != "queued" {
				t.Fatalf("push via %s: item %d %+v", n.id, k, r)
			}
		}
	}
	// Each node split its push and relayed the other groups' parts to their
	// leaders: every node, leading one group, took relays (a node that
	// forwarded whole requests to one other would leave that one without).
	for _, n := range c.nodes {
		_, b, err := c.do(5*time.Second, "GET", n.url("/metrics/prometheus"), nil)
		m := regexp.MustCompile(`(?m)^queen_http_requests_total\{route="propose_relayed",status="2xx"\} (\d+)$`).FindSubmatch(b)
		if err != nil || m == nil || string(m[1]) == "0" {
			t.Fatalf("%s took no relayed commands: %v %s", n.id, err, m)
		}
	}
	// Each item is counted once in the cluster, by the node that answered
	// its push (ARCHITECTURE.md, "Counting once"), not again by the group
	// leaders that took the relayed parts: summed over the nodes, as a
	// dashboard sums instances, /metrics says 18 for 18. (/api/v1/status
	// is answered by the leader from every node's minutes, cluster-wide:
	// server/dashboard_test.go checks it counts each message once.)
	// (Duplicates: a push mustPush retried after an unknown outcome.)
	pushed := float64(len(queues) * len(c.nodes))
	if got := c.metricSum(`queen_push_messages_total{status="queued"}`, `queen_push_messages_total{status="duplicate"}`); got != pushed {
		t.Fatalf("the nodes' /metrics count %v pushed messages, want %v", got, pushed)
	}
	if got := c.metricSum(`queen_push_messages_total{status="failed"}`); got != 0 {
		t.Fatalf("the nodes' /metrics count %v failed pushes, want 0", got)
	}
	// Each queue's three messages are popped through one node and acked
	// through the next, whichever leads the queue's group.
	for k, q := range queues {
		via, ackVia := c.nodes[k%3], c.nodes[(k+1)%3]
		code, b, err := c.do(10*time.Second, "GET", via.url("/api/v1/pop/queue/"+q+"?batch=10"), nil)
		var pop popResponse
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(b, &pop)
		}
		if err != nil || code != http.StatusOK || len(pop.Messages) != 3 {
			t.Fatalf("pop %s via %s: %d %v %s; want 3 messages", q, via.id, code, err, b)
		}
		var acks []ackItem
		for _, m := range pop.Messages {
			acks = append(acks, ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: pop.LeaseID, Status: "completed"})
		}
		body, _ := json.Marshal(map[string]any{"acknowledgments": acks})
		code, b, err = c.do(10*time.Second, "POST", ackVia.url("/api/v1/ack/batch"), body)
		var res []ackResult
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(b, &res)
		}
		if err != nil || code != http.StatusOK || len(res) != 3 {
			t.Fatalf("ack %s via %s: %d %v %s", q, ackVia.id, code, err, b)
		}
		for _, r := range res {
			if !r.Success {
				t.Fatalf("ack %s via %s: %s", q, ackVia.id, b)
			}
		}
	}
	for _, name := range []string{`queen_pop_messages_total`, `queen_ack_messages_total{result="success"}`} {
		if got := c.metricSum(name); got != pushed {
			t.Fatalf("the nodes' /metrics: %s sums to %v, want %v", name, got, pushed)
		}
	}
	// Every node lists every queue.
	for _, n := range c.nodes {
		waitFor(t, 20*time.Second, n.id+" to list the six queues", func() (bool, string) {
			_, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/resources/queues"), nil)
			got := 0
			for _, q := range queues {
				if strings.Contains(string(b), `"`+q+`"`) {
					got++
				}
			}
			return err == nil && got == len(queues), string(b)
		})
	}
	// A transaction pushing to queues of two groups commits through the
	// outbox of the first push's group (docs/api.md §8.1).
	group := c.queueGroups(c.nodes[0], queues)
	// queen queues shows each queue's group, as the metrics do.
	out, err := exec.Command(queenBinary(t), "queues", "--url", c.nodes[1].url("")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "GROUP") {
		t.Fatalf("queen queues: %v: %s", err, out)
	}
	for _, q := range queues {
		if !regexp.MustCompile(`(?m)^` + q + `\s.*\s` + strconv.Itoa(int(group[q])) + `$`).Match(out) {
			t.Fatalf("queen queues: no row for %s in group %d:\n%s", q, group[q], out)
		}
	}
	var other string
	for _, q := range queues {
		if group[q] != group["qa"] {
			other = q
			break
		}
	}
	body, _ := json.Marshal(map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "qa", "payload": 1, "transactionId": "tx-1"}}},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": other, "payload": 1, "transactionId": "tx-2"}}},
	}})
	// Its commands need every node to read the others at command version
	// 2, which the version reads (every 5 s) bring a moment after start.
	var (
		code int
		b    []byte
	)
	waitFor(t, 30*time.Second, "a transaction over two groups to commit", func() (bool, string) {
		code, b, err = c.do(10*time.Second, "POST", c.nodes[1].url("/api/v1/transaction"), body)
		e, _ := c2(b)
		return err != nil || e.Code != "cluster_version", string(b)
	})
	var tx struct {
		Success bool
		Results []struct {
			Status, QueueName, MessageID, PartitionID string
		}
	}
	if err == nil {
		err = json.Unmarshal(b, &tx)
	}
	if err != nil || code != http.StatusOK || !tx.Success || len(tx.Results) != 2 || tx.Results[0].QueueName != "qa" ||
		tx.Results[1].QueueName != other || tx.Results[1].Status != "queued" || tx.Results[1].MessageID == "" || tx.Results[1].PartitionID == "" {
		t.Fatalf("transaction over groups %d and %d: %d %v %s; want both pushes queued", group["qa"], group[other], code, err, b)
	}

	// A pipeline's queues placed together (configure's raftGroup, beyond
	// Queen) take transactions; a queue keeps its group.
	for _, q := range []string{"pipe-in", "pipe-out"} {
		body, _ := json.Marshal(map[string]any{"queue": q, "raftGroup": 3})
		code, b, err := c.do(10*time.Second, "POST", c.nodes[0].url("/api/v1/configure"), body)
		var conf struct {
			RaftGroup int `json:"raftGroup"`
		}
		if err == nil {
			err = json.Unmarshal(b, &conf)
		}
		if err != nil || code != http.StatusOK || conf.RaftGroup != 3 {
			t.Fatalf("configure %s in group 3: %d %v %s", q, code, err, b)
		}
	}
	body, _ = json.Marshal(map[string]any{"queue": "pipe-in", "raftGroup": 2})
	code, b, err = c.do(10*time.Second, "POST", c.nodes[1].url("/api/v1/configure"), body)
	if e, ok := c2(b); err != nil || code != http.StatusConflict || !ok || e.Code != "placed_elsewhere" {
		t.Fatalf("moving pipe-in to group 2: %d %v %s; want 409 placed_elsewhere", code, err, b)
	}
	body, _ = json.Marshal(map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "pipe-in", "payload": 1, "transactionId": "p-1"}}},
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "pipe-out", "payload": 1, "transactionId": "p-2"}}},
	}})
	code, b, err = c.do(10*time.Second, "POST", c.nodes[2].url("/api/v1/transaction"), body)
	if err != nil || code != http.StatusOK || !strings.Contains(string(b), `"success":true`) {
		t.Fatalf("transaction over two queues of group 3: %d %v %s", code, err, b)
	}

	// Load on every group through every node while the leader of group 1
	// is killed and comes back.
	acked := c.loadGroups(t, queues, func() {
		victim := c.byID(leaders[1])
		t.Logf("kill -9 %s, leader of group 1", victim.id)
		victim.kill()
		time.Sleep(2 * time.Second)
		victim.start()
	})
	// The directory's leader dies; the survivors place a new queue.
	dir := c.byID(c.waitSpread(c.nodes, 3)[0])
	dir.kill()
	rest := c.others(dir)
	c.mustPush(rest, 60*time.Second, []pushItem{{Queue: "placed-after", TransactionID: "pa", Payload: 1}})
	dir.start()
	c.waitSpread(c.nodes, 3)
	// Every acknowledged push is stored: its repeat is a duplicate.
	for q, txns := range acked {
		for k := 0; k < len(txns); k += 50 {
			var items []pushItem
			for _, txn := range txns[k:min(k+50, len(txns))] {
				items = append(items, pushItem{Queue: q, TransactionID: txn, Payload: 1})
			}
			for j, r := range c.mustPush(c.nodes, 60*time.Second, items) {
				if r.Status != "duplicate" {
					t.Fatalf("queue %s: acknowledged push %s answered %q on repeat: it was lost", q, items[j].TransactionID, r.Status)
				}
			}
		}
	}
	c.stopAndCompareGroups(3)
}

// statusShowsGroups runs `queen status --json` over every node and
// requires one row per group per node naming the leader /health named.
func (c *cluster) statusShowsGroups(leaders map[uint32]string) {
	c.t.Helper()
	var urls []string
	for _, n := range c.nodes {
		urls = append(urls, n.url(""))
	}
	out, err := exec.Command(queenBinary(c.t), "status", "--json", "--url", strings.Join(urls, ",")).Output()
	if err != nil {
		c.t.Fatalf("queen status: %v: %s", err, out)
	}
	var nodes []struct {
		ID     string `json:"id"`
		Groups []struct {
			Group  uint32 `json:"group"`
			Role   string `json:"role"`
			Leader string `json:"leader"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(out, &nodes); err != nil || len(nodes) != len(c.nodes) {
		c.t.Fatalf("queen status --json: %v: %s", err, out)
	}
	for _, n := range nodes {
		if len(n.Groups) != len(leaders) {
			c.t.Fatalf("queen status: %s shows %d groups, want %d: %s", n.ID, len(n.Groups), len(leaders), out)
		}
		for _, g := range n.Groups {
			if g.Leader != leaders[g.Group] || (g.Role == "leader") != (n.ID == leaders[g.Group]) {
				c.t.Fatalf("queen status: %s group %d role %s leader %s, want leader %s: %s", n.ID, g.Group, g.Role, g.Leader, leaders[g.Group], out)
			}
		}
	}
}

// queueGroups reads each queue's group from a node's
// /metrics/prometheus (queen_queue_group), waiting up to 20 s for its
// replicas to hold every queue.
func (c *cluster) queueGroups(n *qnode, queues []string) map[string]uint32 {
	c.t.Helper()
	re := regexp.MustCompile(`(?m)^queen_queue_group\{queue="([^"]+)"\} (\d+)$`)
	var out map[string]uint32
	waitFor(c.t, 20*time.Second, "queen_queue_group for every queue on "+n.id, func() (bool, string) {
		_, b, err := c.do(5*time.Second, "GET", n.url("/metrics/prometheus"), nil)
		if err != nil {
			return false, err.Error()
		}
		out = map[string]uint32{}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			g, _ := strconv.ParseUint(m[2], 10, 32)
			out[m[1]] = uint32(g)
		}
		for _, q := range queues {
			if out[q] == 0 {
				return false, fmt.Sprint(out)
			}
		}
		return true, ""
	})
	return out
}

// loadGroups pushes to every queue through every node (bounded: 300
// pushes a worker, 60 s) while fault runs, and returns the transaction
// ids answered queued, by queue.
func (c *cluster) loadGroups(t *testing.T, queues []string, fault func()) map[string][]string {
	var (
		mu    sync.Mutex
		acked = map[string][]string{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	for w, n := range c.nodes {
		for qi, q := range queues {
			wg.Go(func() {
				for k := 0; k < 300 && time.Now().Before(deadline); k++ {
					select {
					case <-stop:
						return
					default:
					}
					txn := fmt.Sprintf("load-%d-%d-%d", w, qi, k)
					code, res, _, err := c.push(n, 5*time.Second, []pushItem{{Queue: q, TransactionID: txn, Payload: k}})
					if err == nil && code == http.StatusCreated && len(res) == 1 && res[0].Status == "queued" {
						mu.Lock()
						acked[q] = append(acked[q], txn)
						mu.Unlock()
					} else {
						time.Sleep(50 * time.Millisecond)
					}
				}
			})
		}
	}
	time.Sleep(time.Second)
	fault()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	total := 0
	for _, txns := range acked {
		total += len(txns)
	}
	t.Logf("load: %d pushes acknowledged over %d queues", total, len(acked))
	if len(acked) != len(queues) {
		t.Fatalf("only %d of %d queues took pushes under load", len(acked), len(queues))
	}
	return acked
}

// stopAndCompareGroups waits until every node of c.nodes shows the same
// placement, every data group with min(R, nodes) voters, and each group's
// voters agree on its leader and applied index; it stops the nodes at
// once and requires `queen check` to find each group's voters identical.
// Only voters are compared: with groups on R of N nodes a node keeps an
// idle replica of the others (and of a group a replica step took from
// it), which stops where it was. Every node leads a group, so stopping
// them one by one would have the others elect, and apply, without the
// first: the nodes are frozen (SIGSTOP), told to stop, and thawed
// together, and each closes its groups within a heartbeat timeout of the
// others. (A kill -9 would not do: the engines do not write their applies
// to disk before close, the Raft log is their WAL.)
func (c *cluster) stopAndCompareGroups(groups int) {
	c.t.Helper()
	const attempts = 3
	for attempt := 1; ; attempt++ {
		voters, lines := c.stopAndCheckGroups(groups)
		// An entry proposed after the voters agreed (a node's housekeeping,
		// a storage report) can commit while they stop: its leader applies
		// it, a follower that appended it stops before it learns the commit.
		// That is Raft, not divergence: started again, every replica
		// applies its log, and they are compared again. Replicas at the same
		// applied index with different digests are never retried.
		var lagging []string
		for g := uint32(0); g <= uint32(groups); g++ {
			for _, id := range voters[g] {
				if a, b := appliedIn(lines[id][g]), appliedIn(lines[voters[g][0]][g]); a != b {
					lagging = append(lagging, fmt.Sprintf("group %d: %s applied %d, %s %d", g, voters[g][0], b, id, a))
				}
			}
		}
		if len(lagging) > 0 && attempt < attempts {
			c.t.Logf("attempt %d: an entry committed while the nodes stopped (%s): starting them again", attempt, strings.Join(lagging, "; "))
			for _, n := range c.nodes {
				n.start()
			}
			continue
		}
		var agreed []string
		for g := uint32(0); g <= uint32(groups); g++ {
			if len(voters[g]) == 0 {
				c.t.Errorf("group %d: the placement lists no voters", g)
				continue
			}
			first := voters[g][0]
			for _, id := range voters[g] {
				if lines[id][g] == "" || lines[id][g] != lines[first][g] {
					c.t.Errorf("group %d: voters' replicas differ: %s %q, %s %q", g, first, lines[first][g], id, lines[id][g])
				}
			}
			agreed = append(agreed, fmt.Sprintf("%d on %v: %s", g, voters[g], lines[first][g]))
		}
		c.t.Logf("queen check: %s", strings.Join(agreed, "; "))
		return
	}
}

// stopAndCheckGroups waits until every group's voters agree on a leader and
// an applied index, stops every node at once and returns each group's
// voters and each node's `queen check` line per group.
func (c *cluster) stopAndCheckGroups(groups int) (map[uint32][]string, map[string]map[uint32]string) {
	c.t.Helper()
	var voters map[uint32][]string
	last := ""
	waitFor(c.t, 90*time.Second, "every group's voters to agree on a leader and an applied index", func() (bool, string) {
		v, state, ok := c.votersApplied(groups)
		settled := ok && state == last
		last = state
		if ok && !settled {
			time.Sleep(300 * time.Millisecond)
		}
		voters = v
		return settled, state
	})
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGTERM, syscall.SIGCONT} {
		for _, n := range c.nodes {
			n.signal(sig)
		}
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.awaitExit(20 * time.Second) })
	}
	wg.Wait()
	lines := map[string]map[uint32]string{}
	for _, n := range c.nodes {
		lines[n.id] = checkGroups(c.t, n.dir)
	}
	return voters, lines
}

// appliedIn reads the applied index of a `queen check` ok line, -1 when the
// line names none.
func appliedIn(line string) int64 {
	_, rest, ok := strings.Cut(line, "applied index ")
	if !ok {
		return -1
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimRight(fields[0], ","), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// votersApplied reads every node's placement (its own directory's view)
// and /health, and reports each group's voters (group -> node ids) with ok
// when every node shows the same placement, every data group has min(R,
// nodes) voters, all of them nodes of c.nodes, and each group's voters
// answer 200 naming one leader and one applied index; state describes
// what it saw, for the caller to see it twice.
func (c *cluster) votersApplied(groups int) (map[uint32][]string, string, bool) {
	type row struct {
		Group   uint32 `json:"group"`
		Leader  string `json:"leader"`
		Applied uint64 `json:"applied"`
	}
	var first placementOf
	rows := map[string]map[uint32]row{}
	for i, n := range c.nodes {
		code, b, err := c.do(2*time.Second, "GET", n.url("/api/v1/system/placement?consistency=stale"), nil)
		var p placementOf
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		if err != nil || code != http.StatusOK || len(p.Groups) != groups+1 {
			return nil, fmt.Sprintf("%s placement: %d %v %s", n.id, code, err, b), false
		}
		if i == 0 {
			first = p
		} else if fmt.Sprint(p.Groups) != fmt.Sprint(first.Groups) {
			return nil, fmt.Sprintf("%s sees %v, %s %v", n.id, p.Groups, c.nodes[0].id, first.Groups), false
		}
		code, b, err = c.do(2*time.Second, "GET", n.url("/health"), nil)
		var h struct {
			Groups []row `json:"groups"`
		}
		if err == nil {
			err = json.Unmarshal(b, &h)
		}
		if err != nil || code != http.StatusOK {
			return nil, fmt.Sprintf("%s /health: %d %v", n.id, code, err), false
		}
		rows[n.id] = map[uint32]row{}
		for _, g := range h.Groups {
			rows[n.id][g.Group] = g
		}
	}
	want := len(c.nodes)
	if first.Replicas > 0 {
		want = min(first.Replicas, want)
	}
	voters := map[uint32][]string{}
	var desc []string
	ok := true
	for _, g := range first.Groups {
		voters[g.ID] = g.Members
		var seen []string
		for _, id := range g.Members {
			r, hosted := rows[id][g.ID]
			ok = ok && hosted && r.Leader != "" && r == rows[g.Members[0]][g.ID]
			seen = append(seen, fmt.Sprintf("%s:%s@%d", id, r.Leader, r.Applied))
		}
		ok = ok && len(g.Members) > 0 && (g.ID == 0 || len(g.Members) == want)
		desc = append(desc, fmt.Sprintf("g%d %v", g.ID, seen))
	}
	return voters, strings.Join(desc, " | "), ok
}

// awaitExit waits for a node told to stop to exit with status 0; past
// timeout it stops it as stop does (SIGTERM, then SIGQUIT for its stacks)
// and reports an error. It sends no second SIGTERM meanwhile.
func (n *qnode) awaitExit(timeout time.Duration) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		if !cmd.ProcessState.Success() {
			n.t.Errorf("%s: exit after SIGTERM: %v (want status 0)", n.id, cmd.ProcessState)
		}
	case <-time.After(timeout):
		n.t.Errorf("%s: did not exit within %v of SIGTERM", n.id, timeout)
		n.stop()
	}
}

// awaitLeft waits for a node the cluster removed to stop serving by itself
// (raft/removed.go: once it has known no leader for 10 s, the others tell it
// they run without it) with status 0, saying why in its log.
func (n *qnode) awaitLeft(timeout time.Duration) {
	n.t.Helper()
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(timeout):
		n.t.Fatalf("%s still serves %v after it left:\n%s", n.id, timeout, n.logTail(3000))
	}
	if !cmd.ProcessState.Success() || !strings.Contains(n.logTail(3000), "no longer a member of the cluster") {
		n.t.Fatalf("%s left: exit %v; want status 0 and the reason in its log:\n%s", n.id, cmd.ProcessState, n.logTail(3000))
	}
}

// checkGroups runs `queen check` on a stopped node and returns its ok
// line for each group (the first line is group 1's, the node's own engine;
// the directory's and the other groups' name their group).
func checkGroups(t testing.TB, dir string) map[uint32]string {
	out, err := exec.Command(queenBinary(t), "check", "--data", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("queen check --data %s: %v: %s", dir, err, out)
	}
	lines := map[uint32]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var g uint32
		switch {
		case strings.HasPrefix(l, "ok: applied index "):
			lines[1] = l
		case strings.HasPrefix(l, "ok: group "):
			if _, err := fmt.Sscanf(l, "ok: group %d ", &g); err != nil {
				t.Fatalf("queen check --data %s: line %q: %v", dir, l, err)
			}
			lines[g] = l
		}
	}
	return lines
}

// groupVoters reads each group's voter count from every node's /health:
// node id -> group -> voters.
func (c *cluster) groupVoters(nodes []*qnode) (map[string]map[uint32]int, string) {
	out := map[string]map[uint32]int{}
	var desc []string
	for _, n := range nodes {
		_, b, err := c.do(2*time.Second, "GET", n.url("/health"), nil)
		var h struct {
			Groups []struct {
				Group  uint32 `json:"group"`
				Voters int    `json:"voters"`
			} `json:"groups"`
		}
		if err != nil || json.Unmarshal(b, &h) != nil {
			desc = append(desc, fmt.Sprintf("%s: %v", n.id, err))
			continue
		}
		out[n.id] = map[uint32]int{}
		for _, g := range h.Groups {
			out[n.id][g.Group] = g.Voters
		}
		desc = append(desc, fmt.Sprintf("%s %v", n.id, out[n.id]))
	}
	return out, strings.Join(desc, "; ")
}

// votersEverywhere waits until every node of nodes counts want voters in
// each of the groups+1 groups.
func (c *cluster) votersEverywhere(nodes []*qnode, groups, want int) {
	c.t.Helper()
	c.votersOf(nodes, groups, want, want)
}

// votersOf waits until every node of nodes counts dir voters in the
// directory and data voters in each of the groups data groups (as the
// directory records a group the node does not host).
func (c *cluster) votersOf(nodes []*qnode, groups, dir, data int) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, fmt.Sprintf("%d voters in the directory and %d in every data group on %s", dir, data, ids(nodes)), func() (bool, string) {
		v, desc := c.groupVoters(nodes)
		for _, n := range nodes {
			if len(v[n.id]) != groups+1 {
				return false, desc
			}
			for g, k := range v[n.id] {
				if g == 0 && k != dir || g != 0 && k != data {
					return false, desc
				}
			}
		}
		return true, desc
	})
}

// A fourth node started with --join (and the founders' template) joins a
// cluster of three founders, whose data groups are on R = 3 of them (the
// default, min(founders, 3)): it joins the directory (the directory's
// leader moves data-group replicas onto it, cluster/rebalance.go, leaving each
// group R voters), takes and serves work in every group, and `queen
// leave` removes it, every group keeping its R voters.
func TestGroups_JoinAndLeave(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	c := newCluster(t)
	ports := freePorts(t, 8)
	secretFile := writeSecret(t, "groups join secret")
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d@127.0.0.1:%d", i+1, ports[4+i]))
	}
	var nodes []*qnode
	for i := range 4 {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		nodes = append(nodes, c.addNode(fmt.Sprintf("n%d", i+1), httpAddr, nil,
			"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[4+i]), "--retention-interval", "0",
			"--cluster-secret-file", secretFile, "--peers", strings.Join(peers, ","), "--groups", "2",
			"--join", "http://"+fmt.Sprintf("127.0.0.1:%d", ports[0])))
	}
	for _, n := range nodes[:3] {
		n.start()
	}
	c.waitSpread(nodes[:3], 2)
	// The directory records R once the cluster runs at the command version
	// that has it (the version reads, every 5 s, bring it a moment after
	// start); a join before that joins every group.
	waitFor(t, 30*time.Second, "the directory to record R = 3", func() (bool, string) {
		_, b, err := c.do(5*time.Second, "GET", nodes[0].url("/api/v1/system/placement?consistency=stale"), nil)
		var p placementOf
		if err == nil {
			err = json.Unmarshal(b, &p)
		}
		return err == nil && p.Replicas == 3, fmt.Sprint(err, string(b))
	})
	nodes[3].start()
	c.votersOf(nodes, 2, 4, 3)
	// Through the joiner: a push over queues of both groups (two in each,
	// configured there), then pops.
	queues := []string{"ja", "jb", "jc", "jd"}
	var items []pushItem
	for i, q := range queues {
		body, _ := json.Marshal(map[string]any{"queue": q, "raftGroup": 1 + i/2})
		code, b, err := c.do(10*time.Second, "POST", nodes[i].url("/api/v1/configure"), body)
		if err != nil || code != http.StatusOK || !strings.Contains(string(b), fmt.Sprintf(`"raftGroup":%d`, 1+i/2)) {
			t.Fatalf("configure %s in group %d via %s: %d %v %s", q, 1+i/2, nodes[i].id, code, err, b)
		}
		items = append(items, pushItem{Queue: q, TransactionID: "joined-" + q, Payload: 1})
	}
	c.mustPush(nodes[3:], 30*time.Second, items)
	for _, q := range queues {
		code, b, err := c.do(10*time.Second, "GET", nodes[3].url("/api/v1/pop/queue/"+q+"?batch=10"), nil)
		var pop popResponse
		if err == nil && code == http.StatusOK {
			err = json.Unmarshal(b, &pop)
		}
		if err != nil || len(pop.Messages) != 1 || pop.Messages[0].TransactionID != "joined-"+q {
			t.Fatalf("pop %s via the joiner: %d %v %s", q, code, err, b)
		}
	}
	// The leave's commands need the cluster version every node runs; the
	// joiner's is read every few seconds after it joined (a busy machine
	// makes that later): until then the leave is refused 409
	// cluster_version, "retry then".
	waitFor(t, 60*time.Second, "queen leave n4 to succeed", func() (bool, string) {
		out, err := exec.Command(queenBinary(t), "leave", "--url", nodes[1].url(""), "--node-id", "n4",
			"--cluster-secret-file", secretFile).CombinedOutput()
		if err != nil && !strings.Contains(string(out), `"code":"cluster_version"`) {
			t.Fatalf("queen leave n4: %v: %s", err, out)
		}
		return err == nil, fmt.Sprintf("%v: %s", err, out)
	})
	c.votersEverywhere(nodes[:3], 2, 3)
	nodes[3].awaitLeft(90 * time.Second)
	c.mustPush(nodes[:3], 30*time.Second, []pushItem{{Queue: "ja", TransactionID: "after-leave", Payload: 2}})
}

// A SIGTERM that reaches a node while it still opens its stores (several
// groups take a moment) stops it with exit status 0, not with the default
// action's abrupt exit, and the store opens again.
func TestServe_SIGTERMWhileOpeningStopsCleanly(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	c := newCluster(t)
	ports := freePorts(t, 2)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	n := c.addNode("n1", httpAddr, nil, "--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--groups", "4")
	n.start()
	// The first line is logged before the stores open.
	waitFor(t, 30*time.Second, "the node's first log line", func() (bool, string) {
		tail := n.logTail(4000)
		return strings.Contains(tail, "level="), tail
	})
	n.stop() // SIGTERM, and require exit status 0
	if tail := n.logTail(4000); !strings.Contains(tail, "msg=stopped") && !strings.Contains(tail, `msg="stopped before serving"`) {
		t.Fatalf("no stop in the log:\n%s", tail)
	}
	n.start()
	waitFor(t, 30*time.Second, "the node to serve again", func() (bool, string) {
		h, err := c.health(n)
		return err == nil && h.Code == http.StatusOK, fmt.Sprint(h, err)
	})
	n.stop()
}
