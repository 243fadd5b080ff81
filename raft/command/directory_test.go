package command_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft/command"
)

func place(h *enginetest.Harness, queue string, group uint32) (uint32, error) {
	return enginetest.Run[uint32](h, command.PlaceQueue{Queue: queue, Group: group})
}

func TestPlaceQueue_SpreadsByCountAndKeepsTheFirstPlacement(t *testing.T) {
	h := enginetest.MustOpen(t)
	if _, err := place(h, "early", 0); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("placement before the directory knows the groups: err %v, want ErrInvalid", err)
	}
	if n := enginetest.Must[uint32](h, command.Groups{Count: 3}); n != 3 {
		t.Fatalf("Groups{3} answered %d", n)
	}
	// The first count stays: a node started with another --groups learns it.
	if n := enginetest.Must[uint32](h, command.Groups{Count: 5}); n != 3 {
		t.Fatalf("Groups{5} after Groups{3} answered %d, want 3", n)
	}
	// Least-loaded, lowest id first: 1, 2, 3, then 1 again; asked-for
	// groups count too.
	want := []uint32{1, 2, 3, 1, 2}
	for i, w := range want {
		if g, err := place(h, fmt.Sprintf("q%d", i), 0); err != nil || g != w {
			t.Fatalf("q%d placed in %d (%v), want %d", i, g, err, w)
		}
	}
	if g, err := place(h, "pinned", 3); err != nil || g != 3 {
		t.Fatalf("pinned placed in %d (%v), want 3", g, err)
	}
	if g, err := place(h, "next", 0); err != nil || g != 1 {
		t.Fatalf("next placed in %d (%v), want 1 (groups hold 2, 2, 2 queues)", g, err)
	}
	// A placement never moves, whatever a later command asks.
	if g, err := place(h, "q0", 2); err != nil || g != 1 {
		t.Fatalf("q0 placed again in %d (%v), want its first group 1", g, err)
	}
	for _, bad := range []command.PlaceQueue{{Queue: ""}, {Queue: "far", Group: 4}} {
		if _, err := place(h, bad.Queue, bad.Group); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", bad, err)
		}
	}
	// What applied survives a restart, read from the replica's values.
	h.Reopen()
	if n := command.GroupCount(h.ClusterValue); n != 3 {
		t.Fatalf("count after reopen %d", n)
	}
	for q, w := range map[string]uint32{"q0": 1, "q4": 2, "pinned": 3, "next": 1, "far": 0, "": 0} {
		if g := command.Placement(h.ClusterValue, q); g != w {
			t.Errorf("placement of %q after reopen %d, want %d", q, g, w)
		}
	}
}

func TestGroups_RefusesZero(t *testing.T) {
	h := enginetest.MustOpen(t)
	if _, err := enginetest.Run[uint32](h, command.Groups{}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("Groups{0}: err %v, want ErrInvalid", err)
	}
	if n := command.GroupCount(h.ClusterValue); n != 0 {
		t.Fatalf("a refused count was stored: %d", n)
	}
}

// LookupQueue answers a queue's group from the applied state, without a
// log entry (Skip) and, were it applied, without a write.
func TestLookupQueue_AnswersWithoutWriting(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 2})
	if g, err := place(h, "known", 2); err != nil || g != 2 {
		t.Fatalf("place: %d %v", g, err)
	}
	for q, want := range map[string]uint32{"known": 2, "unknown": 0} {
		r, ok := command.LookupQueue{Queue: q}.Skip(h.Engine, 0)
		if !ok || r.Value != want {
			t.Fatalf("Skip of lookup %q: %v %v, want %d", q, r.Value, ok, want)
		}
		before := h.Dump()
		if g := enginetest.Must[uint32](h, command.LookupQueue{Queue: q}); g != want {
			t.Fatalf("applied lookup %q answered %d, want %d", q, g, want)
		}
		if d := enginetest.DiffDumps(before, h.Dump()); strings.Contains(d, "place/") || strings.Contains(d, "placed/") {
			t.Fatalf("an applied lookup wrote a placement: %s", d)
		}
	}
	if g := command.Placement(h.ClusterValue, "unknown"); g != 0 {
		t.Fatalf("a lookup placed the queue in %d", g)
	}
}
