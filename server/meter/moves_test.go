package meter

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/cluster"
)

// Each result has its counter; only a done move is timed; every move's
// bytes count, a failed one's too.
func TestMoves_Record(t *testing.T) {
	set := metrics.NewSet()
	m := NewMoves(set)
	m.Record(cluster.MoveOutcome{Queue: "q", From: 1, To: 2, Result: "done", Took: 3 * time.Second, Bytes: 100})
	m.Record(cluster.MoveOutcome{Queue: "q", From: 2, To: 1, Result: "failed", Took: time.Second, Bytes: 20})
	m.Record(cluster.MoveOutcome{Queue: "r", From: 1, To: 2, Result: "aborted"})
	var b bytes.Buffer
	set.WritePrometheus(&b)
	for _, line := range []string{
		`queen_queue_moves_total{result="done"} 1`,
		`queen_queue_moves_total{result="failed"} 1`,
		`queen_queue_moves_total{result="aborted"} 1`,
		`queen_queue_move_bytes_total 120`,
		`queen_queue_move_seconds_bucket{le="2.5"} 0`,
		`queen_queue_move_seconds_bucket{le="5"} 1`,
		`queen_queue_move_seconds_count 1`,
		`queen_queue_move_seconds_sum 3`,
	} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("no line %q in:\n%s", line, b.String())
		}
	}
}

// The directory (group 0) places no queue: only the data groups have a
// count.
func TestWritePlacement(t *testing.T) {
	var b bytes.Buffer
	WritePlacement(&b, 2, []uint32{0, 1, 2}, func(g uint32) uint64 { return uint64(10 * g) })
	want := `queen_queue_moves_in_progress 2
queen_group_queues{group="1"} 10
queen_group_queues{group="2"} 20
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
