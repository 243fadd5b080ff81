package cluster

import (
	"testing"

	"github.com/queenmq/queen/raft/command"
)

// TestPickMove_NarrowsTheGapNeverInvertsIt walks the balancer's rule: the
// thresholds, the choice of the queue closest to half the gap without
// exceeding it, and what it leaves out.
func TestPickMove_NarrowsTheGapNeverInvertsIt(t *testing.T) {
	t.Parallel()
	load := func(g uint32, rate float64, qs ...command.QueueLoad) Load {
		return Load{GroupLoad: command.GroupLoad{Group: g, MsgsPerSec: rate, Queues: qs}}
	}
	q := func(name string, rate float64) command.QueueLoad {
		return command.QueueLoad{Queue: name, MsgsPerSec: rate}
	}
	pinned := q("stream-src", 390)
	pinned.Pinned = true
	rule := balanceRule{ratio: 1.5, floor: 500}
	none := func(c command.QueueLoad) bool { return c.Pinned }
	for _, tc := range []struct {
		name     string
		loads    []Load
		skip     func(command.QueueLoad) bool
		from, to uint32
		queue    string
		gap      bool
	}{
		{name: "one group", loads: []Load{load(1, 5000)}, skip: none},
		{name: "under the ratio", loads: []Load{load(1, 1400, q("a", 1400)), load(2, 1000)}, skip: none},
		{name: "under the floor", loads: []Load{load(1, 400, q("a", 400)), load(2, 0)}, skip: none},
		{name: "equal", loads: []Load{load(1, 900), load(2, 900), load(3, 900)}, skip: none},
		{
			// gap 1000, half 500: b (450) is closest without exceeding.
			name:  "closest to half the gap",
			loads: []Load{load(1, 200), load(2, 1200, q("a", 600), q("b", 450), q("c", 150)), load(3, 700)},
			skip:  none, from: 2, to: 1, queue: "b", gap: true,
		},
		{
			// the only queue is the whole load: moving it would invert.
			name:  "a single hot queue stays",
			loads: []Load{load(1, 3000, q("a", 3000)), load(2, 0)},
			skip:  none, from: 1, to: 2, gap: true,
		},
		{
			name:  "pinned and skipped left out",
			loads: []Load{load(1, 1000, pinned, q("moved", 380), q("small", 100)), load(2, 0)},
			skip:  func(c command.QueueLoad) bool { return c.Pinned || c.Queue == "moved" },
			from:  1, to: 2, queue: "small", gap: true,
		},
		{
			name:  "idle queues are not worth a move",
			loads: []Load{load(1, 1000, q("idle", 0)), load(2, 0)},
			skip:  none, from: 1, to: 2, gap: true,
		},
	} {
		from, to, got, gap := pickMove(tc.loads, rule, tc.skip)
		if gap != tc.gap || from != tc.from || to != tc.to || got.Queue != tc.queue {
			t.Errorf("%s: from %d to %d queue %q gap %v; want %d %d %q %v", tc.name, from, to, got.Queue, gap, tc.from, tc.to, tc.queue, tc.gap)
		}
	}
}
