package cluster_test

import (
	"context"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queenmq/queen/cluster"
	"github.com/queenmq/queen/raft/rafttest"
)

var appliedSeed = flag.Uint64("applied.seed", 0, "seed of TestParseApplied_Random (0: from the clock)")

// pair is one (group, index) of an AppliedHeader value.
type pair struct {
	g   uint32
	idx uint64
}

func parsed(v string) []pair {
	var out []pair
	for g, idx := range cluster.ParseApplied([]byte(v)) {
		out = append(out, pair{g, idx})
	}
	return out
}

// The bytes on the wire, pinned: old nodes write and read the same.
func TestAppendApplied_Wire(t *testing.T) {
	b := cluster.AppendApplied(nil, 0, 7)
	b = cluster.AppendApplied(b, 2, 42)
	b = cluster.AppendApplied(b, math.MaxUint32, math.MaxUint64)
	if got, want := string(b), "0:7,2:42,4294967295:18446744073709551615"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A value yields its pairs in order; a pair it cannot parse is skipped
// and the others kept.
func TestParseApplied(t *testing.T) {
	for _, c := range []struct {
		v    string
		want []pair
	}{
		{"", nil},
		{"1:5", []pair{{1, 5}}},
		{"0:7,2:42", []pair{{0, 7}, {2, 42}}},
		{"2:42,0:7", []pair{{2, 42}, {0, 7}}},
		{"1:3,1:5", []pair{{1, 3}, {1, 5}}},
		{"4294967295:18446744073709551615", []pair{{math.MaxUint32, math.MaxUint64}}},
		// malformed pairs
		{",", nil},
		{"1", nil},
		{":", nil},
		{"1:", nil},
		{":5", nil},
		{"1:x", nil},
		{"x:1", nil},
		{"1:5:6", nil},
		{"-1:5", nil},
		{"1:-5", nil},
		{"+1:5", nil},
		{" 1:5", nil},
		{"1:5 ", nil},
		{"4294967296:5", nil},           // group past uint32
		{"1:18446744073709551616", nil}, // index past uint64
		{"1:0x10", nil},
		// malformed among good ones
		{"1:x,2:9", []pair{{2, 9}}},
		{"2:9,,3:4", []pair{{2, 9}, {3, 4}}},
		{"2:9,junk,3:4,", []pair{{2, 9}, {3, 4}}},
	} {
		if got := parsed(c.v); !slices.Equal(got, c.want) {
			t.Errorf("ParseApplied(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

// ParseApplied stops when its loop does.
func TestParseApplied_Break(t *testing.T) {
	n := 0
	for range cluster.ParseApplied([]byte("1:1,2:2,3:3")) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("yielded %d after a break", n)
	}
}

// The applied header names each group's index; a group it does not name
// is 0, and the first pair that names it wins.
func TestAppliedIn(t *testing.T) {
	for _, c := range []struct {
		v    string
		g    uint32
		want uint64
	}{{"0:7,2:42", 2, 42}, {"0:7,2:42", 0, 7}, {"0:7,2:42", 1, 0}, {"", 1, 0}, {"1:x", 1, 0}, {"12:5", 1, 0},
		{"1:x,1:5", 1, 5}, {"1:3,1:5", 1, 3}, {"21:5", 1, 0}, {"1:5x", 1, 0}} {
		if got := cluster.AppliedIn([]byte(c.v), c.g); got != c.want {
			t.Errorf("AppliedIn(%q, %d) = %d, want %d", c.v, c.g, got, c.want)
		}
	}
}

// What AppendApplied writes ParseApplied reads back, pair for pair, and
// a pair spliced in malformed costs only itself. The seed is logged and
// -applied.seed replays it.
func TestParseApplied_Random(t *testing.T) {
	seed := *appliedSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	junk := []string{"", "x", ":", "1", "1:", ":1", "-1:1", "1:-1", "a:b", "1:2:3", "99999999999:1", " 2:3"}
	for range 2000 {
		var want []pair
		var b, mixed []byte
		for range rng.IntN(6) {
			p := pair{rng.Uint32(), rng.Uint64() >> rng.UintN(64)}
			if rng.IntN(4) == 0 {
				p.g = uint32(rng.IntN(4))
			}
			want = append(want, p)
			b = cluster.AppendApplied(b, p.g, p.idx)
			if rng.IntN(3) == 0 {
				if len(mixed) > 0 {
					mixed = append(mixed, ',')
				}
				mixed = append(mixed, junk[rng.IntN(len(junk))]...)
			}
			mixed = cluster.AppendApplied(mixed, p.g, p.idx)
		}
		if got := parsed(string(b)); !slices.Equal(got, want) {
			t.Fatalf("seed %d: ParseApplied(%q) = %v, want %v", seed, b, got, want)
		}
		if got := parsed(string(mixed)); !slices.Equal(got, want) {
			t.Fatalf("seed %d: ParseApplied(%q) = %v, want %v", seed, mixed, got, want)
		}
		for _, p := range want {
			first := slices.IndexFunc(want, func(q pair) bool { return q.g == p.g })
			if got := cluster.AppliedIn(mixed, p.g); got != want[first].idx {
				t.Fatalf("seed %d: AppliedIn(%q, %d) = %d, want %d", seed, mixed, p.g, got, want[first].idx)
			}
		}
	}
}

// Whatever the bytes, ParseApplied never panics, and what it yields
// written again reads back the same.
func FuzzParseApplied(f *testing.F) {
	for _, s := range []string{"", "0:7,2:42", "1:x,2:9", "4294967296:5", ",,", "007:1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got := parsed(string(v))
		var b []byte
		for _, p := range got {
			b = cluster.AppendApplied(b, p.g, p.idx)
		}
		if again := parsed(string(b)); !slices.Equal(again, got) {
			t.Fatalf("ParseApplied(%q) = %v, written %q reads %v", v, got, b, again)
		}
	})
}

// AwaitApplied returns at once when there is nothing to wait for, waits
// for what its leader applies, and gives up at its deadline with the
// wait's error, nudging (a follower only) with a context that ends with
// the wait.
func TestAwaitApplied(t *testing.T) {
	c := rafttest.MakeCluster(t, 3)
	leader := c.Leader()
	follower := c.Followers()[0]
	ctx := ctxT(t)
	never := func(context.Context) { t.Error("nudged when nothing was waited for") }

	if err := cluster.AwaitApplied(ctx, follower, 0, time.Now(), never); err != nil {
		t.Fatalf("index 0: %v", err)
	}
	if err := cluster.AwaitApplied(ctx, follower, follower.Applied(), time.Now(), never); err != nil {
		t.Fatalf("applied already: %v", err)
	}

	push(t, leader, "q", "t1")
	if err := cluster.AwaitApplied(ctx, follower, leader.Applied(), time.Now().Add(10*time.Second), nil); err != nil {
		t.Fatalf("catch up: %v", err)
	}
	if got, want := follower.Applied(), leader.Applied(); got < want {
		t.Fatalf("follower applied %d, want %d", got, want)
	}

	var nudged atomic.Int32
	done := make(chan context.Context, 1)
	nudge := func(c context.Context) { nudged.Add(1); done <- c }
	err := cluster.AwaitApplied(ctx, follower, follower.Applied()+1000, time.Now().Add(50*time.Millisecond), nudge)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline: %v, want context.DeadlineExceeded", err)
	}
	select {
	case nc := <-done:
		<-nc.Done() // ends with the wait
	case <-time.After(10 * time.Second):
		t.Fatal("a follower's wait did not nudge")
	}

	leaderNudge := func(context.Context) { t.Error("a leader's wait nudged") }
	if err := cluster.AwaitApplied(ctx, leader, leader.Applied()+1000, time.Now().Add(50*time.Millisecond), leaderNudge); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("leader past the deadline: %v", err)
	}
	if got := nudged.Load(); got != 1 {
		t.Fatalf("nudged %d times, want 1", got)
	}
}
