package command_test

import (
	"errors"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft/command"
)

// TestMove_DirectoryRecord walks a move through the directory: begun (the
// same move again answers the same epoch; a second move, a queue not
// placed, its own group and a group past the count refused), ended (the
// placement flips with the next epoch and the counts follow; ending again
// answers the same), and a later move aborted (the placement stays). All
// of it survives a restart.
func TestMove_DirectoryRecord(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 3})
	if g, err := place(h, "orders", 1); err != nil || g != 1 {
		t.Fatalf("place: %d %v", g, err)
	}
	if ep := command.Epoch(h.ClusterValue, "orders"); ep != 1 {
		t.Fatalf("first epoch %d", ep)
	}
	begin := func(q string, to uint32) (uint64, error) {
		return enginetest.Run[uint64](h, command.BeginMove{Queue: q, To: to})
	}
	for _, bad := range []command.BeginMove{{Queue: "nowhere", To: 2}, {Queue: "orders", To: 1}, {Queue: "orders", To: 4}, {Queue: "orders"}} {
		if _, err := begin(bad.Queue, bad.To); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", bad, err)
		}
	}
	for range 2 {
		if ep, err := begin("orders", 2); err != nil || ep != 1 {
			t.Fatalf("begin: %d %v", ep, err)
		}
	}
	if _, err := begin("orders", 3); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("a second move: %v", err)
	}
	m, ok := command.MoveOf(h.ClusterValue, "orders")
	if !ok || m.From != 1 || m.To != 2 || m.Epoch != 1 || m.StartedAt == 0 {
		t.Fatalf("record %+v %v", m, ok)
	}
	if names := h.ClusterNames(command.MovePrefix); len(names) != 1 || names[0] != "move/orders" {
		t.Fatalf("moves listed: %v", names)
	}
	if _, err := enginetest.Run[uint64](h, command.EndMove{Queue: "orders", To: 3, Epoch: 1}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("end of another move: %v", err)
	}
	for range 2 {
		if ep, err := enginetest.Run[uint64](h, command.EndMove{Queue: "orders", To: 2, Epoch: 1}); err != nil || ep != 2 {
			t.Fatalf("end: %d %v", ep, err)
		}
	}
	h.Reopen()
	if g, ep := command.Placement(h.ClusterValue, "orders"), command.Epoch(h.ClusterValue, "orders"); g != 2 || ep != 2 {
		t.Fatalf("after the end: group %d epoch %d", g, ep)
	}
	if _, ok := command.MoveOf(h.ClusterValue, "orders"); ok {
		t.Fatal("the record outlived the end")
	}
	if names := h.ClusterNames(command.MovePrefix); len(names) != 0 {
		t.Fatalf("moves listed after the end: %v", names)
	}
	// The counts followed: the next queue placed freely lands in 1 (0
	// queues) rather than 2 (1 queue).
	if g, _ := place(h, "next", 0); g != 1 {
		t.Fatalf("next placed in %d", g)
	}
	if ep, err := begin("orders", 3); err != nil || ep != 2 {
		t.Fatalf("a second move: %d %v", ep, err)
	}
	if enginetest.Must[bool](h, command.AbortMove{Queue: "orders", Epoch: 1}) {
		t.Fatal("an abort of another epoch cleared the record")
	}
	if !enginetest.Must[bool](h, command.AbortMove{Queue: "orders", Epoch: 2}) {
		t.Fatal("the abort found no record")
	}
	if g, ep := command.Placement(h.ClusterValue, "orders"), command.Epoch(h.ClusterValue, "orders"); g != 2 || ep != 2 {
		t.Fatalf("after the abort: group %d epoch %d", g, ep)
	}
	if _, err := enginetest.Run[uint64](h, command.EndMove{Queue: "orders", To: 3, Epoch: 2}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("end of an aborted move: %v", err)
	}
}

// TestMove_AStepOfAnEarlierAttemptChangesNothing: an undone move leaves the
// placement's epoch, so the next attempt at the same move records the same
// (queue, to, epoch). A flip or an undo naming the first attempt (a retry
// whose answer was lost, a directory leader reading a replica behind)
// applied after the second began changes nothing; the second's own steps
// do. Steps that name no attempt (a cluster below command version 4)
// match any, as before.
func TestMove_AStepOfAnEarlierAttemptChangesNothing(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 3})
	if _, err := place(h, "orders", 1); err != nil {
		t.Fatal(err)
	}
	attempt := func() command.Move {
		t.Helper()
		if ep, err := enginetest.Run[uint64](h, command.BeginMove{Queue: "orders", To: 2}); err != nil || ep != 1 {
			t.Fatalf("begin: %d %v", ep, err)
		}
		m, ok := command.MoveOf(h.ClusterValue, "orders")
		if !ok {
			t.Fatal("no record")
		}
		h.Now++ // the next stamp
		return m
	}
	first := attempt()
	if !enginetest.Must[bool](h, command.AbortMove{Queue: "orders", Epoch: 1, StartedAt: first.StartedAt}) {
		t.Fatal("the first attempt's undo found no record")
	}
	second := attempt()
	if second.StartedAt == first.StartedAt {
		t.Fatalf("two attempts share a stamp: %+v %+v", first, second)
	}
	if enginetest.Must[bool](h, command.AbortMove{Queue: "orders", Epoch: 1, StartedAt: first.StartedAt}) {
		t.Fatal("the first attempt's undo, applied again, cleared the second's record")
	}
	if _, err := enginetest.Run[uint64](h, command.EndMove{Queue: "orders", To: 2, Epoch: 1, StartedAt: first.StartedAt}); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("the first attempt's flip during the second: %v, want ErrInvalid", err)
	}
	if m, ok := command.MoveOf(h.ClusterValue, "orders"); !ok || m != second || command.Placement(h.ClusterValue, "orders") != 1 {
		t.Fatalf("after the first attempt's steps: record %+v %v, group %d; want the second's record, group 1", m, ok, command.Placement(h.ClusterValue, "orders"))
	}
	h.Reopen()
	if ep, err := enginetest.Run[uint64](h, command.EndMove{Queue: "orders", To: 2, Epoch: 1, StartedAt: second.StartedAt}); err != nil || ep != 2 {
		t.Fatalf("the second attempt's flip: %d %v", ep, err)
	}
	// Ended: the flip answers its epoch again, whichever attempt asks.
	if ep, err := enginetest.Run[uint64](h, command.EndMove{Queue: "orders", To: 2, Epoch: 1, StartedAt: first.StartedAt}); err != nil || ep != 2 {
		t.Fatalf("a flip asked again after the end: %d %v", ep, err)
	}
	// A step that names no attempt matches any at its epoch.
	third := func() command.Move {
		if ep, err := enginetest.Run[uint64](h, command.BeginMove{Queue: "orders", To: 3}); err != nil || ep != 2 {
			t.Fatalf("begin: %d %v", ep, err)
		}
		m, _ := command.MoveOf(h.ClusterValue, "orders")
		return m
	}()
	if !enginetest.Must[bool](h, command.AbortMove{Queue: "orders", Epoch: third.Epoch}) {
		t.Fatal("an undo naming no attempt found no record")
	}
	for _, c := range []engine.Command{command.EndMove{Queue: "q", StartedAt: 1}, command.AbortMove{Queue: "q", StartedAt: 1}} {
		if v := command.Version(command.Stamped{Cmd: c}); v != 4 {
			t.Errorf("%T naming its attempt: command version %d, want 4", c, v)
		}
	}
	for _, c := range []engine.Command{command.EndMove{Queue: "q"}, command.AbortMove{Queue: "q"}} {
		if v := command.Version(command.Stamped{Cmd: c}); v != 2 {
			t.Errorf("%T naming none: command version %d, want 2 (what older binaries apply)", c, v)
		}
	}
}
