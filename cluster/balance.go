package cluster

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// The load signal and the balancer (issue 30 item 5; ARCHITECTURE.md
// "Step 2, balancing load").
//
// Every LoadInterval each data group's leader samples its replica: per
// queue the messages ever pushed (the sum of its partitions' next
// offsets) and the bytes of pushes applied (pushedBytes, counted by every
// replica as it applies), and reports to the directory the rates over the
// interval: the group's, and its MaxLoadQueues hottest queues'
// (command.GroupLoad). A queue first seen (created, moved in, or a new
// leader's first sample) has no rate until the next sample.
//
// The directory's leader, with HostOptions.Balance, then compares the
// groups by msgs/s: when the hottest carries more than BalanceRatio times
// the coolest AND more than BalanceFloor msgs/s above it, continuously for
// BalanceHold, it moves one queue from the hottest to the coolest, at most
// one move per BalanceCooldown. The queue is the one whose rate is
// closest to half the gap without exceeding it: the move narrows the gap
// and cannot invert it (hot−q ≥ cool+q), so the next look does not move it
// back. Queues of streams (pinned: they stay in group 1), queues moved by
// the balancer within the last two cooldowns, and queues with a move under
// way are left out. The move copies from a replica of the hottest group:
// when the directory's leader hosts none (groups on R of N nodes), it asks
// that group's leader to run it (Forwarder.StartMove).
//
// The defaults, and why: a move freezes the queue for its copy, a stall
// for its writers of roughly its bytes at 10-100 MB/s, so moves must be
// rare and worth it.
//
//   - BalanceRatio 1.5: below it the groups' leaders work within a third of
//     each other, which the spread of leaders over nodes swamps anyway.
//   - BalanceFloor 500 msgs/s: a gap smaller than that is a few percent of
//     one group's capacity (several thousand msgs/s on two cores) and not
//     worth a stall; it also keeps an idle cluster (1 msg/s against 0, an
//     infinite ratio) still.
//   - BalanceHold 60 s: six load intervals, so a burst or a batch job's
//     minute does not move a queue; a sustained imbalance does, within a
//     couple of minutes.
//   - BalanceCooldown 5 min: at most twelve stalls an hour in the whole
//     cluster, and each move's effect is seen in the reports (two
//     intervals at least) before the next is weighed.

// Load is a data group's last load report as the directory has it.
type Load = command.Load

// QueueLoad is one queue's part of a Load.
type QueueLoad = command.QueueLoad

// Load is group g's last load report as this node's directory replica has
// it (the zero Load, Group set, before any).
func (h *Host) Load(g uint32) Load {
	return command.LoadOf(h.directory().Engine().ClusterValue, g)
}

// loadSample is what a group's leader saw at its last sample.
type loadSample struct {
	at          time.Time
	msgs, bytes map[string]uint64
}

// balancer is the directory leader's memory between looks (loadLoop's
// goroutine's only, but for the move it starts).
type balancer struct {
	since time.Time            // when the current gap was first seen; zero: none
	last  time.Time            // when the last move started
	moved map[string]time.Time // queues the balancer moved, and when
	// busy is set while a move is being started (until the directory
	// records it, or refuses it); quiet is when the reports first cover
	// only time after the last move ended (UnixMicro).
	busy  atomic.Bool
	quiet atomic.Int64
}

// loadLoop reports this node's groups' loads and, on the directory's
// leader, balances, every LoadInterval.
func (h *Host) loadLoop() {
	defer h.wg.Done()
	t := time.NewTicker(h.opts.LoadInterval)
	defer t.Stop()
	prev := map[uint32]loadSample{}
	b := &balancer{moved: map[string]time.Time{}}
	for {
		select {
		case <-t.C:
		case <-h.done:
			return
		}
		if h.directory().ClusterVersion() < 3 {
			continue
		}
		for g := uint32(1); int(g) < len(h.nodes); g++ {
			h.reportLoad(g, prev)
		}
		h.balance(time.Now(), b)
	}
}

// reportLoad samples group g when this node leads it and reports the
// rates since the last sample to the directory.
func (h *Host) reportLoad(g uint32, prev map[uint32]loadSample) {
	n := h.replica(g)
	if n == nil || !n.IsLeader() {
		delete(prev, g)
		return
	}
	term := n.Term()
	qs, err := n.Engine().Queues()
	if err != nil {
		return
	}
	pinned, err := n.Engine().StreamQueues()
	if err != nil {
		return
	}
	now := time.Now()
	cur := loadSample{at: now, msgs: make(map[string]uint64, len(qs)), bytes: n.PushedBytes()}
	rep := command.GroupLoad{Group: g, Term: term}
	for _, q := range qs {
		var m uint64
		for _, p := range q.Partitions {
			m += uint64(max(p.Next, 0))
		}
		cur.msgs[q.Name] = m
		rep.Msgs += m
	}
	last, ok := prev[g]
	prev[g] = cur
	secs := now.Sub(last.at).Seconds()
	if !ok || secs <= 0 {
		return // a first sample: no rates yet
	}
	for name, m := range cur.msgs {
		was, seen := last.msgs[name]
		if !seen || m < was {
			continue // new here, or deleted and made again
		}
		bytes := cur.bytes[name] - min(last.bytes[name], cur.bytes[name])
		q := command.QueueLoad{Queue: name, Msgs: m, MsgsPerSec: float64(m-was) / secs,
			BytesPerSec: float64(bytes) / secs, Pinned: pinned[name]}
		rep.MsgsPerSec += q.MsgsPerSec
		rep.BytesPerSec += q.BytesPerSec
		rep.Queues = append(rep.Queues, q)
	}
	slices.SortFunc(rep.Queues, func(a, b command.QueueLoad) int {
		return cmp.Or(cmp.Compare(b.MsgsPerSec, a.MsgsPerSec), cmp.Compare(a.Queue, b.Queue))
	})
	rep.Queues = rep.Queues[:min(len(rep.Queues), command.MaxLoadQueues)]
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Node.ApplyTimeout)
	defer cancel()
	if _, err := h.run(ctx, raft.Directory, rep); err != nil && !errors.Is(err, raft.ErrShutdown) {
		n.Logger().Debug("raft: report the group's load", "err", err)
	}
}

// balanceRule is the balancer's thresholds (HostOptions.Balance*).
type balanceRule struct {
	ratio, floor float64
}

// pickMove applies the rule to one report per data group: gap says
// whether the hottest group is past both thresholds over the coolest, and
// q, when not empty, is the queue to move from group from to group to:
// the hottest group's queue whose rate is closest to half the gap without
// exceeding it, among those skip does not leave out.
func pickMove(loads []Load, r balanceRule, skip func(command.QueueLoad) bool) (from, to uint32, q command.QueueLoad, gap bool) {
	if len(loads) < 2 {
		return 0, 0, q, false
	}
	hot, cool := loads[0], loads[0]
	for _, l := range loads[1:] {
		if l.MsgsPerSec > hot.MsgsPerSec {
			hot = l
		}
		if l.MsgsPerSec < cool.MsgsPerSec {
			cool = l
		}
	}
	diff := hot.MsgsPerSec - cool.MsgsPerSec
	if hot.Group == cool.Group || hot.MsgsPerSec <= r.ratio*cool.MsgsPerSec || diff <= r.floor {
		return 0, 0, q, false
	}
	for _, c := range hot.Queues {
		if c.MsgsPerSec > 0 && c.MsgsPerSec <= diff/2 && c.MsgsPerSec > q.MsgsPerSec && !skip(c) {
			q = c
		}
	}
	return hot.Group, cool.Group, q, true
}

// balance is the directory leader's look at the loads (the top of this
// file): it starts one move when the rule has held for BalanceHold and
// the last move is BalanceCooldown ago.
func (h *Host) balance(now time.Time, b *balancer) {
	d := h.directory()
	if !h.opts.Balance || !d.IsLeader() || b.busy.Load() {
		b.since = time.Time{}
		return
	}
	if len(h.Moves()) > 0 {
		// A move runs (this balancer's, asked of another node, or an
		// operator's): weigh only reports from after it ends.
		b.since = time.Time{}
		b.quiet.Store(now.Add(2 * h.opts.LoadInterval).UnixMicro())
		return
	}
	// Every group's report must be recent (a group whose leader stopped
	// reporting is not weighed on an old figure) and cover only time
	// after the last move (a moved queue is not yet counted in its new
	// group for a sample).
	stale := now.Add(-3 * h.opts.LoadInterval).UnixMicro()
	var loads []Load
	for g := uint32(1); g <= h.GroupCount(); g++ {
		l := h.Load(g)
		if l.At < stale || l.At < b.quiet.Load() {
			b.since = time.Time{}
			return
		}
		loads = append(loads, l)
	}
	rest := 2 * h.opts.BalanceCooldown
	skip := func(q command.QueueLoad) bool {
		at, ok := b.moved[q.Queue]
		return q.Pinned || ok && now.Sub(at) < rest
	}
	from, to, q, gap := pickMove(loads, balanceRule{ratio: h.opts.BalanceRatio, floor: h.opts.BalanceFloor}, skip)
	switch {
	case !gap:
		b.since = time.Time{}
		return
	case b.since.IsZero():
		b.since = now
	}
	if now.Sub(b.since) < h.opts.BalanceHold || (!b.last.IsZero() && now.Sub(b.last) < h.opts.BalanceCooldown) || q.Queue == "" {
		return
	}
	if h.Placement(q.Queue) != from {
		return // moved or deleted since the report
	}
	// MoveQueue copies from a replica of the source: a node that hosts
	// none (groups on R of N nodes) asks the source group's leader to run
	// the move (Forwarder.StartMove).
	local := h.hosts(from)
	var addr string
	if !local {
		if addr = h.leaderOf(from).LeaderHTTP; addr == "" || h.opts.Forward == nil {
			d.Logger().Debug("raft: balance: the hottest group's leader is not known here; no move yet", "from", from)
			return
		}
	}
	maps.DeleteFunc(b.moved, func(_ string, at time.Time) bool { return now.Sub(at) >= rest })
	b.since, b.last, b.moved[q.Queue] = time.Time{}, now, now
	d.Logger().Info("raft: balance: moving a queue from the hottest group to the coolest", "queue", q.Queue,
		"from", from, "to", to, "queue_msgs_per_sec", q.MsgsPerSec,
		"from_msgs_per_sec", loads[from-1].MsgsPerSec, "to_msgs_per_sec", loads[to-1].MsgsPerSec, "by", cmp.Or(addr, "this node"))
	b.busy.Store(true)
	h.wg.Go(func() {
		defer b.busy.Store(false)
		ctx, cancel := h.untilClose(context.Background())
		defer cancel()
		ctx, cancelT := context.WithTimeout(ctx, h.opts.Node.ApplyTimeout)
		defer cancelT()
		// The move runs on in the background, here or there; balance sees
		// it under way in the directory's records (Moves) and waits for
		// it to end.
		var err error
		if local {
			err = h.StartMove(ctx, q.Queue, to)
		} else {
			err = h.opts.Forward.StartMove(ctx, addr, q.Queue, to)
		}
		b.quiet.Store(time.Now().Add(2 * h.opts.LoadInterval).UnixMicro())
		if err != nil {
			d.Logger().Warn("raft: balance: the move did not start", "queue", q.Queue, "from", from, "to", to,
				"by", cmp.Or(addr, "this node"), "err", err)
		}
	})
}
