package command_test

import (
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft/command"
)

// TestFreeze_EveryCommandIsListed walks the command table: the freeze of a
// queue being moved (engine/freeze.go) names every command type of the
// log, as one that may change a queue (and which) or one that changes
// none. A type added to the table without its line there fails here; at
// run time, while a queue is frozen, it would be refused
// (engine.ErrUnlistedCommand), never let through to write the queue.
func TestFreeze_EveryCommandIsListed(t *testing.T) {
	for _, row := range command.Rows() {
		c, ok := reflect.Zero(row.Command).Interface().(engine.Command)
		if !ok {
			t.Errorf("type %d: %v is not an engine.Command", row.Type, row.Command)
			continue
		}
		if !engine.FreezeListed(c) {
			t.Errorf("type %d (%v) is not in the freeze's list (engine/freeze.go frozenTouch): say which queues it changes, or that it changes none", row.Type, row.Command)
		}
	}
}
