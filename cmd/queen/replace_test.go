package main

// Process-level tests of replacing a node whose disk is gone (README.md,
// "Runbook"): the old id removed with `queen leave --force`, a new node
// with an empty directory and a new id joins with --join, catches up by
// snapshot, and the cluster is back to three voters with nothing lost.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReplace_NodeWithLostDisk replaces a node of a three-node cluster of
// one Raft group under push load.
func TestReplace_NodeWithLostDisk(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	replaceNode(t, 1)
}

// TestReplace_NodeWithLostDiskGroups is the same with --groups 3: the old
// id leaves every group and the new node joins, and installs a snapshot
// of, every group.
func TestReplace_NodeWithLostDiskGroups(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	replaceNode(t, 3)
}

// Snapshots are taken often and keep few entries behind them, so that
// every group's leader has dropped the start of its log before the new
// node asks for it: the new node can only catch up from a snapshot.
const replaceTrailing = 4

// replaceNode starts three nodes (--groups groups), pushes to queues of
// every group through every node (loadGroups: bounded in count and time)
// and meanwhile kills a node, deletes its data directory, removes its id
// and has a new node join in its place. Then every push answered queued
// is counted alike by every node's linearizable read and popped through
// the new node, and the replicas of every group end identical.
func replaceNode(t *testing.T, groups int) {
	began := time.Now()
	secret := writeSecret(t, "replace secret")
	common := []string{"--cluster-secret-file", secret, "--snapshot-threshold", "8",
		"--trailing-logs", strconv.Itoa(replaceTrailing), "--snapshot-interval", "500ms"}
	if groups > 1 {
		common = append(common, "--groups", strconv.Itoa(groups))
	}
	c := startLoopback(t, 3, common...)
	groupIDs := []uint32{1}
	queues := []string{"ra", "rb", "rc"}
	loaded := queues
	if groups > 1 {
		groupIDs = nil
		for g := range groups + 1 { // the directory, 0, and the data groups
			groupIDs = append(groupIDs, uint32(g))
		}
		// Twelve queues, each placed by an entry of the directory: enough
		// for it to snapshot past its first entries too. The load goes to
		// the first six.
		queues = []string{"ra", "rb", "rc", "rd", "re", "rf", "rg", "rh", "ri", "rj", "rk", "rl"}
		loaded = queues[:6]
		c.waitSpread(c.nodes, groups)
	} else {
		c.waitLeader(c.nodes, 30*time.Second)
	}
	// Place the queues before the load, so that it pushes to every group.
	var items []pushItem
	for _, q := range queues {
		items = append(items, pushItem{Queue: q, TransactionID: "first-" + q, Payload: 0})
	}
	c.mustPush(c.nodes, 30*time.Second, items)
	if groups > 1 {
		placed := map[uint32]bool{}
		for _, g := range c.queueGroups(c.nodes[0], loaded) {
			placed[g] = true
		}
		if len(placed) != groups {
			t.Fatalf("the queues %v landed in %d of the %d data groups", loaded, len(placed), groups)
		}
	}
	t.Logf("cluster up and queues placed at +%v", time.Since(began).Round(time.Millisecond))

	var (
		victim, joiner *qnode
		survivors      []*qnode
		replaced       time.Duration
	)
	acked := c.loadGroups(t, loaded, func() {
		victim = c.replaceVictim(groups)
		survivors = c.others(victim)
		victim.kill()
		if err := os.RemoveAll(victim.dir); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		t.Logf("kill -9 %s and removed its data directory at +%v", victim.id, time.Since(began).Round(time.Millisecond))

		// The exact commands of README.md, "Replace a node".
		c.leaveForce(survivors[0], victim.id, secret)
		c.waitVoters(survivors, groups, 2)
		for _, g := range groupIDs {
			waitFor(t, 30*time.Second, fmt.Sprintf("every survivor to drop the start of group %d's log", g), func() (bool, string) {
				var desc []string
				ok := true
				for _, n := range survivors {
					idx := latestSnapshot(groupDirOf(n.dir, g))
					ok = ok && idx > replaceTrailing
					desc = append(desc, fmt.Sprintf("%s: snapshot at %d", n.id, idx))
				}
				return ok, strings.Join(desc, ", ")
			})
		}
		ports := freePorts(t, 2)
		httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		args := append([]string{"--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--retention-interval", "0", "--join", survivors[1].url("")}, common...)
		joiner = c.addNode("n4", httpAddr, nil, args...) // an empty directory
		joiner.start()
		live := append(slices.Clone(survivors), joiner)
		// Each group's snapshot is kept as it came from the leader (a full
		// stream; a node's own snapshots are references): poll for every
		// group's before the joiner takes two of its own and drops it.
		installed := map[uint32]uint64{}
		waitFor(t, 60*time.Second, joiner.id+" to install a snapshot of every group", func() (bool, string) {
			for _, g := range groupIDs {
				if idx := installedSnapshot(groupDirOf(joiner.dir, g)); idx > 0 && installed[g] == 0 {
					installed[g] = idx
				}
			}
			return len(installed) == len(groupIDs), fmt.Sprintf("installed (group: index) %v", installed)
		})
		c.waitVoters(live, groups, 3)
		replaced = time.Since(start)
		t.Logf("%s replaced %s in %v (leave, snapshots, join, 3 voters everywhere); snapshots installed (group: index): %v",
			joiner.id, victim.id, replaced.Round(time.Millisecond), installed)
	})
	// From here on the cluster is the survivors and the new node.
	c.nodes = append(slices.Clone(survivors), joiner)

	// Every node counts every queue alike with a linearizable read, and
	// counts every acknowledged push.
	totals := map[string]int{}
	for _, q := range queues {
		waitFor(t, 30*time.Second, "every node to count queue "+q+" alike", func() (bool, string) {
			var counts []int
			for _, n := range c.nodes {
				k, err := c.queueTotal(n, q)
				if err != nil {
					return false, fmt.Sprintf("%s: %v", n.id, err)
				}
				counts = append(counts, k)
			}
			totals[q] = counts[0]
			return counts[0] == counts[1] && counts[1] == counts[2], fmt.Sprintf("%s: %v", ids(c.nodes), counts)
		})
		// The first push, and the load's acknowledged ones (a push whose
		// answer was lost may be stored too: at least that many).
		if want := 1 + len(acked[q]); totals[q] < want {
			t.Errorf("queue %s: the nodes count %d messages, %d pushes were answered queued", q, totals[q], want)
		}
	}
	// Every message is popped through the new node, every acknowledged
	// push among them.
	for _, q := range queues {
		got := c.popAll(joiner, q)
		if len(got) != totals[q] {
			t.Errorf("queue %s: popped %d messages through %s, the nodes counted %d", q, len(got), joiner.id, totals[q])
		}
		var lost []string
		for _, txn := range append([]string{"first-" + q}, acked[q]...) {
			if !got[txn] {
				lost = append(lost, txn)
			}
		}
		if len(lost) > 0 {
			t.Errorf("queue %s: %d acknowledged pushes not popped, e.g. %v", q, len(lost), head(lost, 10))
		}
	}
	if groups > 1 {
		c.stopAndCompareGroups(groups)
	} else {
		c.stopAndCompare(c.nodes, 60*time.Second)
	}
	t.Logf("replace with --groups %d: replacement %v, whole test %v", groups, replaced.Round(time.Millisecond),
		time.Since(began).Round(time.Millisecond))
}

// replaceVictim picks the node to lose: a follower of the one group, or
// with groups a node that does not lead the directory (every node leads
// a data group then).
func (c *cluster) replaceVictim(groups int) *qnode {
	c.t.Helper()
	if groups > 1 {
		dir := c.waitSpread(c.nodes, groups)[0]
		for _, n := range c.nodes {
			if n.id != dir {
				return n
			}
		}
	}
	leader := c.waitLeader(c.nodes, 30*time.Second)
	return c.others(leader)[0]
}

// waitVoters waits until every node of nodes counts want voters in every
// group (groups > 1) or in the one group.
func (c *cluster) waitVoters(nodes []*qnode, groups, want int) {
	c.t.Helper()
	if groups > 1 {
		c.votersEverywhere(nodes, groups, want)
		return
	}
	waitFor(c.t, 60*time.Second, fmt.Sprintf("%d voters on %s", want, ids(nodes)), func() (bool, string) {
		hs, errs, desc := c.healths(nodes)
		for i, h := range hs {
			if errs[i] != nil || h.Code != http.StatusOK || h.Voters != want {
				return false, desc
			}
		}
		return true, desc
	})
}

// leaveForce runs `queen leave --force` for id through node via, until it
// succeeds: a group whose leader was the lost node elects a new one first.
func (c *cluster) leaveForce(via *qnode, id, secretFile string) {
	c.t.Helper()
	attempts, first := 0, ""
	waitFor(c.t, 30*time.Second, "queen leave --force --node-id "+id, func() (bool, string) {
		attempts++
		out, err := exec.Command(queenBinary(c.t), "leave", "--url", via.url(""), "--node-id", id, "--force",
			"--cluster-secret-file", secretFile).CombinedOutput()
		if err == nil && !strings.Contains(string(out), "removed "+id) {
			c.t.Fatalf("queen leave: %s", out)
		}
		if err != nil && first == "" {
			first = strings.TrimSpace(string(out))
		}
		return err == nil, fmt.Sprintf("%v: %s", err, out)
	})
	c.t.Logf("queen leave --force --node-id %s via %s: removed after %d attempt(s); the first refusal: %q", id, via.id, attempts, first)
}

// groupDirOf is where group g keeps its engine and snapshots in a node's
// data directory (raft.groupDir).
func groupDirOf(dir string, g uint32) string {
	if g == 1 {
		return dir
	}
	return filepath.Join(dir, "groups", strconv.FormatUint(uint64(g), 10))
}

// installedSnapshot returns the index of the newest snapshot in group
// directory gdir that came from a leader, 0 when there is none. A node's
// own snapshots are 13-byte references to its engine (raft/snapstore.go);
// one installed from a leader is the full stream of the leader's engine.
func installedSnapshot(gdir string) uint64 {
	var best uint64
	filepath.WalkDir(filepath.Join(gdir, "snapshots"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "meta.json" {
			return nil
		}
		b, err := os.ReadFile(p)
		var meta struct{ Index, Size uint64 }
		if err == nil && json.Unmarshal(b, &meta) == nil && meta.Size > 13 && meta.Index > best {
			best = meta.Index
		}
		return nil
	})
	return best
}

// queueTotal is a queue's totals.total by a linearizable read on n.
func (c *cluster) queueTotal(n *qnode, q string) (int, error) {
	code, b, err := c.do(10*time.Second, "GET", n.url("/api/v1/resources/queues/"+q), nil)
	if err != nil {
		return 0, err
	}
	var info struct {
		Totals *struct{ Total int } `json:"totals"`
	}
	if code != http.StatusOK || json.Unmarshal(b, &info) != nil || info.Totals == nil {
		return 0, fmt.Errorf("%d %s", code, b)
	}
	return info.Totals.Total, nil
}

// popAll pops queue q through n with autoAck until it answers 204 and
// returns the transaction ids it got; it fails the test on a message
// delivered twice.
func (c *cluster) popAll(n *qnode, q string) map[string]bool {
	c.t.Helper()
	got := map[string]bool{}
	waitFor(c.t, 60*time.Second, "popping queue "+q+" through "+n.id+" to its end", func() (bool, string) {
		code, b, err := c.do(20*time.Second, "GET", n.url("/api/v1/pop/queue/"+q+"?batch=1000&autoAck=true"), nil)
		if err != nil || code >= 500 {
			return false, fmt.Sprintf("%d %v %s", code, err, b) // retried
		}
		if code == http.StatusNoContent {
			return true, ""
		}
		var pop popResponse
		if code != http.StatusOK || json.Unmarshal(b, &pop) != nil {
			c.t.Fatalf("pop %s via %s: %d %s", q, n.id, code, b)
		}
		for _, m := range pop.Messages {
			if got[m.TransactionID] {
				c.t.Fatalf("pop %s via %s: %s delivered twice", q, n.id, m.TransactionID)
			}
			got[m.TransactionID] = true
		}
		return false, fmt.Sprintf("%d popped so far", len(got))
	})
	return got
}
