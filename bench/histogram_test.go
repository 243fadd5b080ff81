package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogram_Percentile_Exact(t *testing.T) {
	// Values below 128 ns have a bucket each: nearest-rank is exact.
	var h Histogram
	for v := 1; v <= 100; v++ {
		h.Record(time.Duration(v))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0, 1}, {1, 1}, {50, 50}, {90, 90}, {99, 99}, {99.9, 100}, {100, 100}} {
		if got := h.Percentile(c.p); got != c.want {
			t.Errorf("Percentile(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if got, want := h.Mean(), time.Duration(50); got != want { // 5050/100, truncated
		t.Errorf("Mean = %v, want %v", got, want)
	}
	if got, want := h.Max(), time.Duration(100); got != want {
		t.Errorf("Max = %v, want %v", got, want)
	}
}

func TestHistogram_Percentile_Empty(t *testing.T) {
	var h Histogram
	if h.Percentile(50) != 0 || h.Mean() != 0 || h.Max() != 0 || h.Count() != 0 {
		t.Fatal("an empty histogram must report zeros")
	}
}

func TestHistogram_Percentile_Accuracy(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var parts [4]Histogram
	var all []time.Duration
	for i := range 20000 {
		// Log-uniform from 1 µs to 10 s, as latencies spread.
		d := time.Duration(float64(time.Microsecond) * math.Pow(10, rng.Float64()*7))
		all = append(all, d)
		parts[i%4].Record(d)
	}
	var h Histogram
	for i := range parts {
		h.Merge(&parts[i])
	}
	slices.Sort(all)
	if got, want := h.Count(), uint64(len(all)); got != want {
		t.Fatalf("Count = %d, want %d", got, want)
	}
	for _, p := range []float64{1, 10, 50, 90, 99, 99.9, 100} {
		rank := int(p / 100 * float64(len(all)))
		if float64(rank) < p/100*float64(len(all)) {
			rank++
		}
		want := all[max(rank, 1)-1]
		got := h.Percentile(p)
		if diff := float64(got-want) / float64(want); diff > 1.0/64 || diff < -1.0/64 {
			t.Errorf("Percentile(%v) = %v, want %v within 1/64 (off by %.2f%%)", p, got, want, diff*100)
		}
	}
	if got, want := h.Max(), all[len(all)-1]; got != want {
		t.Errorf("Max = %v, want %v", got, want)
	}
}

func TestHistogram_Buckets(t *testing.T) {
	// Every value lies inside its bucket, and buckets tile the range.
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1000, 123456789, 1 << 40, 1<<41 - 1} {
		i := histBucket(v)
		low, width := histBounds(i)
		if v < low || v >= low+width {
			t.Errorf("value %d in bucket %d = [%d, %d)", v, i, low, low+width)
		}
		if i > 0 {
			plow, pwidth := histBounds(i - 1)
			if plow+pwidth != low {
				t.Errorf("bucket %d ends at %d, bucket %d starts at %d", i-1, plow+pwidth, i, low)
			}
		}
	}
	if got := histBucket(1 << 62); got != histBuckets-1 {
		t.Errorf("out-of-range value in bucket %d, want the last (%d)", got, histBuckets-1)
	}
}

func TestHistogram_Record_NoAlloc(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(100, func() { h.Record(time.Millisecond) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}
