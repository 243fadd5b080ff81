package main

// Process-level tests of the replicated broker: three `queen serve`
// processes on 127.0.0.1 (the network-partition test, which needs network
// namespaces, is in cluster_netns_linux_test.go). They are black-box: HTTP
// in, `queen check` digests out.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ledger records what the load test's clients were told.
type ledger struct {
	mu         sync.Mutex
	pushed     map[string]string // txid -> "queued" or "duplicate"
	pushedMsg  map[string]string // txid -> message id the push answered
	deliveries []delivery
	ackedAt    map[string]time.Time // txid -> first success:true ack answer
	quietAfter time.Time            // end of the last pop that delivered or failed

	pushRetries, popErrors, ackErrors, ackRejected atomic.Int64
}

type delivery struct {
	txid, msgID, partition, lease string
	popStart, popEnd              time.Time
	consumer                      int
}

func newLedger() *ledger {
	return &ledger{pushed: map[string]string{}, pushedMsg: map[string]string{}, ackedAt: map[string]time.Time{}}
}

func (l *ledger) notePopEnd(t time.Time) {
	l.mu.Lock()
	if t.After(l.quietAfter) {
		l.quietAfter = t
	}
	l.mu.Unlock()
}

// loadClient is one pusher or consumer of the load test.
type loadClient struct {
	t    *testing.T
	c    *cluster
	l    *ledger
	stop chan struct{}
	// lastFailed is each node's last failed pop, for a drain that does
	// not end (a drainer's own; pollers do not set it).
	lastFailed map[string]string
}

func (lc *loadClient) stopped() bool { return isClosed(lc.stop) }

// pusher pushes batches of unique transaction ids to random nodes at most
// every 50 ms, retrying a batch (same ids, same partition) on network
// errors and 5xx until it is answered.
func (lc *loadClient) pusher(w, batch, maxBatches int) {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for seq := 0; seq < maxBatches; seq++ {
		select {
		case <-lc.stop:
			return
		case <-tick.C:
		}
		part := fmt.Sprintf("p%d", rng.IntN(4))
		items := make([]pushItem, batch)
		for i := range items {
			id := fmt.Sprintf("w%d-%06d", w, seq*batch+i)
			items[i] = pushItem{Queue: "q", Partition: part, TransactionID: id,
				Payload: map[string]any{"id": id, "pusher": w}}
		}
		body, _ := json.Marshal(map[string]any{"items": items})
		deadline := time.Now().Add(40 * time.Second)
		for {
			n := lc.c.nodes[rng.IntN(len(lc.c.nodes))]
			code, res, b, err := lc.c.pushRaw(n, 5*time.Second, body)
			if err == nil && code == http.StatusCreated {
				lc.l.mu.Lock()
				for _, r := range res {
					switch r.Status {
					case "queued", "duplicate":
						if _, seen := lc.l.pushed[r.TransactionID]; !seen {
							lc.l.pushed[r.TransactionID] = r.Status
							lc.l.pushedMsg[r.TransactionID] = r.MessageID
						}
					default:
						lc.t.Errorf("push %s via %s answered %q: %s", r.TransactionID, n.id, r.Status, b)
					}
				}
				lc.l.mu.Unlock()
				if len(res) != len(items) {
					lc.t.Errorf("push via %s: %d results for %d items", n.id, len(res), len(items))
				}
				break
			}
			if err == nil && code < 500 {
				lc.t.Errorf("push via %s: %d %s", n.id, code, b)
				return
			}
			lc.l.pushRetries.Add(1)
			if time.Now().After(deadline) {
				lc.t.Errorf("pusher %d: batch %d not accepted within 40s; last: %s %d %v %s", w, seq, n.id, code, err, b)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// consumer pops (long-poll, small lease) from random nodes and acks what it
// got with its lease, recording deliveries and successful acks.
func (lc *loadClient) consumer(id int, leaseSeconds int) {
	rng := rand.New(rand.NewPCG(uint64(100+id), uint64(time.Now().UnixNano())))
	for !lc.stopped() {
		n := lc.c.nodes[rng.IntN(len(lc.c.nodes))]
		lc.popAndAck(n, id, leaseSeconds, 1000)
	}
}

// popAndAck does one long-poll pop (waitMs) and, if it delivered, one batch
// ack. It reports how many messages were delivered (-1: the pop failed).
func (lc *loadClient) popAndAck(n *qnode, consumer, leaseSeconds, waitMs int) int {
	url := n.url(fmt.Sprintf("/api/v1/pop/queue/q?batch=10&wait=true&timeout=%d&consumerGroup=g&leaseSeconds=%d", waitMs, leaseSeconds))
	start := time.Now()
	code, b, err := lc.c.do(8*time.Second, "GET", url, nil)
	end := time.Now()
	switch {
	case err != nil || code >= 500:
		if lc.lastFailed != nil {
			lc.lastFailed[n.id] = fmt.Sprintf("%s: %d %v %.200s", end.Format("15:04:05.000"), code, err, b)
		}
		lc.l.popErrors.Add(1)
		lc.l.notePopEnd(end) // it may have taken a lease we never heard of
		time.Sleep(50 * time.Millisecond)
		return -1
	case code == http.StatusNoContent:
		return 0
	case code != http.StatusOK:
		lc.t.Errorf("pop via %s: %d %s", n.id, code, b)
		time.Sleep(50 * time.Millisecond)
		return -1
	}
	var pr popResponse
	if err := json.Unmarshal(b, &pr); err != nil {
		lc.t.Errorf("pop via %s: %v: %s", n.id, err, b)
		return -1
	}
	lc.l.notePopEnd(end)
	acks := make([]ackItem, 0, len(pr.Messages))
	lc.l.mu.Lock()
	for _, m := range pr.Messages {
		var data struct{ ID string }
		if json.Unmarshal(m.Data, &data) != nil || data.ID != m.TransactionID {
			lc.t.Errorf("message %s: payload %s does not carry its transaction id", m.TransactionID, m.Data)
		}
		lc.l.deliveries = append(lc.l.deliveries, delivery{txid: m.TransactionID, msgID: m.ID, partition: m.PartitionID,
			lease: m.LeaseID, popStart: start, popEnd: end, consumer: consumer})
		acks = append(acks, ackItem{TransactionID: m.TransactionID, PartitionID: m.PartitionID, LeaseID: m.LeaseID, Status: "completed"})
	}
	lc.l.mu.Unlock()
	if len(acks) == 0 {
		return 0
	}
	body, _ := json.Marshal(map[string]any{"consumerGroup": "g", "acknowledgments": acks})
	// Ack through another random node: forwarding is part of the test.
	an := lc.c.nodes[rand.IntN(len(lc.c.nodes))]
	code, b, err = lc.c.do(8*time.Second, "POST", an.url("/api/v1/ack/batch"), body)
	at := time.Now()
	if err != nil || code != http.StatusOK {
		// Outcome unknown: the lease expires and the messages come back.
		lc.l.ackErrors.Add(1)
		if err == nil && code < 500 {
			lc.t.Errorf("ack via %s: %d %s", an.id, code, b)
		}
		return len(acks)
	}
	var res []ackResult
	if err := json.Unmarshal(b, &res); err != nil || len(res) != len(acks) {
		lc.t.Errorf("ack via %s: %v: %d results for %d acks: %s", an.id, err, len(res), len(acks), b)
		return len(acks)
	}
	lc.l.mu.Lock()
	for _, r := range res {
		if !r.Success {
			lc.l.ackRejected.Add(1) // e.g. the lease expired meanwhile
			continue
		}
		if _, ok := lc.l.ackedAt[r.TransactionID]; !ok {
			lc.l.ackedAt[r.TransactionID] = at
		}
	}
	lc.l.mu.Unlock()
	return len(acks)
}

// TestCluster_KillLeaderUnderLoad: kill -9 the leader of three nodes under
// push/pop/ack load, restart it, and check at-least-once delivery, acks
// that stick, and replicas that converge byte for byte.
func TestCluster_KillLeaderUnderLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level load test (about 30 s); skipped with -short")
	}
	var extra []string
	if serveHasFlag(t, "snapshot-interval") {
		// Snapshots (and, for the restarted node, likely an install) under load.
		extra = []string{"--snapshot-threshold", "256", "--trailing-logs", "64", "--snapshot-interval", "1s"}
	}
	killLeaderUnderLoad(t, startLoopback(t, 3, extra...))
}

// killLeaderUnderLoad is TestCluster_KillLeaderUnderLoad on a started
// three-node cluster c: it ends with the nodes stopped and compared.
func killLeaderUnderLoad(t *testing.T, c *cluster) {
	const (
		pushers, consumers = 4, 4
		batch              = 10
		maxBatches         = 200 // per pusher; at most one batch per 50 ms
		leaseSeconds       = 3
		killAfter          = 3 * time.Second
		restartAfter       = 3 * time.Second // after the failover
		loadFor            = 10 * time.Second
	)
	c.waitLeader(c.nodes, 30*time.Second)

	l := newLedger()
	stopPush, stopPop := make(chan struct{}), make(chan struct{})
	var pushWG, popWG sync.WaitGroup
	var stopOnce sync.Once
	stopLoad := func() {
		stopOnce.Do(func() {
			close(stopPush)
			pushWG.Wait()
			close(stopPop)
			popWG.Wait()
		})
	}
	defer stopLoad() // before cleanups: no goroutine may outlive the test
	loadStart := time.Now()
	for w := range pushers {
		lc := &loadClient{t: t, c: c, l: l, stop: stopPush}
		pushWG.Go(func() { lc.pusher(w, batch, maxBatches) })
	}
	for i := range consumers {
		lc := &loadClient{t: t, c: c, l: l, stop: stopPop}
		popWG.Go(func() { lc.consumer(i, leaseSeconds) })
	}

	// Kill the leader once the load runs.
	time.Sleep(time.Until(loadStart.Add(killAfter)))
	var victim *qnode
	waitFor(t, 10*time.Second, "a node reporting role leader", func() (bool, string) {
		hs, errs, desc := c.healths(c.nodes)
		for i, h := range hs {
			if errs[i] == nil && h.Role == "leader" {
				victim = c.nodes[i]
				return true, desc
			}
		}
		return false, desc
	})
	victim.kill()
	killedAt := time.Now()
	survivors := c.others(victim)
	t.Logf("killed leader %s (kill -9) at +%v", victim.id, killedAt.Sub(loadStart).Round(time.Millisecond))

	// Failover: from the kill until a push through a survivor is answered.
	var elected time.Duration
	probe := []pushItem{{Queue: "failover", TransactionID: "failover-probe", Payload: map[string]any{"id": "failover-probe"}}}
	for attempt := 0; ; attempt++ {
		n := survivors[attempt%2]
		code, res, b, err := c.push(n, 3*time.Second, probe)
		if err == nil && code == http.StatusCreated && len(res) == 1 && (res[0].Status == "queued" || res[0].Status == "duplicate") {
			break
		}
		if err == nil && code < 500 {
			t.Fatalf("failover probe via %s: %d %s", n.id, code, b)
		}
		if elected == 0 {
			for _, s := range survivors {
				if h, err := c.health(s); err == nil && h.Role == "leader" {
					elected = time.Since(killedAt)
				}
			}
		}
		if time.Since(killedAt) > 30*time.Second {
			t.Fatalf("no push accepted within 30s of killing the leader; last via %s: %d %v %s", n.id, code, err, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	failover := time.Since(killedAt)
	if elected == 0 {
		elected = failover
	}
	t.Logf("FAILOVER: first push accepted %v after kill -9 of the leader (a survivor reported role leader after %v)",
		failover.Round(time.Millisecond), elected.Round(time.Millisecond))

	time.Sleep(restartAfter)
	victim.start()
	t.Logf("restarted %s at +%v", victim.id, time.Since(loadStart).Round(time.Millisecond))
	time.Sleep(time.Until(loadStart.Add(loadFor)))
	stopLoad()
	t.Logf("load stopped at +%v", time.Since(loadStart).Round(time.Millisecond))

	// Drain: pop and ack until three consecutive empty pops that started
	// after every lease we may hold has expired.
	drain := &loadClient{t: t, c: c, l: l, stop: make(chan struct{}), lastFailed: map[string]string{}}
	drainDeadline := time.Now().Add(2 * time.Minute)
	for empties, i := 0, 0; empties < 3; i++ {
		if time.Now().After(drainDeadline) {
			t.Fatalf("drain: still receiving messages or errors after 2 minutes; each node's last failed pop: %v", drain.lastFailed)
		}
		l.mu.Lock()
		quiet := l.quietAfter.Add(time.Duration(leaseSeconds)*time.Second + 500*time.Millisecond)
		l.mu.Unlock()
		start := time.Now()
		got := drain.popAndAck(c.nodes[i%3], 99, leaseSeconds, 500)
		switch {
		case got != 0:
			empties = 0
		case start.After(quiet):
			empties++
		}
	}

	t.Logf("drained by +%v", time.Since(loadStart).Round(time.Millisecond))

	// The assertions.
	l.mu.Lock()
	defer l.mu.Unlock()
	byTx := map[string][]delivery{}
	for _, d := range l.deliveries {
		byTx[d.txid] = append(byTx[d.txid], d)
	}
	queued, dups := 0, 0
	var lost []string
	for tx, st := range l.pushed {
		if st == "queued" {
			queued++
		} else {
			dups++
		}
		if len(byTx[tx]) == 0 {
			lost = append(lost, tx+" ("+st+")")
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		t.Errorf("(a) %d of %d acknowledged pushes were never delivered, e.g. %v", len(lost), len(l.pushed), head(lost, 10))
	}
	var afterAck, dupIDs, unknown []string
	redelivered := 0
	for tx, ds := range byTx {
		redelivered += len(ds) - 1
		if _, ok := l.pushed[tx]; !ok {
			unknown = append(unknown, tx)
		}
		for _, d := range ds {
			if d.msgID != ds[0].msgID || (l.pushedMsg[tx] != "" && d.msgID != l.pushedMsg[tx]) {
				dupIDs = append(dupIDs, fmt.Sprintf("%s: push said %s, delivered %s and %s", tx, l.pushedMsg[tx], ds[0].msgID, d.msgID))
				break
			}
		}
		if at, ok := l.ackedAt[tx]; ok {
			for _, d := range ds {
				if d.popStart.After(at) {
					afterAck = append(afterAck, fmt.Sprintf("%s: acked at +%v, delivered again by a pop started at +%v (lease %s)",
						tx, at.Sub(loadStart).Round(time.Millisecond), d.popStart.Sub(loadStart).Round(time.Millisecond), d.lease))
				}
			}
		}
	}
	sort.Strings(afterAck)
	if len(afterAck) > 0 {
		t.Errorf("(b) %d deliveries of messages after their ack was answered success, e.g. %v", len(afterAck), head(afterAck, 10))
	}
	if len(dupIDs) > 0 {
		t.Errorf("dedup: %d transaction ids were stored as more than one message, e.g. %v", len(dupIDs), head(dupIDs, 10))
	}
	if len(unknown) > 0 {
		// Only a pusher that gave up (already reported) leaves ids unanswered.
		t.Logf("%d delivered ids were never answered to their pusher, e.g. %v", len(unknown), head(unknown, 5))
	}
	neverAcked := 0
	for tx := range l.pushed {
		if _, ok := l.ackedAt[tx]; !ok {
			neverAcked++
		}
	}
	t.Logf("pushed %d (queued %d, duplicate %d; %d push retries), delivered %d distinct in %d deliveries (%d redelivered), "+
		"acked %d (%d pushed ids without a success ack answer: ack reply lost), %d acks rejected, %d ack errors, %d pop errors; failover %v",
		len(l.pushed), queued, dups, l.pushRetries.Load(), len(byTx), len(l.deliveries), redelivered,
		len(l.ackedAt), neverAcked, l.ackRejected.Load(), l.ackErrors.Load(), l.popErrors.Load(), failover.Round(time.Millisecond))
	if len(l.pushed) < 500 {
		t.Errorf("only %d messages pushed: the load did not run", len(l.pushed))
	}

	// (c) replicas converge.
	c.stopAndCompare(c.nodes, 60*time.Second)
	for _, n := range c.nodes {
		t.Logf("%s: latest raft snapshot at index %d", n.id, latestSnapshot(n.dir))
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// TestCluster_RestartCatchesUpFromSnapshot: a follower stopped while the
// others take many entries catches up after its restart (from a snapshot
// when the leader compacted its log past the follower) and its state is
// byte-identical.
func TestCluster_RestartCatchesUpFromSnapshot(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process-level test; skipped with -short")
	}
	const trailing = 16
	extra := []string{"--snapshot-threshold", "64", "--trailing-logs", fmt.Sprint(trailing)}
	// Raft checks the threshold only every SnapshotInterval (2 min by
	// default). Use a flag for it as soon as `queen serve` has one.
	hasInterval := serveHasFlag(t, "snapshot-interval")
	if hasInterval {
		extra = append(extra, "--snapshot-interval", "1s")
	}
	c := startLoopback(t, 3, extra...)
	leader := c.waitLeader(c.nodes, 30*time.Second)

	pushN := func(nodes []*qnode, prefix string, batches int) {
		t.Helper()
		for b := range batches {
			items := make([]pushItem, 10)
			for i := range items {
				id := fmt.Sprintf("%s-%05d", prefix, b*10+i)
				items[i] = pushItem{Queue: "snap", Partition: fmt.Sprintf("p%d", b%3), TransactionID: id, Payload: map[string]any{"id": id}}
			}
			c.mustPush(nodes, 30*time.Second, items)
		}
	}
	pushN([]*qnode{leader}, "before", 10)
	c.waitConverged(c.nodes, 30*time.Second)

	var follower *qnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
			break
		}
	}
	fh, err := c.health(follower)
	if err != nil {
		t.Fatal(err)
	}
	follower.stop()
	t.Logf("stopped follower %s at applied %d", follower.id, fh.Applied)
	live := c.others(follower)

	// 3000 messages in 300 sequential requests: about 300 raft entries, far
	// beyond threshold + trailing logs.
	start := time.Now()
	pushN(live, "while-down", 300)
	lh, err := c.health(leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pushed 3000 messages in %v; leader applied %d (%d entries past the stopped follower)",
		time.Since(start).Round(time.Millisecond), lh.Applied, lh.Applied-fh.Applied)
	if hasInterval {
		waitFor(t, 30*time.Second, "the leader to snapshot past the stopped follower", func() (bool, string) {
			s := latestSnapshot(leader.dir)
			return s > fh.Applied+trailing, fmt.Sprintf("leader's latest snapshot at %d", s)
		})
	}
	leaderSnap := latestSnapshot(leader.dir)
	followerSnapBefore := latestSnapshot(follower.dir)

	follower.start()
	restarted := time.Now()
	waitFor(t, 60*time.Second, follower.id+" to catch up with the leader", func() (bool, string) {
		h, err := c.health(follower)
		if err != nil {
			return false, err.Error()
		}
		return h.Applied >= lh.Applied, fmt.Sprintf("%s at %d, leader at %d", follower.id, h.Applied, lh.Applied)
	})
	t.Logf("%s caught up %d entries in %v", follower.id, lh.Applied-fh.Applied, time.Since(restarted).Round(time.Millisecond))

	// The restarted node serves local reads of what was pushed while it was down.
	code, b, err := c.do(5*time.Second, "GET", follower.url("/api/v1/resources/queues/snap"), nil)
	if err != nil || code != http.StatusOK {
		t.Errorf("GET queue snap on %s: %d %v %s", follower.id, code, err, b)
	}
	followerSnapAfter := latestSnapshot(follower.dir)
	c.stopAndCompare(c.nodes, 60*time.Second)

	t.Logf("snapshots: leader's latest %d; follower's %d before its restart, %d after", leaderSnap, followerSnapBefore, followerSnapAfter)
	if leaderSnap == 0 {
		t.Skip("broker bug: no snapshot was taken, so none could be installed. --snapshot-threshold is only checked every " +
			"raft SnapshotInterval (2 min by default) and `queen serve` has no flag for it; add --snapshot-interval " +
			"(this test passes --snapshot-interval 1s as soon as it exists). The catch-up by log replay and the digests were checked.")
	}
	if leaderSnap > fh.Applied+trailing && followerSnapAfter <= fh.Applied {
		t.Errorf("the leader compacted its log past the follower (snapshot %d, trailing %d, follower at %d) but the follower "+
			"holds no snapshot newer than its position after catching up (latest %d)", leaderSnap, trailing, fh.Applied, followerSnapAfter)
	}
}

// TestCluster_JoinAndLeave: one node bootstraps, two join it with the
// cluster secret, one leaves; anonymous membership requests are refused
// throughout and change nothing.
func TestCluster_JoinAndLeave(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ports := freePorts(t, 6)
	secretFile := writeSecret(t, "join-and-leave secret")
	var nodes []*qnode
	for i := range 3 {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		args := []string{"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[3+i]), "--retention-interval", "0",
			"--cluster-secret-file", secretFile}
		if i > 0 {
			args = append(args, "--join", nodes[0].url(""))
		}
		nodes = append(nodes, c.addNode(fmt.Sprintf("n%d", i+1), httpAddr, nil, args...))
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.start()
	c.waitLeader([]*qnode{n1}, 30*time.Second)
	c.mustPush([]*qnode{n1}, 10*time.Second, []pushItem{{Queue: "jl", TransactionID: "before-join", Payload: 1}})

	n2.start()
	n3.start()
	voters := func(nodes []*qnode, want int) func() (bool, string) {
		return func() (bool, string) {
			hs, errs, desc := c.healths(nodes)
			for i, h := range hs {
				if errs[i] != nil || h.Code != 200 || h.Voters != want {
					return false, desc
				}
			}
			return true, desc
		}
	}
	waitFor(t, 30*time.Second, "voters == 3 on every node", voters(nodes, 3))
	c.waitConverged(nodes, 30*time.Second)
	// A pushed-through-a-joiner message is replicated like any other.
	c.mustPush([]*qnode{n3}, 10*time.Second, []pushItem{{Queue: "jl", TransactionID: "after-join", Payload: 2}})

	// Anonymous or with a wrong secret, leaves and joins are refused by
	// every node, and the cluster stays as it was.
	for _, n := range nodes {
		for _, req := range []struct{ route, body, secret, code string }{
			{"leave", `{"id":"n2"}`, "", "cluster_secret_invalid"},
			{"leave", `{"id":"n3","force":true}`, "guess", "cluster_secret_invalid"},
			{"join", `{"id":"evil","addr":"127.0.0.1:1","force":true}`, "", "cluster_secret_invalid"},
		} {
			c.header.Del("X-Queen-Cluster-Secret")
			if req.secret != "" {
				c.header.Set("X-Queen-Cluster-Secret", req.secret)
			}
			code, b, err := c.do(10*time.Second, "POST", n.url("/internal/v1/cluster/"+req.route), []byte(req.body))
			if e, ok := c2(b); err != nil || code != http.StatusForbidden || !ok || e.Code != req.code {
				t.Fatalf("%s via %s with secret %q: %d %s %v, want 403 %s", req.route, n.id, req.secret, code, b, err, req.code)
			}
		}
	}
	c.header.Del("X-Queen-Cluster-Secret")
	waitFor(t, 10*time.Second, "voters == 3 after the refused requests", voters(nodes, 3))
	out, err := exec.Command(queenBinary(t), "leave", "--url", n2.url(""), "--node-id", n3.id).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "anonymous") {
		t.Fatalf("queen leave without a secret: %v: %s (want a refusal before sending)", err, out)
	}

	out, err = exec.Command(queenBinary(t), "leave", "--url", n2.url(""), "--node-id", n3.id, "--cluster-secret-file", secretFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "removed "+n3.id) {
		t.Fatalf("queen leave --node-id %s via %s: %v: %s", n3.id, n2.id, err, out)
	}
	waitFor(t, 30*time.Second, "voters == 2 on the remaining nodes", voters(nodes[:2], 2))
	c.mustPush([]*qnode{n2, n1}, 10*time.Second, []pushItem{{Queue: "jl", TransactionID: "after-leave", Payload: 3}})
	// Asked again, or for an id never seen: 404 unknown_member, exit 1.
	for _, id := range []string{n3.id, "nobody-x"} {
		out, err = exec.Command(queenBinary(t), "leave", "--url", n2.url(""), "--node-id", id, "--cluster-secret-file", secretFile).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "404") || !strings.Contains(string(out), "unknown_member") {
			t.Fatalf("queen leave --node-id %s, not a member: %v: %s (want exit 1 and 404 unknown_member)", id, err, out)
		}
	}
	n3.awaitLeft(90 * time.Second)
	c.stopAndCompare(nodes[:2], 30*time.Second)
}

// TestCluster_OneTemplateForEveryReplica: every node gets the same
// arguments, as the replicas of a StatefulSet do (deploy/kubernetes): the
// three --peers lists found the cluster, a fourth with the same arguments
// joins it through --join, and all four hold what any of them took.
func TestCluster_OneTemplateForEveryReplica(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ports := freePorts(t, 8)
	secretFile := writeSecret(t, "one template secret")
	var peers []string
	for i := range 3 {
		peers = append(peers, fmt.Sprintf("n%d@127.0.0.1:%d", i+1, ports[4+i]))
	}
	var nodes []*qnode
	for i := range 4 {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		nodes = append(nodes, c.addNode(fmt.Sprintf("n%d", i+1), httpAddr, nil,
			"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[4+i]), "--retention-interval", "0",
			"--cluster-secret-file", secretFile, "--peers", strings.Join(peers, ","),
			"--join", "http://"+fmt.Sprintf("127.0.0.1:%d", ports[0])))
	}
	for _, n := range nodes[:3] {
		n.start()
	}
	c.waitLeader(nodes[:3], 30*time.Second)
	c.mustPush(nodes[:3], 10*time.Second, []pushItem{{Queue: "tpl", TransactionID: "founders", Payload: 1}})
	nodes[3].start()
	waitFor(t, 30*time.Second, "voters == 4 on every node", func() (bool, string) {
		hs, errs, desc := c.healths(nodes)
		for i, h := range hs {
			if errs[i] != nil || h.Code != 200 || h.Voters != 4 {
				return false, desc
			}
		}
		return true, desc
	})
	c.mustPush(nodes[3:], 10*time.Second, []pushItem{{Queue: "tpl", TransactionID: "joiner", Payload: 2}})
	c.stopAndCompare(nodes, 60*time.Second)
}

// TestCluster_JoinWithAWrongSecretExits: a node started with --join and a
// secret the cluster refuses exits non-zero at once, saying so, and leaves
// no data directory behind (before, it retried every 5 s for ever).
func TestCluster_JoinWithAWrongSecretExits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	c := startLoopback(t, 1, "--cluster-secret-file", writeSecret(t, "the right secret"))
	c.waitLeader(c.nodes, 30*time.Second)
	ports := freePorts(t, 2)
	data := filepath.Join(t.TempDir(), "joiner")
	cmd := exec.Command(queenBinary(t), "serve", "--data", data, "--node-id", "n9",
		"--http", fmt.Sprintf("127.0.0.1:%d", ports[0]), "--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--join", c.nodes[0].url(""), "--cluster-secret", "a wrong secret")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("queen serve --join with a wrong secret still running after 60 s: %s", out)
	}
	if err == nil || !strings.Contains(string(out), "refuses this node") || !strings.Contains(string(out), "403") {
		t.Fatalf("queen serve --join with a wrong secret: %v: %s (want exit 1 naming the refusal)", err, out)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused joiner left %s behind (%v)", data, err)
	}
}
