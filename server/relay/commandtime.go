package relay

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
)

// TimedProposer is the broker's Proposer with the time each command takes,
// from the handler's call to its answer (prepare, the proposal queue, the
// Raft commit, the apply and the reads after it), in
// queen_command_duration_seconds{command}. Set beside
// queen_http_request_duration_seconds it says whether a slow request waited
// on the log or on the edge. Only answered commands are timed: a follower's
// ErrNotLeader (the request is relayed) and refusals are not. A pop
// answered empty from applied state (no proposal) is timed too, as the
// command it is.
type TimedProposer struct {
	p     raft.Proposer
	set   *metrics.Set
	hists sync.Map // reflect.Type -> *metrics.PrometheusHistogram
}

// NewTimedProposer times p's commands in set.
func NewTimedProposer(p raft.Proposer, set *metrics.Set) *TimedProposer {
	return &TimedProposer{p: p, set: set}
}

// Propose proposes c, and times it when it is answered.
func (t *TimedProposer) Propose(ctx context.Context, c engine.Command) (engine.Result, error) {
	start := time.Now()
	// A client's command: a grouped broker answers it once the group's
	// leader does, and this node's reads catch up (cluster.WithoutApplyWait).
	r, err := t.p.Propose(cluster.WithoutApplyWait(ctx), c)
	if err == nil {
		t.Hist(c).UpdateDuration(start)
	}
	return r, err
}

// Hist is the command type's histogram: PushCmd is command="push". A
// command answered elsewhere (a prepared push the leader proposed for
// another node) is timed in it by its caller.
func (t *TimedProposer) Hist(c engine.Command) *metrics.PrometheusHistogram {
	typ := reflect.TypeOf(c)
	if h, ok := t.hists.Load(typ); ok {
		return h.(*metrics.PrometheusHistogram)
	}
	name := strings.ToLower(strings.TrimSuffix(typ.Name(), "Cmd"))
	h := t.set.GetOrCreatePrometheusHistogram(`queen_command_duration_seconds{command="` + name + `"}`)
	t.hists.Store(typ, h)
	return h
}

// entryBuckets resolve the milliseconds a log entry's commit takes.
var entryBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5}

// EntryMetrics is raft.Options.OnEntry recording, in set, where each log
// entry's time went on the leader: queued behind the entries in flight,
// then proposed until applied. With queen_command_duration_seconds they
// split a slow command's time. Each series carries the entry's Raft group
// (group="1" on a node of one group).
func EntryMetrics(set *metrics.Set) func(raft.EntryTimes) {
	var groups sync.Map // uint32 -> *entrySeries
	return func(t raft.EntryTimes) {
		v, ok := groups.Load(t.Group)
		if !ok {
			v, _ = groups.LoadOrStore(t.Group, newEntrySeries(set, t.Group))
		}
		m := v.(*entrySeries)
		m.queued.Update(t.Queued.Seconds())
		m.committed.Update(t.Committed.Seconds())
		m.commands.Add(t.Commands)
		m.entries.Inc()
	}
}

// entrySeries is one group's entry metrics.
type entrySeries struct {
	queued, committed *metrics.PrometheusHistogram
	commands, entries *metrics.Counter
}

func newEntrySeries(set *metrics.Set, group uint32) *entrySeries {
	label := `{group="` + strconv.FormatUint(uint64(group), 10) + `"}`
	return &entrySeries{
		queued:    set.GetOrCreatePrometheusHistogramExt(`queen_raft_entry_queued_seconds`+label, entryBuckets),
		committed: set.GetOrCreatePrometheusHistogramExt(`queen_raft_entry_commit_seconds`+label, entryBuckets),
		commands:  set.GetOrCreateCounter(`queen_raft_entry_commands_total` + label),
		entries:   set.GetOrCreateCounter(`queen_raft_entries_total` + label),
	}
}
