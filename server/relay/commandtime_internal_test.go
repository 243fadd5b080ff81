package relay

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/raft"
)

// Each Raft group's entries are counted in series of their own.
func TestEntryMetrics_SeriesPerGroup(t *testing.T) {
	set := metrics.NewSet()
	record := EntryMetrics(set)
	record(raft.EntryTimes{Group: 1, Commands: 3, Queued: time.Millisecond, Committed: 2 * time.Millisecond})
	record(raft.EntryTimes{Group: 2, Commands: 5, Committed: time.Millisecond})
	record(raft.EntryTimes{Group: 2, Commands: 1, Committed: time.Millisecond})
	var b bytes.Buffer
	set.WritePrometheus(&b)
	out := b.String()
	for _, want := range []string{
		`queen_raft_entries_total{group="1"} 1`, `queen_raft_entry_commands_total{group="1"} 3`,
		`queen_raft_entries_total{group="2"} 2`, `queen_raft_entry_commands_total{group="2"} 6`,
		`queen_raft_entry_commit_seconds_count{group="2"} 2`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, out)
		}
	}
}
