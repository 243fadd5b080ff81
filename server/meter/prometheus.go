package meter

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/server/diskspace"
)

// Bool is a yes-or-no gauge's value: 1 for true.
func Bool(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// labelEscaper escapes what the Prometheus text format escapes in a label
// value: backslash, double quote and newline.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// LabelValue escapes a Prometheus label value.
func LabelValue(v string) string { return labelEscaper.Replace(v) }

// WriteRaft writes the node's Raft view and the broker's storage state:
// queen_raft_{applied_index,term,has_leader,is_leader},
// queen_storage_errors_total, queen_storage_faulted and
// queen_raft_foreign_peers_refused_total.
func WriteRaft(w io.Writer, st raft.Status) {
	metrics.WriteGaugeUint64(w, "queen_raft_applied_index", st.Applied)
	metrics.WriteGaugeUint64(w, "queen_raft_term", st.Term)
	metrics.WriteGaugeUint64(w, "queen_raft_has_leader", Bool(st.HasLeader()))
	metrics.WriteGaugeUint64(w, "queen_raft_is_leader", Bool(st.Role == "leader"))
	metrics.WriteCounterUint64(w, "queen_storage_errors_total", st.StorageErrors)
	metrics.WriteGaugeUint64(w, "queen_storage_faulted", Bool(st.Fault != ""))
	metrics.WriteCounterUint64(w, "queen_raft_foreign_peers_refused_total", st.ForeignPeers)
}

// WriteGroup writes one Raft group's view on this node (a broker with
// --groups): queen_raft_group_{applied_index,term,has_leader,is_leader}{group}.
func WriteGroup(w io.Writer, group uint32, st raft.Status) {
	label := `{group="` + strconv.FormatUint(uint64(group), 10) + `"}`
	metrics.WriteGaugeUint64(w, "queen_raft_group_applied_index"+label, st.Applied)
	metrics.WriteGaugeUint64(w, "queen_raft_group_term"+label, st.Term)
	metrics.WriteGaugeUint64(w, "queen_raft_group_has_leader"+label, Bool(st.HasLeader()))
	metrics.WriteGaugeUint64(w, "queen_raft_group_is_leader"+label, Bool(st.Role == "leader"))
}

// WriteVoters writes, for each group of l (a Host's layout: the directory
// first, each group's voters as this node sees them: its own replica's
// configuration, or the directory's record of a group it does not host),
// queen_raft_group_voters{group}, and then queen_groups_under_replicated:
// how many groups have fewer voters than they want (cluster.WantedVoters:
// replicas for a data group, none with replicas 0; min(5, nodes) for the
// directory), as cluster.UnderReplicated counts them. A data group on two
// voters of three loses its quorum with one more lost node: the count
// Kafka calls UnderReplicatedPartitions.
func WriteVoters(w io.Writer, l raft.Layout, replicas uint32) {
	for _, g := range l.Groups {
		metrics.WriteGaugeUint64(w, `queen_raft_group_voters{group="`+strconv.FormatUint(uint64(g.ID), 10)+`"}`, uint64(len(g.Members)))
	}
	metrics.WriteGaugeUint64(w, "queen_groups_under_replicated", uint64(len(cluster.UnderReplicated(l, replicas))))
}

// WriteQueueGroups writes queen_queue_group{queue}, the Raft group that
// holds each queue (where its writes go), as placement says.
func WriteQueueGroups(w io.Writer, qs []engine.QueueInfo, placement func(queue string) uint32) {
	for _, q := range qs {
		metrics.WriteGaugeUint64(w, `queen_queue_group{queue=`+strconv.Quote(q.Name)+`}`, uint64(placement(q.Name)))
	}
}

// WriteStorage writes the storage gauges of v:
// queen_storage_free_bytes{dir} (each directory that could be read),
// queen_storage_reserve_bytes, queen_storage_below_reserve (this node's
// guard) and queen_storage_nodes_below_reserve (the nodes reporting to
// this one).
func WriteStorage(w io.Writer, v diskspace.View) {
	for _, d := range v.Guard.Dirs {
		if d.Err == nil {
			metrics.WriteGaugeUint64(w, `queen_storage_free_bytes{dir="`+LabelValue(d.Path)+`"}`, d.Free)
		}
	}
	metrics.WriteGaugeUint64(w, "queen_storage_reserve_bytes", v.Guard.MinFreeBytes)
	metrics.WriteGaugeUint64(w, "queen_storage_below_reserve", Bool(v.Guarded && !v.Guard.OK))
	metrics.WriteGaugeUint64(w, "queen_storage_nodes_below_reserve", v.LowNodes())
}

// DLQSource is what WriteDLQDepth reads of the broker (package server's
// Broker has these methods).
type DLQSource interface {
	Queues() ([]engine.QueueInfo, error)
	Cursors(now int64, group string) ([]engine.CursorInfo, error)
	ListDLQ(f engine.DLQFilter) ([]engine.DeadLetter, int, error)
}

// WriteDLQDepth writes queen_dlq_depth{queue} and
// queen_dlq_depth_by_group{queue,group} for the groups with a cursor on the
// queue. The counts come from the DLQ indexes, not from reading rows.
func WriteDLQDepth(w io.Writer, b DLQSource) error {
	qs, err := b.Queues()
	if err != nil {
		return err
	}
	cursors, err := b.Cursors(time.Now().UnixMicro(), "")
	if err != nil {
		return err
	}
	groups := map[string][]string{} // by queue, in group order
	seen := map[[2]string]bool{}
	for i := range cursors {
		k := [2]string{cursors[i].Queue, cursors[i].Group}
		if !seen[k] {
			seen[k] = true
			groups[k[0]] = append(groups[k[0]], k[1])
		}
	}
	for i := range qs {
		q := qs[i].Name
		_, total, err := b.ListDLQ(dlqCount(q, ""))
		if err != nil {
			return err
		}
		metrics.WriteGaugeUint64(w, `queen_dlq_depth{queue="`+LabelValue(q)+`"}`, uint64(total))
		for _, g := range groups[q] {
			_, n, err := b.ListDLQ(dlqCount(q, g))
			if err != nil {
				return err
			}
			metrics.WriteGaugeUint64(w, `queen_dlq_depth_by_group{queue="`+LabelValue(q)+`",group="`+LabelValue(g)+`"}`, uint64(n))
		}
	}
	return nil
}

// dlqCount is a filter whose only use is its total.
func dlqCount(queue, group string) engine.DLQFilter {
	return engine.DLQFilter{Queue: queue, Group: group, Limit: 1}
}
