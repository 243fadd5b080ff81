package command_test

import (
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft/command"
)

// TestFootprint_EveryCommandIsListed walks the command table: every
// command type of the log has a footprint (engine.Touches), which says
// what it touches, so that a queue frozen for a move (engine/freeze.go)
// refuses it when it would change that queue and a node of several groups
// (cluster.Host) knows where to send it. A type added to the table without
// its case there fails here; at run time, while a queue is frozen, it
// would be refused (engine.ErrUnlistedCommand), never let through to write
// the queue.
func TestFootprint_EveryCommandIsListed(t *testing.T) {
	for _, row := range command.Rows() {
		c, ok := reflect.Zero(row.Command).Interface().(engine.Command)
		if !ok {
			t.Errorf("type %d: %v is not an engine.Command", row.Type, row.Command)
			continue
		}
		if _, listed := engine.Touches(c); !listed {
			t.Errorf("type %d (%v) has no footprint (engine/footprint.go Touches): say what it touches, or that it touches no queue", row.Type, row.Command)
		}
	}
}

// TestFootprint_Golden checks every command of the golden entries (every
// type of the table, with its fields set) against what it does: a command
// the freeze may refuse answers, refused, the zero of the type it answers
// when applied (Footprint.Answers), and a footprint that names queues,
// partitions or leases names some.
func TestFootprint_Golden(t *testing.T) {
	seen := map[command.Type]bool{}
	for _, g := range goldenEntries {
		for _, s := range g.cmds() {
			typ, _ := command.TypeOf(s.Cmd)
			fp, listed := engine.Touches(s.Cmd)
			if !listed {
				t.Errorf("%T has no footprint", s.Cmd)
				continue
			}
			seen[typ] = true
			switch fp.Reach {
			case engine.ReachNamed:
				// (An outbox transaction may carry only pushes to other
				// groups' queues, which its footprint leaves out.)
				if len(fp.Queues)+len(fp.Partitions)+len(fp.Leases) == 0 && typ != command.TypeOutboxTx {
					t.Errorf("%T: ReachNamed names nothing: %+v", s.Cmd, fp)
				}
			case engine.ReachConsumerGroup, engine.ReachEveryQueue:
			case engine.ReachMove:
				if fp.Group == 0 || len(fp.Queues) != 1 {
					t.Errorf("%T: a move's command names group %d, queues %q", s.Cmd, fp.Group, fp.Queues)
				}
				continue
			default:
				continue
			}
			h := enginetest.MustOpen(t)
			r := h.Apply(s.Cmd)
			if got, want := reflect.TypeOf(fp.Answers), reflect.TypeOf(r.Value); got != want {
				t.Errorf("%T: refused it would answer a %v, applied it answers a %v", s.Cmd, got, want)
			}
		}
	}
	for _, row := range command.Rows() {
		if !seen[row.Type] {
			t.Errorf("type %d (%v) is in no golden entry", row.Type, row.Command)
		}
	}
}
