package cluster_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/raft"
	"github.com/queenmq/queen/raft/command"
)

// hostInternal are the command types a Host proposes itself and never
// takes through Propose: node announcements and retention sweeps, the
// directory's placements and lookups, the group list, the outbox's
// commands (hostoutbox.go), a move's record in the directory, the record of where groups live, and prepared pushes
// (which arrive already bound to a group on the cluster path).
var hostInternal = map[command.Type]bool{
	command.TypeAnnounce:     true,
	command.TypeSweep:        true,
	command.TypePushPrepared: true,
	command.TypeGroups:       true,
	command.TypePlaceQueue:   true,
	command.TypeLookupQueue:  true,
	command.TypeLookupPart:   true,
	command.TypeLookupLease:  true,
	command.TypeOutboxTx:     true, // a TransactionCmd over groups becomes one
	command.TypeOutboxDelete: true,
	command.TypeBeginMove:    true, // the directory's record of a move (hostmove.go)
	command.TypeEndMove:      true,
	command.TypeAbortMove:    true,
	command.TypeReplicas:     true, // the directory's record of where groups live (hostlayout.go)
	command.TypeGroupLayout:  true,
	command.TypeReplicaStep:  true,
	command.TypeGroupLoad:    true, // the load signal (balance.go)
	command.TypeNodeLeaving:  true,
}

// proposedAs names, for a row whose log form is a prepared command, the
// command a caller proposes (Propose prepares it).
var proposedAs = map[command.Type]engine.Command{
	command.TypeStreamCycle: engine.StreamCycleCmd{},
}

// TestHost_EveryCommandHasARoute walks the command table: every command a
// client's request can build finds its groups, through its footprint
// (engine.Touches) or a line of its own in Host.route, and an answer the
// Host can give (a command sent to every group answers a value
// Host.everyGroup merges); the ones a Host proposes itself have no route. A command added to the table without either
// fails here, not at run time on a --groups cluster. (Checked by deleting
// the TraceCmd case from engine.Touches: this test then fails naming
// engine.TraceCmd, as TestFootprint_EveryCommandIsListed does.)
func TestHost_EveryCommandHasARoute(t *testing.T) {
	t.Parallel()
	c := openHosts(t, 1, 2)
	c.settled()
	h := c.h[0]
	for _, row := range command.Rows() {
		cmd, ok := proposedAs[row.Type]
		if !ok {
			cmd, ok = reflect.New(row.Command).Elem().Interface().(engine.Command)
		}
		if !ok {
			t.Errorf("type %d: %v is not an engine.Command", row.Type, row.Command)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// A zero command is mostly refused by its own validation; what
		// matters is whether Propose found groups for it.
		_, err := h.Propose(ctx, cmd)
		cancel()
		noRoute := errors.Is(err, raft.ErrNoRoute)
		switch {
		case hostInternal[row.Type] && !noRoute:
			t.Errorf("type %d (%v) is proposed by the Host itself, yet Propose routed it (err %v)", row.Type, row.Command, err)
		case !hostInternal[row.Type] && noRoute:
			t.Errorf("type %d (%v) has no route: give it a footprint (engine.Touches) the Host routes, or a line in Host.route", row.Type, row.Command)
		case errors.Is(err, raft.ErrResultType):
			// Routed to every group, its answers are merged by their
			// type (Host.everyGroup): one the merge does not know fails.
			t.Errorf("type %d (%v): the Host cannot answer it: %v", row.Type, row.Command, err)
		}
	}
}
