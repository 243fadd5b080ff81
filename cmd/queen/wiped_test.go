package main

// Process-level tests of a node that lost its disk and starts again under
// its old id with the same flags (a Kubernetes StatefulSet pod given a new
// volume): it must never vote, so nothing acknowledged is lost, and it
// says how to repair it (raft/identity.go, README.md "Runbook").

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWipe_TwoDownLosesNothing: one group.
func TestWipe_TwoDownLosesNothing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	twoDown(t, 1)
}

// TestWipe_TwoDownLosesNothingGroups: the same with --groups 2, whose
// Host runs the founders' round before any group opens.
func TestWipe_TwoDownLosesNothingGroups(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	twoDown(t, 2)
}

// twoDown is the scenario of the issue that found it: pause a node (B),
// push twenty items (each answered queued, so committed on the other two),
// kill -9 the other two (A, C), delete C's data directory and start C again
// with the same flags, resume B, start A again. Before the store ids, C
// bootstrapped, voted B (which lacked the pushes) into office, and A's log
// was truncated: 19 or 20 of the 20 lost on every node. Now C waits while
// no founder answers, refuses to start once B does (exit non-zero, naming
// the fix), and once A is back every push is there. Then the repair the
// refusal names: queen leave --force through a survivor, and C, started
// with --join as well, joins as a new member and catches up.
func twoDown(t *testing.T, groups int) {
	secret := writeSecret(t, "wipe secret")
	common := []string{"--cluster-secret-file", secret}
	if groups > 1 {
		common = append(common, "--groups", strconv.Itoa(groups))
	}
	c := startLoopback(t, 3, common...)
	leader := c.waitLeader(c.nodes, 60*time.Second)
	if groups > 1 {
		c.waitSpread(c.nodes, groups)
	}
	queues := []string{"wa", "wb", "wc", "wd"}
	var first []pushItem
	for _, q := range queues {
		first = append(first, pushItem{Queue: q, TransactionID: "first-" + q, Payload: 0})
	}
	c.mustPush(c.nodes, 30*time.Second, first)

	// A is the directory's leader, B and C the others.
	a := leader
	others := c.others(a)
	b, wiped := others[0], others[1]
	if err := b.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			b.signal(syscall.SIGCONT)
		}
	}()
	var acked []pushItem
	for i := range 20 {
		item := pushItem{Queue: queues[i%len(queues)], TransactionID: fmt.Sprintf("acked-%d", i), Payload: i}
		c.mustPush([]*qnode{a, wiped}, 60*time.Second, []pushItem{item})
		acked = append(acked, item)
	}
	t.Logf("%s paused; 20 pushes answered queued through %s and %s", b.id, a.id, wiped.id)
	a.kill()
	wiped.kill()
	if err := os.RemoveAll(wiped.dir); err != nil {
		t.Fatal(err)
	}
	wiped.start()
	// No founder answers (A is down, B paused): C waits, serving nothing.
	time.Sleep(3 * time.Second)
	if !wiped.running() {
		t.Fatalf("%s exited while no founder could answer:\n%s", wiped.id, wiped.logTail(3000))
	}
	if code, _, err := c.do(2*time.Second, "GET", wiped.url("/health"), nil); err == nil {
		t.Fatalf("%s answers /health (%d) with an empty store while no founder answered", wiped.id, code)
	}
	if err := b.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	paused = false
	wiped.awaitRefusal(60*time.Second, "once "+b.id+" answers")
	// B alone elects nobody; with A back, every acknowledged push is there.
	a.start()
	live := []*qnode{a, b}
	c.waitLeader(live, 60*time.Second)
	c.requireStored(live, acked)

	// The repair: remove the old store, then the same flags plus --join
	// make C a new member, which catches up.
	c.leaveForce(a, wiped.id, secret)
	wiped.args = append(slices.Clone(wiped.args), "--join", a.url(""))
	wiped.start()
	all := []*qnode{a, b, wiped}
	c.waitVoters(all, groups, 3)
	c.waitConverged(all, 120*time.Second)
	c.requireStored([]*qnode{wiped}, acked)
	c.requireOneCluster(all)
}

// awaitRefusal waits up to timeout for a node started on an empty data
// directory to refuse to start (raft.ErrStoreLost): a non-zero exit, and a
// log that says what happened and names the fix.
func (n *qnode) awaitRefusal(timeout time.Duration, when string) {
	n.t.Helper()
	waitFor(n.t, timeout, n.id+" to refuse to start "+when, func() (bool, string) {
		return !n.running(), "still running"
	})
	log := n.logTail(4000)
	if n.cmd.ProcessState.Success() || !strings.Contains(log, "store was lost") || !strings.Contains(log, "queen leave") {
		n.t.Fatalf("%s: exit %v; want non-zero, and the lost store and its fix in the log:\n%s", n.id, n.cmd.ProcessState, log)
	}
	n.t.Logf("%s refused to start: %s", n.id, log[strings.LastIndex(log, "store was lost"):])
}

// requireStored pushes items again through each of nodes: every item must
// answer duplicate, which it does only when its first push is stored.
func (c *cluster) requireStored(nodes []*qnode, items []pushItem) {
	c.t.Helper()
	for _, n := range nodes {
		res := c.mustPush([]*qnode{n}, 60*time.Second, items)
		var lost []string
		for _, r := range res {
			if r.Status != "duplicate" {
				lost = append(lost, r.TransactionID)
			}
		}
		if len(lost) > 0 {
			c.t.Fatalf("through %s, %d of %d acknowledged pushes were lost: %v", n.id, len(lost), len(items), lost)
		}
	}
}

// TestWipe_JoinerWithALostDiskIsRefused: a node that joined with --join
// (not a founder) loses its disk and starts again with the same flags. The
// cluster still counts its id, so it refuses to start (exit non-zero,
// naming the fix) before its Raft could vote; after queen leave --force,
// the same command joins it again as a new member, which catches up.
func TestWipe_JoinerWithALostDiskIsRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "wiped joiner secret")
	c := startLoopback(t, 3, "--cluster-secret-file", secret)
	leader := c.waitLeader(c.nodes, 60*time.Second)
	ports := freePorts(t, 2)
	httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	joiner := c.addNode("n4", httpAddr, nil, "--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--retention-interval", "0", "--cluster-secret-file", secret, "--join", leader.url(""))
	joiner.start()
	c.waitVoters(c.nodes, 1, 4)
	var items []pushItem
	for i := range 10 {
		items = append(items, pushItem{Queue: "wj", TransactionID: fmt.Sprintf("wj-%d", i), Payload: i})
	}
	c.mustPush(c.nodes, 30*time.Second, items)
	c.waitConverged(c.nodes, 60*time.Second)

	joiner.kill()
	if err := os.RemoveAll(joiner.dir); err != nil {
		t.Fatal(err)
	}
	joiner.start()
	joiner.awaitRefusal(60*time.Second, "with an empty store")
	founders := c.nodes[:3]
	c.requireStored(founders, items)

	c.leaveForce(founders[0], joiner.id, secret)
	joiner.start()
	c.waitVoters(c.nodes, 1, 4)
	c.waitConverged(c.nodes, 120*time.Second)
	c.requireStored([]*qnode{joiner}, items)
	c.requireOneCluster(c.nodes)
}

// TestWipe_NonvoterWithAnEmptyStoreStarts: a joiner is a non-voter until it
// has caught up (serve --join asks for the promotion then), so a joiner
// killed before then, its store empty, acknowledged nothing that counted:
// started again, it is not refused, catches up and is promoted. The state
// is made here directly: n4 is added as a non-voter (forced: nothing
// listens at its address yet) before it first starts, with an empty store.
// Added as a voter instead, it is refused (TestWipe_JoinerWithALostDiskIsRefused).
func TestWipe_NonvoterWithAnEmptyStoreStarts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	const secretText = "wiped non-voter secret"
	secret := writeSecret(t, secretText)
	c := startLoopback(t, 3, "--cluster-secret-file", secret)
	leader := c.waitLeader(c.nodes, 60*time.Second)
	var items []pushItem
	for i := range 10 {
		items = append(items, pushItem{Queue: "wn", TransactionID: fmt.Sprintf("wn-%d", i), Payload: i})
	}
	c.mustPush(c.nodes, 30*time.Second, items)
	ports := freePorts(t, 2)
	httpAddr, raftAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])

	c.header.Set("X-Queen-Cluster-Secret", secretText)
	body := fmt.Sprintf(`{"id":"n4","addr":%q,"as":"nonvoter","force":true}`, raftAddr)
	waitFor(t, 30*time.Second, "n4 added as a non-voter", func() (bool, string) {
		code, b, err := c.do(10*time.Second, "POST", leader.url("/internal/v1/cluster/join"), []byte(body))
		return err == nil && code == http.StatusOK, fmt.Sprintf("%d %s %v", code, b, err)
	})
	c.header.Del("X-Queen-Cluster-Secret")
	c.waitVoters(c.nodes, 1, 3) // a non-voter is no voter

	joiner := c.addNode("n4", httpAddr, nil, "--http", httpAddr, "--raft", raftAddr,
		"--retention-interval", "0", "--cluster-secret-file", secret, "--join", leader.url(""))
	joiner.start()
	c.waitVoters(c.nodes, 1, 4)
	c.waitConverged(c.nodes, 120*time.Second)
	c.requireStored([]*qnode{joiner}, items)
	c.requireOneCluster(c.nodes)
}

// requireOneCluster requires every node of nodes to name the same cluster
// id in /health, and a store id of its own: a node that joined took the
// cluster's.
func (c *cluster) requireOneCluster(nodes []*qnode) {
	c.t.Helper()
	clusters, stores := map[string]string{}, map[string]string{}
	for _, n := range nodes {
		_, b, err := c.do(5*time.Second, "GET", n.url("/health"), nil)
		var h struct{ Cluster, Store string }
		if err == nil {
			err = json.Unmarshal(b, &h)
		}
		if err != nil || len(h.Cluster) != 32 || len(h.Store) != 32 || stores[h.Store] != "" {
			c.t.Fatalf("%s /health: %v %s (stores seen: %v)", n.id, err, b, stores)
		}
		clusters[h.Cluster] += n.id + " "
		stores[h.Store] = n.id
	}
	if len(clusters) != 1 {
		c.t.Fatalf("the nodes name different clusters: %v", clusters)
	}
}

// TestWipe_LeaderWithTheOthersHealthy: the leader loses its disk while the
// other two run: they elect, it refuses to start (it would have
// re-bootstrapped and rejoined as a voter with an empty log), nothing
// acknowledged is lost, and the repair brings it back.
func TestWipe_LeaderWithTheOthersHealthy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	secret := writeSecret(t, "wiped leader secret")
	c := startLoopback(t, 3, "--cluster-secret-file", secret)
	leader := c.waitLeader(c.nodes, 60*time.Second)
	var acked []pushItem
	for i := range 20 {
		acked = append(acked, pushItem{Queue: "wl", TransactionID: fmt.Sprintf("wl-%d", i), Payload: i})
	}
	c.mustPush([]*qnode{leader}, 30*time.Second, acked)
	others := c.others(leader)
	leader.kill()
	if err := os.RemoveAll(leader.dir); err != nil {
		t.Fatal(err)
	}
	leader.start()
	leader.awaitRefusal(60*time.Second, "with an empty store")
	c.waitLeader(others, 60*time.Second)
	c.requireStored(others, acked)
	c.leaveForce(others[0], leader.id, secret)
	leader.args = append(slices.Clone(leader.args), "--join", others[0].url(""))
	leader.start()
	c.waitVoters(c.nodes, 1, 3)
	c.waitConverged(c.nodes, 120*time.Second)
	c.requireStored([]*qnode{leader}, acked)
}
