package command_test

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
	"github.com/queenmq/queen/raft/command"
)

// TestGroupLoad_StoresTheLatestTermsReport: a report is stored with its
// stamp and read back whole after a reopen; a deposed leader's late
// report (an older term) changes nothing; a later report of the same term
// replaces the last.
func TestGroupLoad_StoresTheLatestTermsReport(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 3})
	report := func(c command.GroupLoad) bool { return enginetest.Must[bool](h, c) }
	first := command.GroupLoad{Group: 2, Term: 4, Msgs: 5000, MsgsPerSec: 250.5, BytesPerSec: 1e6,
		Queues: []command.QueueLoad{
			{Queue: "orders", Msgs: 4000, MsgsPerSec: 200, BytesPerSec: 8e5},
			{Queue: "naïve queue", Msgs: 1000, MsgsPerSec: 50.5, BytesPerSec: 2e5, Pinned: true},
		}}
	h.Now = 1_000_000
	if !report(first) {
		t.Fatal("the first report was not stored")
	}
	h.Now = 2_000_000
	if report(command.GroupLoad{Group: 2, Term: 3, MsgsPerSec: 9999}) {
		t.Fatal("a report from an older term was stored")
	}
	h.Reopen()
	got := command.LoadOf(h.ClusterValue, 2)
	if got.At != 1_000_000 || !reflect.DeepEqual(got.GroupLoad, first) {
		t.Fatalf("stored %+v, want %+v at 1000000", got, first)
	}
	if got := command.LoadOf(h.ClusterValue, 1); got.At != 0 || got.Term != 0 || got.Queues != nil {
		t.Fatalf("a group never reported reads %+v, want empty", got)
	}
	next := command.GroupLoad{Group: 2, Term: 4, Msgs: 6000, MsgsPerSec: 100}
	h.Now = 3_000_000
	if !report(next) {
		t.Fatal("the same term's next report was not stored")
	}
	if got := command.LoadOf(h.ClusterValue, 2); got.At != 3_000_000 || !reflect.DeepEqual(got.GroupLoad, next) {
		t.Fatalf("stored %+v, want %+v", got, next)
	}
}

// TestGroupLoad_RefusesWhatIsNotALoad: a group outside 1..G, more queues
// than MaxLoadQueues, a bad or repeated queue name, a negative or
// non-finite rate are refused ErrInvalid and store nothing.
func TestGroupLoad_RefusesWhatIsNotALoad(t *testing.T) {
	h := enginetest.MustOpen(t)
	enginetest.Must[uint32](h, command.Groups{Count: 2})
	many := make([]command.QueueLoad, command.MaxLoadQueues+1)
	for i := range many {
		many[i].Queue = fmt.Sprintf("q%d", i)
	}
	if !enginetest.Must[bool](h, command.GroupLoad{Group: 1, Term: 1, Queues: many[:command.MaxLoadQueues]}) {
		t.Fatalf("a report of %d queues was not stored", command.MaxLoadQueues)
	}
	for _, bad := range []command.GroupLoad{
		{Group: 0, Term: 2},
		{Group: 3, Term: 2},
		{Group: 1, Term: 2, Queues: many},
		{Group: 1, Term: 2, MsgsPerSec: -1},
		{Group: 1, Term: 2, BytesPerSec: math.NaN()},
		{Group: 1, Term: 2, MsgsPerSec: math.Inf(1)},
		{Group: 1, Term: 2, Queues: []command.QueueLoad{{Queue: ""}}},
		{Group: 1, Term: 2, Queues: []command.QueueLoad{{Queue: "a\tb"}}},
		{Group: 1, Term: 2, Queues: []command.QueueLoad{{Queue: "a"}, {Queue: "a"}}},
		{Group: 1, Term: 2, Queues: []command.QueueLoad{{Queue: "a", MsgsPerSec: math.NaN()}}},
	} {
		if _, err := enginetest.Run[bool](h, bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%+v: err %v, want ErrInvalid", bad, err)
		}
	}
	if got := command.LoadOf(h.ClusterValue, 1); got.Term != 1 || len(got.Queues) != command.MaxLoadQueues {
		t.Fatalf("after refusals the record is %+v", got)
	}
}
