package main

// The fault-schedule test's joins and leaves (chaos_test.go, CHAOS_GROUPS
// above 1): the founders are three nodes, so every group has a replica on
// each; a join fault starts a fourth node with --join, and the directory
// moves replicas onto it (cluster/rebalance.go: add as non-voter, catch up,
// promote, remove the old voter) while the schedule's kills, restarts,
// transfers and moves go on, which makes the cluster R of N. The next join
// fault asks the joiner to leave (`queen leave`: its replicas move away,
// then it is removed), and stops it; the one after starts a new node
// (n5, ...) in its place. One joiner at a time, so that in namespaces one
// spare namespace serves them all.
//
// The joiner is a member from its start: faults may kill, restart, pause
// or cut it off, except while its leave runs (the leave stops it). Clients
// send it requests once its /health answers 200, as a load balancer would,
// until its leave has answered.
//
// At the end (settleJoins): a leave still running is awaited; a leave that
// failed under the faults is asked again, now that they are healed, and
// must succeed; a joiner still a member must hold its share of the
// replicas (between floor and ceil of G·R/N), and the final comparison
// covers it, each group's replicas compared among its voters
// (stopAndCompareGroups).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// chaosLeaveTimeout bounds the wait for a leave and the joiner's stop: the
// leave command gives up after 60 s, the stop after 25 s.
const chaosLeaveTimeout = 3 * time.Minute

// leaveResult is what a leave fault asked and was told. The request runs on
// its own goroutine; done is closed once it has answered and, when it
// succeeded, the node has stopped.
type leaveResult struct {
	node    *qnode
	via     string
	held    string        // the data groups it was a voter of when asked
	at      time.Duration // since the load's start
	done    chan struct{}
	outcome string // done, or error <detail>
	took    time.Duration
}

func (l *leaveResult) String() string {
	if !isClosed(l.done) {
		return fmt.Sprintf("leave %s%s via %s at +%v: no answer yet", l.node.id, l.held, l.via, l.at)
	}
	return l.answered()
}

// answered describes the leave once its goroutine has its answer.
func (l *leaveResult) answered() string {
	return fmt.Sprintf("leave %s%s via %s at +%v: %s in %v", l.node.id, l.held, l.via, l.at, l.outcome, l.took.Round(time.Millisecond))
}

// members are the nodes of the cluster: the founders, then the joiner
// until it has left.
func (r *chaosRun) members() []*qnode {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	if r.joiner == nil {
		return r.c.nodes
	}
	return append(slices.Clone(r.c.nodes), r.joiner)
}

// serving are the nodes clients send requests to: the founders, and the
// joiner from its first /health 200 until its leave has answered.
func (r *chaosRun) serving() []*qnode {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	if r.joiner == nil || !r.joinerServes {
		return r.c.nodes
	}
	return append(slices.Clone(r.c.nodes), r.joiner)
}

// isLeaving reports whether n is the joiner while its leave runs.
func (r *chaosRun) isLeaving(n *qnode) bool {
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	return n != nil && r.leave != nil && r.leave.node == n && !isClosed(r.leave.done)
}

// byID is the member with that id, nil if none.
func (r *chaosRun) byID(id string) *qnode {
	for _, n := range r.members() {
		if n.id == id {
			return n
		}
	}
	return nil
}

// joinOrLeave applies a join fault: a new joiner when none is a member,
// else the joiner's leave (skipped while one runs).
func (r *chaosRun) joinOrLeave(rec *faultRecord, rng *rand.Rand) func() {
	r.joinMu.Lock()
	j, l := r.joiner, r.leave
	r.joinMu.Unlock()
	switch {
	case j == nil:
		r.join(rec, rng)
	case l != nil && l.node == j && !isClosed(l.done):
		rec.target, rec.skipped = j.id, "(its leave is under way)"
	default:
		via := r.c.nodes[rng.IntN(len(r.c.nodes))]
		r.startLeave(rec, j, via)
	}
	return nil
}

// join starts the next joiner through a random founder, and a goroutine
// that puts it in the clients' rotation once it answers /health 200.
func (r *chaosRun) join(rec *faultRecord, rng *rand.Rand) {
	via := rng.IntN(len(r.c.nodes))
	r.joinMu.Lock()
	id := fmt.Sprintf("n%d", len(r.c.nodes)+1+len(r.joiners))
	r.joinMu.Unlock()
	n := r.spawn(id, via)
	r.t.Cleanup(n.kill)
	n.start()
	r.joinMu.Lock()
	r.joiner, r.joinerServes = n, false
	r.joiners = append(r.joiners, n)
	r.joinMu.Unlock()
	rec.target = "join " + id + " via " + r.c.nodes[via].id
	go func() {
		for deadline := time.Now().Add(chaosLeaveTimeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			r.joinMu.Lock()
			gone := r.joiner != n
			r.joinMu.Unlock()
			if gone {
				return
			}
			if h, err := r.c.health(n); err == nil && h.Code == http.StatusOK {
				r.joinMu.Lock()
				r.joinerServes = r.joiner == n
				r.joinMu.Unlock()
				r.joinLog(fmt.Sprintf("%s serves from +%v", id, r.since(time.Now())))
				return
			}
		}
	}()
}

// startLeave asks, through via, that the joiner leave, on a goroutine; on
// success the joiner leaves the clients' rotation and the members, and
// stops.
func (r *chaosRun) startLeave(rec *faultRecord, j, via *qnode) *leaveResult {
	l := &leaveResult{node: j, via: via.id, at: r.since(time.Now()), done: make(chan struct{})}
	r.joinMu.Lock()
	r.leave = l
	r.joinMu.Unlock()
	if rec != nil {
		rec.target = "leave " + j.id + " via " + via.id
	}
	// What the leave has to move away, as the directory of via has it.
	if code, b, err := r.c.do(2*time.Second, "GET", via.url("/api/v1/system/placement?consistency=stale"), nil); err == nil && code == http.StatusOK {
		var p placementOf
		if json.Unmarshal(b, &p) == nil && len(p.Groups) > 0 {
			var voter []uint32
			for _, g := range p.Groups[1:] {
				if slices.Contains(g.Members, j.id) {
					voter = append(voter, g.ID)
				}
			}
			l.held = fmt.Sprintf(" (a voter of groups %v)", voter)
		}
	}
	bin := queenBinary(r.t)
	go func() {
		start := time.Now()
		out, err := exec.Command(bin, "leave", "--url", via.url(""), "--node-id", j.id,
			"--cluster-secret-file", r.secretFile).CombinedOutput()
		l.took = time.Since(start)
		if err != nil {
			l.outcome = fmt.Sprintf("error %v: %s", err, strings.TrimSpace(string(out)))
		} else {
			l.outcome = "done"
			r.joinMu.Lock()
			r.joiner, r.joinerServes = nil, false
			r.joinMu.Unlock()
			j.stop()
		}
		r.joinLog(l.answered())
		close(l.done)
	}()
	return l
}

// joinLog keeps a line for the end's report (the test may be past its log
// by the time a goroutine writes).
func (r *chaosRun) joinLog(line string) {
	r.joinMu.Lock()
	r.joinEvents = append(r.joinEvents, line)
	r.joinMu.Unlock()
}

// settleJoins runs after the faults are healed and the load stopped: it
// awaits a leave under way, asks again a leave that failed (it must now
// succeed), and, when a joiner is still a member, adds it to r.c.nodes for
// the final checks and waits for it to hold its share of the replicas.
func (r *chaosRun) settleJoins() {
	r.joinMu.Lock()
	l := r.leave
	r.joinMu.Unlock()
	wait := func(l *leaveResult) {
		select {
		case <-l.done:
		case <-time.After(chaosLeaveTimeout):
			r.t.Fatalf("%v after %v", l, chaosLeaveTimeout)
		}
	}
	if l != nil {
		wait(l)
	}
	r.joinMu.Lock()
	j := r.joiner
	r.joinMu.Unlock()
	if j != nil && l != nil && l.node == j {
		// The leave failed under the faults: healed, it must go through.
		l = r.startLeave(nil, j, r.c.nodes[0])
		wait(l)
		if l.outcome != "done" {
			r.t.Fatalf("%v, with every fault healed", l)
		}
		j = nil
	}
	if j != nil {
		r.c.nodes = append(r.c.nodes, j) // the load has stopped: nobody reads it
		groups := chaosGroups()
		waitFor(r.t, 120*time.Second, j.id+" to hold its share of the replicas", func() (bool, string) {
			return r.c.spreadOver(r.c.nodes, groups, 3)
		})
	}
	r.joinMu.Lock()
	defer r.joinMu.Unlock()
	if len(r.joiners) > 0 {
		r.t.Logf("CHAOS joins: %s; members at the end: %s", strings.Join(r.joinEvents, "; "), ids(r.c.nodes))
		r.t.Logf("CHAOS retired replicas (--retire-hold %s): %s", chaosRetireHold, retirements(append(slices.Clone(r.c.nodes), r.joiners...)))
	}
}

// chaosRetireHold is the chaos nodes' --retire-hold with groups: short, so
// that the replicas a join moves off a founder are retired (closed, their
// disk freed) while the faults go on, and a joiner's leave reopens them.
const chaosRetireHold = "2s"

// retirements counts, per node, the replicas its log says it retired
// (cluster/placed.go).
func retirements(nodes []*qnode) string {
	var out []string
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.logPath] {
			continue
		}
		seen[n.logPath] = true
		b, err := os.ReadFile(n.logPath)
		if err != nil {
			out = append(out, n.id+": "+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("%s %d", n.id, bytes.Count(b, []byte("retired a removed replica"))))
	}
	return strings.Join(out, ", ")
}
