package main

// The partition test: three nodes in their own network namespaces, joined
// by a bridge for the cluster's traffic. Each namespace has a second link to
// the root namespace on its own subnet, so the test reaches every node's HTTP
// while its cluster link is down. A cut is `ip link set <cluster veth> down`
// on the bridge side: the node's packets to its peers vanish silently, as in
// a real partition (no resets, no "unreachable").

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// netLab is the namespaces, links and bridge of one test, all named with a
// random suffix and deleted at cleanup.
type netLab struct {
	t        *testing.T
	sfx      string
	bridge   string
	ns       []string // per node
	cutIf    []string // per node: root-side veth of the cluster link (a bridge port)
	nodeIP   []string // per node: cluster address (inside the namespace)
	driverIP []string // per node: address of the second link inside the namespace
}

// labNets are the cluster subnets ("10.a.b.") this process's labs took.
var labNets sync.Map

func ipRun(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// netnsUnusable says why this machine cannot build a lab ("" when it can):
// no ip command, not root, or no namespace support.
func netnsUnusable() string {
	if _, err := exec.LookPath("ip"); err != nil {
		return "needs the ip command (iproute2) to build network namespaces: " + err.Error()
	}
	if os.Geteuid() != 0 {
		return "needs root to build network namespaces (CI runs as root)"
	}
	var b [3]byte
	rand.Read(b[:])
	probe := "qp" + hex.EncodeToString(b[:])
	if err := ipRun("netns", "add", probe); err != nil {
		return "cannot create network namespaces here: " + err.Error()
	}
	ipRun("netns", "del", probe)
	return ""
}

// newNetLab builds the lab for n nodes, or skips the test when this machine
// cannot (netnsUnusable).
func newNetLab(t *testing.T, n int) *netLab {
	if why := netnsUnusable(); why != "" {
		t.Skip(why)
	}
	var b [3]byte
	rand.Read(b[:])
	lab := &netLab{t: t, sfx: hex.EncodeToString(b[:])}
	lab.bridge = "qb" + lab.sfx
	// Cleanup first, so a half-built lab is torn down too. Namespaces go
	// after the nodes are killed (the cluster's cleanup is registered
	// later, so it runs earlier).
	t.Cleanup(lab.teardown)

	// Two /24s nobody on this machine uses: 10.a.b.0/24 for the cluster
	// (only inside namespaces and the bridge), 10.a.b+1.0/24 cut in /30s for
	// the driver links (root-namespace addresses).
	routes, _ := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	addrs, _ := exec.Command("ip", "-4", "-o", "addr").CombinedOutput()
	var a, bb int
	for {
		a, bb = 64+mrand.IntN(160), 2*mrand.IntN(127)
		p1, p2 := fmt.Sprintf("10.%d.%d.", a, bb), fmt.Sprintf("10.%d.%d.", a, bb+1)
		used := string(routes) + string(addrs)
		if !strings.Contains(used, p1) && !strings.Contains(used, p2) && !strings.Contains(used, fmt.Sprintf("10.%d.0.0", a)) {
			// Labs of tests running in parallel read the routes before
			// either has added its own: each pair of /24s once a process.
			if _, taken := labNets.LoadOrStore(p1, true); !taken {
				break
			}
		}
	}
	must := func(args ...string) {
		t.Helper()
		if err := ipRun(args...); err != nil {
			t.Fatal(err)
		}
	}
	must("link", "add", lab.bridge, "type", "bridge")
	must("link", "set", lab.bridge, "up")
	for i := 1; i <= n; i++ {
		ns := fmt.Sprintf("qn%s%d", lab.sfx, i)
		cRoot, cNS := fmt.Sprintf("qc%s%d", lab.sfx, i), fmt.Sprintf("qC%s%d", lab.sfx, i)
		hRoot, hNS := fmt.Sprintf("qh%s%d", lab.sfx, i), fmt.Sprintf("qH%s%d", lab.sfx, i)
		nodeIP := fmt.Sprintf("10.%d.%d.%d", a, bb, i)
		hostIP, drvIP := fmt.Sprintf("10.%d.%d.%d", a, bb+1, 4*i+1), fmt.Sprintf("10.%d.%d.%d", a, bb+1, 4*i+2)
		must("netns", "add", ns)
		lab.ns = append(lab.ns, ns)
		lab.cutIf = append(lab.cutIf, cRoot)
		lab.nodeIP = append(lab.nodeIP, nodeIP)
		lab.driverIP = append(lab.driverIP, drvIP)
		must("-n", ns, "link", "set", "lo", "up")
		// Cluster link: namespace <-> bridge.
		must("link", "add", cRoot, "type", "veth", "peer", "name", cNS)
		must("link", "set", cNS, "netns", ns)
		must("link", "set", cRoot, "master", lab.bridge)
		must("link", "set", cRoot, "up")
		must("-n", ns, "addr", "add", nodeIP+"/24", "dev", cNS)
		must("-n", ns, "link", "set", cNS, "up")
		// Driver link: namespace <-> root namespace, its own /30.
		must("link", "add", hRoot, "type", "veth", "peer", "name", hNS)
		must("link", "set", hNS, "netns", ns)
		must("addr", "add", hostIP+"/30", "dev", hRoot)
		must("link", "set", hRoot, "up")
		must("-n", ns, "addr", "add", drvIP+"/30", "dev", hNS)
		must("-n", ns, "link", "set", hNS, "up")
	}
	return lab
}

// addNodes adds a node to c (not started) in each of the first n
// namespaces, each serving HTTP on all its addresses (the driver reaches it
// on its driver link) and Raft on its cluster address, with the n as
// static peers and retention off, plus extra flags.
func (lab *netLab) addNodes(c *cluster, n int, extra ...string) {
	var peers []string
	for i, ip := range lab.nodeIP[:n] {
		peers = append(peers, fmt.Sprintf("n%d@%s:%d", i+1, ip, labRaftPort))
	}
	for i := range n {
		c.nodes = append(c.nodes, lab.node(c, i, fmt.Sprintf("n%d", i+1), append([]string{"--peers", strings.Join(peers, ",")}, extra...)...))
	}
}

// The ports every lab node serves on, at its namespace's addresses.
const labHTTPPort, labRaftPort = 6632, 7000

// node makes the node (not started, not added to c.nodes) that serves in
// namespace i, with retention off and args.
func (lab *netLab) node(c *cluster, i int, id string, args ...string) *qnode {
	return c.newNode(id, fmt.Sprintf("%s:%d", lab.driverIP[i], labHTTPPort), []string{"ip", "netns", "exec", lab.ns[i]},
		append([]string{"--http", fmt.Sprintf("0.0.0.0:%d", labHTTPPort),
			"--advertise", fmt.Sprintf("%s:%d", lab.nodeIP[i], labHTTPPort), // forwarding uses the cluster link
			"--raft", fmt.Sprintf("%s:%d", lab.nodeIP[i], labRaftPort),
			"--retention-interval", "0"}, args...)...)
}

func (lab *netLab) teardown() {
	for _, ns := range lab.ns {
		if err := ipRun("netns", "del", ns); err != nil {
			lab.t.Errorf("cleanup: %v", err)
		}
	}
	// Deleting a namespace deletes its veths and so their root-side peers;
	// delete what may be left of a half-built lab, quietly.
	for i := 1; i <= len(lab.ns)+1; i++ {
		ipRun("link", "del", fmt.Sprintf("qc%s%d", lab.sfx, i))
		ipRun("link", "del", fmt.Sprintf("qh%s%d", lab.sfx, i))
	}
	if err := ipRun("link", "del", lab.bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		lab.t.Errorf("cleanup: %v", err)
	}
}

func (lab *netLab) cut(i int) {
	lab.t.Helper()
	if err := ipRun("link", "set", lab.cutIf[i], "down"); err != nil {
		lab.t.Fatal(err)
	}
}

func (lab *netLab) heal(i int) {
	lab.t.Helper()
	if err := ipRun("link", "set", lab.cutIf[i], "up"); err != nil {
		lab.t.Fatal(err)
	}
}

// refusal is what a write sent to a cut-off node got.
type refusal struct {
	txid string
	code int
	err  error
	body apiError
	took time.Duration
}

func (r refusal) String() string {
	if r.err != nil {
		return fmt.Sprintf("%s: %v after %v", r.txid, r.err, r.took.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s: %d %s after %v", r.txid, r.code, r.body.Code, r.took.Round(time.Millisecond))
}

// TestCluster_CutOffNodeRefusesWritesAndRejoins: a node cut off from its
// peers refuses writes with 503 and a docs/decisions.md C2 body while the majority serves;
// a cut-off leader's writes are never applied; healed nodes converge.
func TestCluster_CutOffNodeRefusesWritesAndRejoins(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level partition test; skipped with -short")
	}
	lab := newNetLab(t, 3)
	c := newCluster(t)
	lab.addNodes(c, 3)
	for _, n := range c.nodes {
		n.start()
	}
	index := func(n *qnode) int {
		for i, o := range c.nodes {
			if o == n {
				return i
			}
		}
		panic("unknown node")
	}
	leader := c.waitLeader(c.nodes, 30*time.Second)
	res := c.mustPush(c.nodes, 20*time.Second, []pushItem{{Queue: "cut", Partition: "p", TransactionID: "seed", Payload: map[string]any{"id": "seed"}}})
	pid := res[0].PartitionID
	accepted := []string{"seed"}
	majorityPush := func(nodes []*qnode, id string) {
		t.Helper()
		c.mustPush(nodes, 20*time.Second, []pushItem{{Queue: "cut", Partition: "p", TransactionID: id, Payload: map[string]any{"id": id}}})
		accepted = append(accepted, id)
	}
	// writesRefused pushes unique ids to n every 200 ms until n has reported
	// no leader and refused once more after that (at least minFor). Each
	// push must be refused: 503 with a docs/decisions.md C2 body (or a client timeout, which
	// is reported separately).
	writesRefused := func(n *qnode, prefix string, minFor time.Duration) []refusal {
		t.Helper()
		var out []refusal
		start := time.Now()
		noLeaderSeen := false
		for k := 0; ; k++ {
			id := fmt.Sprintf("%s-%d", prefix, k)
			t0 := time.Now()
			code, res, b, err := c.push(n, 15*time.Second, []pushItem{{Queue: "cut", Partition: "p", TransactionID: id, Payload: map[string]any{"id": id}}})
			r := refusal{txid: id, code: code, err: err, took: time.Since(t0)}
			e, isC2 := c2(b)
			r.body = e
			out = append(out, r)
			switch {
			case err != nil:
				// Seen with a follower that had a kept-alive connection to
				// the leader: server/forward.go waits MaxPopTimeout+30s
				// (330 s by default) for any forwarded request.
				t.Errorf("push %s to cut-off %s: no answer: %v after %v (want a prompt 503 with a C2 body)", id, n.id, err, r.took.Round(time.Millisecond))
			case code == http.StatusCreated:
				t.Errorf("push %s to cut-off %s was ACCEPTED: %+v", id, n.id, res)
			case code != http.StatusServiceUnavailable || !isC2:
				t.Errorf("push %s to cut-off %s: %d %s (want 503 with {\"error\",\"code\"})", id, n.id, code, b)
			}
			if noLeaderSeen && time.Since(start) >= minFor {
				return out
			}
			if h, err := c.health(n); err == nil && h.Code == http.StatusServiceUnavailable && h.Leader == "" {
				noLeaderSeen = true
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("cut-off %s still reports a leader 30s after the cut", n.id)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Phase 1: cut a follower.
	var follower *qnode
	for _, n := range c.others(leader) {
		follower = n
		break
	}
	// A follower that forwards has a keep-alive connection to the leader;
	// the cut must not leave a write hanging on it.
	majorityPush([]*qnode{follower}, "forwarded-before-cut-1")
	lab.cut(index(follower))
	t.Logf("phase 1: cut follower %s (leader %s)", follower.id, leader.id)
	refused := writesRefused(follower, "via-cut-follower", 2*time.Second)
	t.Logf("writes to the cut-off follower: %v", refused)
	for k, n := range c.others(follower) {
		majorityPush([]*qnode{n}, fmt.Sprintf("majority-1-%d", k))
	}
	lab.heal(index(follower))
	healed := time.Now()
	c.waitConverged(c.nodes, 60*time.Second)
	t.Logf("phase 1: %s rejoined and converged %v after the heal", follower.id, time.Since(healed).Round(time.Millisecond))
	majorityPush([]*qnode{follower}, "after-heal-1") // it serves (forwards) writes again

	// Phase 2: cut the leader.
	leader = c.waitLeader(c.nodes, 30*time.Second)
	rest := c.others(leader)
	lab.cut(index(leader))
	cutAt := time.Now()
	t.Logf("phase 2: cut leader %s", leader.id)
	refusedOld := writesRefused(leader, "via-cut-leader", 2*time.Second)
	t.Logf("writes to the cut-off leader: %v", refusedOld)
	newLeader := c.waitLeader(rest, 30*time.Second)
	t.Logf("phase 2: majority elected %s; failover observed by %v after the cut", newLeader.id, time.Since(cutAt).Round(time.Millisecond))
	for k, n := range rest {
		majorityPush([]*qnode{n}, fmt.Sprintf("majority-2-%d", k))
	}
	lab.heal(index(leader))
	healed = time.Now()
	c.waitConverged(c.nodes, 60*time.Second)
	t.Logf("phase 2: old leader %s rejoined and converged %v after the heal", leader.id, time.Since(healed).Round(time.Millisecond))
	majorityPush([]*qnode{leader}, "after-heal-2")
	// Reads are local: let every node apply everything before looking.
	c.waitConverged(c.nodes, 30*time.Second)

	// Nothing the cut-off leader was sent is stored anywhere; what the
	// cut-off follower refused with no_leader/not_leader is not stored
	// either (that code promises it was never proposed).
	mustBeAbsent := map[string]bool{}
	for _, r := range refusedOld {
		mustBeAbsent[r.txid] = true
	}
	for _, r := range refused {
		if r.err == nil && (r.body.Code == "no_leader" || r.body.Code == "not_leader") {
			mustBeAbsent[r.txid] = true
		}
	}
	for _, n := range c.nodes {
		for id := range mustBeAbsent {
			code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/messages/"+pid+"/"+id), nil)
			if err != nil || code != http.StatusNotFound {
				t.Errorf("%s: GET message %s (refused while cut off): %d %v %s (want 404: never applied)", n.id, id, code, err, b)
			}
		}
		for _, id := range accepted {
			code, b, err := c.do(5*time.Second, "GET", n.url("/api/v1/messages/"+pid+"/"+id), nil)
			if err != nil || code != http.StatusOK {
				t.Errorf("%s: GET message %s (accepted): %d %v %s (want 200)", n.id, id, code, err, b)
			}
		}
	}
	for _, r := range refused {
		if !mustBeAbsent[r.txid] {
			code, _, _ := c.do(5*time.Second, "GET", newLeader.url("/api/v1/messages/"+pid+"/"+r.txid), nil)
			t.Logf("outcome-unknown write %s: GET after the heal answers %d", r, code)
		}
	}
	// And a fresh consumer group reading the whole queue sees exactly the
	// accepted ids, plus any the follower's forward may have delivered late.
	seen := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, b, err := c.do(10*time.Second, "GET", newLeader.url("/api/v1/pop/queue/cut?batch=100&autoAck=true&consumerGroup=verify"), nil)
		if err == nil && code == http.StatusNoContent {
			break
		}
		var pr popResponse
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &pr) != nil {
			t.Fatalf("verify pop: %d %v %s", code, err, b)
		}
		for _, m := range pr.Messages {
			seen[m.TransactionID] = true
		}
		if time.Now().After(deadline) {
			t.Fatal("verify pop: queue not drained in 30s")
		}
	}
	for _, id := range accepted {
		if !seen[id] {
			t.Errorf("accepted push %s was not delivered to a fresh group", id)
		}
	}
	for id := range seen {
		if mustBeAbsent[id] {
			t.Errorf("push %s, refused while its node was cut off, was delivered after the heal", id)
		}
	}
	c.stopAndCompare(c.nodes, 60*time.Second)
}
