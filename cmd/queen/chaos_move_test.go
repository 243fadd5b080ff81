package main

// The fault-schedule test's moves (chaos_test.go, CHAOS_GROUPS above 1): a
// workload queue moved live to another Raft group under load, now and then
// with a kill -9 while it moves. ARCHITECTURE.md "Step 2, moving a queue"
// says why the checks need no change for it: a command the frozen queue
// refuses was applied nowhere (the clients count a 503 queue_moving as
// certainly not applied, chaosOutcome), partition ids, offsets, cursors,
// leases and dedup ids travel verbatim, so porcupine's per-partition model,
// the counting checks and the digests hold across a move as they do within
// a group.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// chaosMoveTimeout bounds one move request: a move whose group leaders are
// killed retries each step for 2 × PartWait (10 s) and undoes itself on
// its own 20 s deadline, so an answer takes well under this.
const chaosMoveTimeout = 90 * time.Second

// chaosMovesSettle bounds the wait, before the drain, for the directory to
// list no move under way: a move whose node was killed (move-orphan) is
// undone by the directory's leader once it is MoveTimeout (5 min) old,
// which no serve flag shortens.
const chaosMovesSettle = 7 * time.Minute

// moveResult is what a move fault asked and was told. The request runs on
// its own goroutine and may outlast the fault's hold: done is closed once
// it has answered.
type moveResult struct {
	queue    string
	from, to int
	via      string // the node asked, which runs the move
	killed   string // the node killed -9 during the move, "" for none
	// listed: the placement listed the move before the kill (else the
	// kill came on the move's answer, or after 15 s without either).
	listed  bool
	done    chan struct{}
	asks    int    // requests sent: a 409 cluster_version is asked again
	outcome string // done, refused <status> <code>, or error <detail>
	took    time.Duration
}

func (m *moveResult) String() string {
	s := fmt.Sprintf("%s %d->%d via %s", m.queue, m.from, m.to, m.via)
	if m.killed != "" {
		s += ", killed " + m.killed
		if !m.listed {
			s += " (not seen under way)"
		}
	}
	select {
	case <-m.done: // the request's goroutine has written asks, outcome and took
		if m.asks > 1 {
			s += fmt.Sprintf(", %d asks", m.asks)
		}
		return fmt.Sprintf("%s: %s in %v", s, m.outcome, m.took.Round(time.Millisecond))
	default:
		return s + ": no answer yet"
	}
}

// chaosPlacement is GET /api/v1/system/placement as the nemesis reads it.
type chaosPlacement struct {
	Groups []struct {
		ID      int      `json:"id"`
		Leader  string   `json:"leader"`
		Members []string `json:"members"`
	} `json:"groups"`
	Queues []struct {
		Queue string `json:"queue"`
		Group int    `json:"group"`
		Epoch int    `json:"epoch"`
	} `json:"queues"`
	Moves []chaosMoveRow `json:"moves"`
}

type chaosMoveRow struct {
	Queue    string `json:"queue"`
	From, To int
}

// placement reads the placement from the first running node that answers.
func (r *chaosRun) placement(rng *rand.Rand) (chaosPlacement, *qnode, error) {
	var p chaosPlacement
	err := fmt.Errorf("no node answered")
	nodes := r.members()
	for _, i := range rng.Perm(len(nodes)) {
		n := nodes[i]
		if !n.running() {
			continue
		}
		code, b, e := r.c.do(3*time.Second, "GET", n.url("/api/v1/system/placement"), nil)
		switch {
		case e != nil:
			err = e
		case code != http.StatusOK:
			err = fmt.Errorf("%s: %d %s", n.id, code, b)
		default:
			if err = json.Unmarshal(b, &p); err == nil {
				return p, n, nil
			}
		}
	}
	return p, nil, err
}

// startMove applies a move fault (faultMove, faultMoveOrphan): it picks a
// workload queue and another group for it, asks a node to move it, on a
// goroutine, and for move-orphan, or half the time for move, kills a node
// 0-100 ms after the placement lists the move under way: the leader of the
// source or the target group (never the node running the move: it asks a
// voter of the source group, which runs the move itself), or for
// move-orphan that node itself. It returns what heals the fault (the
// killed node started again), nil if none.
//
// A move answered 409 cluster_version is asked again, every 0.5 s for up
// to 20 s: a node counts a peer it cannot read as the oldest version
// (raft/version.go), so after each kill moves are refused until every
// node has read the restarted one again (every 5 s), and a schedule of
// kills would otherwise leave few moves done.
//
// With chaosConfig.moveSync the fault ends only once the move has
// answered: no later fault overlaps it (TestChaos_Moves: a later kill of
// the node running the move would leave the queue frozen for MoveTimeout).
func (r *chaosRun) startMove(rec *faultRecord, rng *rand.Rand) func() {
	queues := []string{chaosQueue}
	if r.split {
		queues = append(queues, chaosSideQueue)
	}
	m := &moveResult{queue: queues[rng.IntN(len(queues))], done: make(chan struct{})}
	p, _, err := r.placement(rng)
	if err != nil {
		rec.skipped = "(placement unknown: " + err.Error() + ")"
		return nil
	}
	for _, q := range p.Queues {
		if q.Queue == m.queue {
			m.from = q.Group
		}
	}
	groups := chaosGroups()
	if m.from == 0 {
		rec.skipped = fmt.Sprintf("(%s not placed in %+v)", m.queue, p.Queues)
		return nil
	}
	m.to = 1 + rng.IntN(groups-1)
	if m.to >= m.from {
		m.to++
	}
	leaders := map[int]*qnode{}
	var sourceVoters []string
	for _, g := range p.Groups {
		if n := r.byID(g.Leader); n != nil {
			leaders[g.ID] = n
		}
		if g.ID == m.from {
			sourceVoters = g.Members
		}
	}
	// Whom to kill, then whom to ask: a node that stays up, unless the
	// point is to kill the mover.
	var victim *qnode
	switch x := rng.IntN(4); {
	case rec.kind == faultMoveOrphan:
	case x < 2:
	case x == 2:
		victim = leaders[m.from]
	default:
		victim = leaders[m.to]
	}
	if r.isLeaving(victim) {
		victim = nil // its leave stops it
	}
	// Only a voter of the source group runs the move it is asked: another
	// node sends it to the source group's leader (cluster.Host.MoveQueue),
	// which may be the victim. With a kill to come, the move is asked of
	// a voter; without, of any node.
	voterOnly := victim != nil || rec.kind == faultMoveOrphan
	var askable []*qnode
	for _, n := range r.members() {
		if n.running() && n != victim && !r.isLeaving(n) && (!voterOnly || slices.Contains(sourceVoters, n.id)) {
			askable = append(askable, n)
		}
	}
	if len(askable) == 0 {
		rec.skipped = "(no running node to ask)"
		return nil
	}
	mover := askable[rng.IntN(len(askable))]
	if rec.kind == faultMoveOrphan {
		victim = mover
	}
	m.via = mover.id
	rec.move = m
	rec.target = m.queue
	go func() {
		defer close(m.done)
		start := time.Now()
		var (
			code int
			b    []byte
			err  error
			e    apiError
		)
		for {
			m.asks++
			code, b, err = r.c.do(chaosMoveTimeout, "POST",
				mover.url("/api/v1/system/queues/"+url.PathEscape(m.queue)+"/move"), fmt.Appendf(nil, `{"group":%d}`, m.to))
			e, _ = c2(b)
			if err != nil || code != http.StatusConflict || e.Code != "cluster_version" || time.Since(start) > 20*time.Second {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		m.took = time.Since(start)
		switch {
		case err != nil:
			m.outcome = "error " + err.Error()
		case code == http.StatusOK:
			m.outcome = "done"
		case code < 500:
			m.outcome = fmt.Sprintf("refused %d %s", code, e.Code)
		default:
			m.outcome = fmt.Sprintf("error %d %s", code, e.Code)
		}
	}()
	wait := func() {
		if r.cfg.moveSync {
			<-m.done
		}
	}
	if victim == nil {
		return wait
	}
	// Polls draw from a stream of their own: their count varies.
	m.listed = r.awaitMoveListed(m, rand.New(rand.NewPCG(rec.pick, 1)))
	time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	m.killed = victim.id
	victim.kill()
	return func() {
		victim.start()
		wait()
	}
}

// awaitMoveListed polls the placement until it lists m under way (true),
// or m is answered, or 15 s have passed.
func (r *chaosRun) awaitMoveListed(m *moveResult, rng *rand.Rand) bool {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-m.done:
			return false
		default:
		}
		if p, _, err := r.placement(rng); err == nil && slices.ContainsFunc(p.Moves, func(x chaosMoveRow) bool { return x.Queue == m.queue }) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// settleMoves waits for every move request to answer and then for the
// directory to list no move under way (a move whose runner died is undone
// by the directory's leader after MoveTimeout), and logs each move.
func (r *chaosRun) settleMoves() {
	var moves []*moveResult
	for _, f := range r.faults {
		if f.move != nil {
			moves = append(moves, f.move)
		}
	}
	if len(moves) == 0 {
		return
	}
	for _, m := range moves {
		<-m.done // each request is bounded by chaosMoveTimeout
	}
	rng := rand.New(rand.NewPCG(r.seed, 0x6d6f7665))
	start := time.Now()
	if p, n, err := r.placement(rng); err == nil && len(p.Moves) > 0 {
		r.t.Logf("moves under way at the end of the load, as %s lists them: %+v", n.id, p.Moves)
	}
	waitFor(r.t, chaosMovesSettle, "the directory to list no move under way", func() (bool, string) {
		p, n, err := r.placement(rng)
		if err != nil {
			return false, err.Error()
		}
		return len(p.Moves) == 0, fmt.Sprintf("%s lists %+v", n.id, p.Moves)
	})
	var lines []string
	for _, m := range moves {
		lines = append(lines, m.String())
	}
	r.t.Logf("CHAOS moves (settled after %v more): %s", time.Since(start).Round(time.Millisecond), strings.Join(lines, "; "))
}

// moveCounts counts the moves by how they ended, for the summary.
func (r *chaosRun) moveCounts() string {
	count := map[string]int{}
	for _, f := range r.faults {
		if f.move == nil {
			continue
		}
		outcome := "pending"
		select {
		case <-f.move.done:
			outcome, _, _ = strings.Cut(f.move.outcome, " ")
		default:
		}
		count[outcome]++
	}
	if len(count) == 0 {
		return ""
	}
	return fmt.Sprintf("; moves: %d done, %d refused, %d error, %d pending", count["done"], count["refused"], count["error"], count["pending"])
}
