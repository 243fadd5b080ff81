package cursor_test

import (
	"flag"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/queenmq/queen/engine/cursor"
)

var seed = flag.Uint64("seed", 0, "seed for TestClamp_Property (0: time-based)")

// TestClamp_Property drives Clamp over random states, policies and item lists
// and checks every decision with checkClamp. Rerun a failure with
// go test ./engine/cursor -run TestClamp_Property -seed=<logged seed>.
func TestClamp_Property(t *testing.T) {
	sd := *seed
	if sd == 0 {
		sd = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", sd)
	rng := rand.New(rand.NewPCG(sd, sd^0x9e3779b97f4a7c15))

	runs := 200_000
	if testing.Short() {
		runs = 20_000
	}
	items := make([]cursor.Item, 0, 64)
	out := make([]cursor.Outcome, 64)
	for run := range runs {
		// Small offsets so that items collide, the span and the batch overlap
		// in every way, and statuses share offsets.
		base := cursor.Offset(0)
		if rng.IntN(16) == 0 {
			base = math.MaxInt64 - 64 // no arithmetic may overflow
		}
		s := cursor.State{
			Committed:  base + cursor.Offset(rng.IntN(12)) - 1,
			RetryCount: uint32(rng.IntN(6)),
		}
		s.SpanEnd = s.Committed + cursor.Offset(rng.IntN(16)) - 1
		s.BatchEnd = s.Committed + cursor.Offset(rng.IntN(20)) - 2
		if rng.IntN(2) == 0 {
			s.BatchEnd = s.SpanEnd
		}
		p := cursor.Policy{RetryLimit: uint32(rng.IntN(6)), DeadLetter: rng.IntN(2) == 0}

		n := rng.IntN(cap(items) + 1)
		if rng.IntN(2) == 0 {
			n = rng.IntN(5)
		}
		items = items[:n]
		for i := range items {
			items[i] = cursor.Item{
				Offset: base + cursor.Offset(rng.IntN(32)) - 2,
				Status: randomStatus(rng),
			}
		}
		before := slices.Clone(items)
		d := cursor.Clamp(s, p, items, out[:len(items)])
		if !slices.Equal(items, before) {
			t.Fatalf("run %d (seed %d): Clamp modified items", run, sd)
		}
		if err := cursor.Verify(s, p, items, out[:len(items)], d); err != nil {
			t.Fatalf("run %d (seed %d): %v\nstate %+v\npolicy %+v\nitems %v\ndecision %+v\noutcomes %v",
				run, sd, err, s, p, items, d, out[:len(items)])
		}
	}
}

// randomStatus mostly picks one of the four statuses, Completed most often,
// and now and then a value outside them, which Clamp treats as Failed.
func randomStatus(rng *rand.Rand) cursor.Status {
	switch n := rng.IntN(20); {
	case n < 10:
		return cursor.Completed
	case n < 19:
		return cursor.Status(1 + n%3)
	default:
		return cursor.Status(4 + rng.IntN(252))
	}
}
