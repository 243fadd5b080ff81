package meter

import (
	"io"
	"strconv"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft"
)

// Moves count the queue moves between Raft groups this node ran
// (cluster.HostOptions.OnMove): each is counted once in the cluster, by the
// node that ran its MoveQueue, or, for a move a stopped node left part
// way, by the directory's leader that undid it.
type Moves struct {
	Done, Failed, Aborted *metrics.Counter
	// Bytes are those of the chunks imported into targets, whatever the
	// move's result (a failed move's copy was work done, then dropped).
	Bytes *metrics.Counter
	// Seconds is the time of each done move, from its BeginMove.
	Seconds *metrics.PrometheusHistogram
}

// moveBuckets are queen_queue_move_seconds' upper bounds: an empty queue
// moves in well under a second, a queue of a few GB in tens of seconds
// (~100 MB/s), and a move undone after MoveTimeout (5 min) is not a done
// one.
var moveBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// NewMoves registers the move series in set.
func NewMoves(set *metrics.Set) *Moves {
	return &Moves{
		Done:    set.GetOrCreateCounter(`queen_queue_moves_total{result="done"}`),
		Failed:  set.GetOrCreateCounter(`queen_queue_moves_total{result="failed"}`),
		Aborted: set.GetOrCreateCounter(`queen_queue_moves_total{result="aborted"}`),
		Bytes:   set.GetOrCreateCounter(`queen_queue_move_bytes_total`),
		Seconds: set.GetOrCreatePrometheusHistogramExt(`queen_queue_move_seconds`, moveBuckets),
	}
}

// Record counts how a move ended (cluster.HostOptions.OnMove).
func (m *Moves) Record(o cluster.MoveOutcome) {
	switch o.Result {
	case "done":
		m.Done.Inc()
		m.Seconds.Update(o.Took.Seconds())
	case "failed":
		m.Failed.Inc()
	case "aborted":
		m.Aborted.Inc()
	}
	m.Bytes.Add(int(o.Bytes))
}

// WritePlacement writes, as this node's directory replica has them,
// queen_queue_moves_in_progress (the moves recorded and not ended) and
// queen_group_queues{group} for each data group of groups (the
// directory, 0, has none): how many queues the directory places in it.
func WritePlacement(w io.Writer, moves int, groups []uint32, placed func(group uint32) uint64) {
	metrics.WriteGaugeUint64(w, "queen_queue_moves_in_progress", uint64(moves))
	for _, g := range groups {
		if g != raft.Directory {
			metrics.WriteGaugeUint64(w, `queen_group_queues{group="`+strconv.FormatUint(uint64(g), 10)+`"}`, placed(g))
		}
	}
}
