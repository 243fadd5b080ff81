package bench

import (
	"math/bits"
	"time"
)

// Histogram records latencies in fixed log-linear buckets: exact below
// 128 ns, then 64 buckets per power of two, so any value is known to within
// 1/64 of itself (percentiles report a bucket's midpoint: within 0.8%).
// Recording is two increments and never allocates; a histogram belongs to
// one goroutine, and Merge combines them at the end of a run.
type Histogram struct {
	counts [histBuckets]uint64
	n      uint64
	sum    uint64 // nanoseconds
	max    uint64 // nanoseconds
}

const (
	histSubBits  = 6
	histSub      = 1 << histSubBits // buckets per power of two
	histExact    = 2 * histSub      // values below this have a bucket each
	histMaxShift = 40 - histSubBits // covers up to 2^41 ns (about 36 min)
	histBuckets  = histExact + histMaxShift*histSub
)

// histBucket returns the bucket of v (ns); values beyond the range land in
// the last bucket.
func histBucket(v uint64) int {
	if v < histExact {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // v>>shift is in [histSub, 2*histSub)
	if shift > histMaxShift {
		return histBuckets - 1
	}
	return histExact + (shift-1)*histSub + int(v>>shift) - histSub
}

// histBounds returns the lowest value of bucket i and its width.
func histBounds(i int) (low, width uint64) {
	if i < histExact {
		return uint64(i), 1
	}
	shift := (i-histExact)/histSub + 1
	m := uint64((i-histExact)%histSub + histSub)
	return m << shift, 1 << shift
}

// Record adds one latency; negative durations count as zero.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histBucket(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// Merge adds o's samples to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest sample, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact mean of the samples (0 without samples).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}

// Percentile returns the nearest-rank p-th percentile (p in [0, 100]): the
// smallest sample that at least p% of the samples do not exceed, as the
// midpoint of its bucket (never above the largest sample). 0 without
// samples.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(p / 100 * float64(h.n))
	if float64(rank) < p/100*float64(h.n) {
		rank++ // ceil
	}
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			low, width := histBounds(i)
			return time.Duration(min(low+width/2, h.max))
		}
	}
	return time.Duration(h.max)
}
