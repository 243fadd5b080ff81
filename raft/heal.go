package raft

import (
	"errors"
	"fmt"
	"strings"
	"time"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine/fault"
)

// Healing the engine (ARCHITECTURE.md, "Storage faults").
//
// The Raft log heals itself (raft/logstore). The engine cannot: after it
// reopens, the entries that raft handed over while it was faulted must be
// applied again from the log, in order, before anything else, and only the
// FSM knows which. So the node runs one healer: woken by the FSM when a
// batch fails, it reopens the engine and catches up (fsm.heal), backing off
// while that fails. A leader whose engine faults also hands leadership to
// another voter, if there is one, so that the cluster keeps serving.

// Healing paces: a first attempt after minHeal, then doubling up to maxHeal.
const (
	minHeal = 50 * time.Millisecond
	maxHeal = 5 * time.Second
)

func (n *Node) healLoop() {
	defer n.wg.Done()
	wait := fault.Backoff{Min: minHeal, Max: maxHeal}
	var (
		since time.Time // when the current fault began; zero when healthy
		last  string    // the last error logged
		retry <-chan time.Time
	)
	for {
		select {
		case <-n.fsm.faulted:
		case <-retry:
		case <-n.done:
			return
		}
		retry = nil
		if !n.fsm.behind() {
			continue
		}
		if since.IsZero() {
			since = time.Now()
			n.handOver()
		}
		err := n.fsm.heal()
		if err == nil {
			n.log.Info("raft: engine recovered from a storage fault", "after", time.Since(since).Round(time.Millisecond),
				"applied", n.engine.Applied())
			since, last = time.Time{}, ""
			wait.Reset()
			continue
		}
		if msg := err.Error(); msg != last {
			n.log.Warn("raft: engine still faulted", "err", err)
			last = msg
		}
		retry = time.After(wait.Next())
	}
}

// handOver transfers leadership away from a leader whose engine faulted,
// when another voter can take it.
func (n *Node) handOver() {
	if n.raft.State() != hraft.Leader {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == hraft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := n.raft.LeadershipTransfer().Error(); err != nil && !errors.Is(err, hraft.ErrRaftShutdown) {
			n.log.Warn("raft: hand leadership over after an engine fault", "err", err)
		}
	}()
}

// fault describes the node's storage faults for Status, "" when healthy.
func (n *Node) fault() string {
	var parts []string
	if err := n.store.Fault(); err != nil {
		parts = append(parts, "raft log: "+err.Error())
	}
	if err := n.engine.Fault(); err != nil {
		parts = append(parts, "engine: "+err.Error())
	} else if applied, fed := n.engine.Applied(), n.fsm.fedIndex(); applied < fed {
		parts = append(parts, fmt.Sprintf("engine: catching up after a fault (applied %d of %d)", applied, fed))
	}
	return strings.Join(parts, "; ")
}
