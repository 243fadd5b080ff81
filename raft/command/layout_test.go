package command_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft/command"
)

func TestGroupLayout_KeepsTheLatestTermsReport(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 2})
	if n := enginetest.Must[uint32](h, command.Replicas{Count: 3}); n != 3 {
		t.Fatalf("Replicas{3} answered %d", n)
	}
	if n := enginetest.Must[uint32](h, command.Replicas{Count: 5}); n != 3 {
		t.Fatalf("Replicas{5} after Replicas{3} answered %d, want the first", n)
	}
	report := func(c command.GroupLayout) bool { return enginetest.Must[bool](h, c) }
	if !report(command.GroupLayout{Group: 1, Term: 4, Leader: "n2", Voters: []string{"n3", "n1", "n2"}}) {
		t.Fatal("the first report changed nothing")
	}
	if report(command.GroupLayout{Group: 1, Term: 4, Leader: "n2", Voters: []string{"n1", "n2", "n3"}}) {
		t.Fatal("the same report again changed the record")
	}
	// A deposed leader's late report (an older term) is ignored.
	if report(command.GroupLayout{Group: 1, Term: 3, Leader: "n1", Voters: []string{"n1"}}) {
		t.Fatal("a report from an older term changed the record")
	}
	if !report(command.GroupLayout{Group: 1, Term: 4, Leader: "n2", Voters: []string{"n1", "n2", "n3", "n4"}}) {
		t.Fatal("the same term's new voters were not recorded")
	}
	for _, bad := range []command.GroupLayout{{Group: 0, Term: 9}, {Group: 3, Term: 9}} {
		if _, err := enginetest.Run[bool](h, bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", bad, err)
		}
	}
	h.Reopen()
	got := command.LayoutOf(h.ClusterValue, 1)
	if got.Term != 4 || got.Leader != "n2" || !slices.Equal(got.Voters, []string{"n1", "n2", "n3", "n4"}) {
		t.Fatalf("record after reopen %+v", got)
	}
	if got := command.LayoutOf(h.ClusterValue, 2); got.Term != 0 || got.Leader != "" || got.Voters != nil {
		t.Fatalf("a group never reported reads %+v, want empty", got)
	}
	if n := command.ReplicaCount(h.ClusterValue); n != 3 {
		t.Fatalf("replicas after reopen %d", n)
	}
}

func TestReplicaStep_OneAtATimeAndOnlyItsOwnPhases(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 2})
	step := func(c command.ReplicaStep) bool { return enginetest.Must[bool](h, c) }
	if !step(command.ReplicaStep{Group: 1, Add: "n4", Remove: "n1"}) {
		t.Fatal("the first step was not recorded")
	}
	// A second step of the group is refused while one runs; another
	// group's is not.
	if step(command.ReplicaStep{Group: 1, Add: "n5", Remove: "n2"}) {
		t.Fatal("a second step of group 1 was recorded")
	}
	if !step(command.ReplicaStep{Group: 2, Add: "n4"}) {
		t.Fatal("group 2's step was refused")
	}
	// Phases for another step change nothing.
	if step(command.ReplicaStep{Group: 1, Add: "n5", Remove: "n2", Phase: command.StepReady}) ||
		step(command.ReplicaStep{Group: 1, Add: "n4", Phase: command.StepDone}) {
		t.Fatal("a phase of a step not recorded changed the record")
	}
	if !step(command.ReplicaStep{Group: 1, Add: "n4", Remove: "n1", Phase: command.StepReady}) {
		t.Fatal("ready was not recorded")
	}
	if step(command.ReplicaStep{Group: 1, Add: "n4", Remove: "n1", Phase: command.StepReady}) {
		t.Fatal("ready twice changed the record")
	}
	h.Reopen()
	if s, ok := command.StepOf(h.ClusterValue, 1); !ok || s.Add != "n4" || s.Remove != "n1" || s.Phase != command.StepReady {
		t.Fatalf("step after reopen %+v %v", s, ok)
	}
	if !step(command.ReplicaStep{Group: 1, Add: "n4", Remove: "n1", Phase: command.StepDone}) {
		t.Fatal("done was not recorded")
	}
	if _, ok := command.StepOf(h.ClusterValue, 1); ok {
		t.Fatal("a done step is still under way")
	}
	if !step(command.ReplicaStep{Group: 1, Add: "n5", Remove: "n2"}) {
		t.Fatal("a step after the first ended was refused")
	}
	for _, bad := range []command.ReplicaStep{{Group: 0, Add: "a"}, {Group: 3, Add: "a"}, {Group: 1}, {Group: 1, Add: "a", Remove: "a"}, {Group: 1, Add: "a", Phase: 3}} {
		if _, err := enginetest.Run[bool](h, bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", bad, err)
		}
	}
}
