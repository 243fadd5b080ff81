package memory

import (
	"sync/atomic"
	"testing"
	"time"
)

// countingReclaimer is a Reclaimer whose collections and returns to the
// operating system are counted instead of run.
func countingReclaimer(limit int64) (*Reclaimer, *atomic.Int64, *atomic.Int64) {
	var collects, frees atomic.Int64
	r := NewReclaimer(NewBudget(limit), nil)
	r.collect = func() { collects.Add(1) }
	r.free = func() { frees.Add(1) }
	return r, &collects, &frees
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *Reclaimer) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.running
}

// TestReclaimer_Ended_SmallBodyAtOnce: a small body's bytes go back to the
// budget when its request ends, with no collection.
func TestReclaimer_Ended_SmallBodyAtOnce(t *testing.T) {
	r, collects, frees := countingReclaimer(8 << 20)
	if !r.budget.Acquire(100 << 10) {
		t.Fatal("acquire")
	}
	r.Ended(100 << 10)
	if got := r.budget.Held(); got != 0 {
		t.Fatalf("held = %d after a small body ended", got)
	}
	time.Sleep(50 * time.Millisecond)
	if collects.Load() != 0 || frees.Load() != 0 || !r.idle() {
		t.Fatalf("a small body started the reclaimer: %d collections, %d frees", collects.Load(), frees.Load())
	}
}

// TestReclaimer_Ended_LargeBodyAfterACollection: a large body stays charged
// until a collection ran; after the quiet period the memory goes back to
// the operating system once and the goroutine ends.
func TestReclaimer_Ended_LargeBodyAfterACollection(t *testing.T) {
	r, collects, frees := countingReclaimer(64 << 20) // collects every 32 MiB
	r.budget.Acquire(2 << 20)
	start := time.Now()
	r.Ended(2 << 20)
	if got := r.budget.Held(); got != 2<<20 {
		t.Fatalf("held = %d right after a large body ended, want it still charged", got)
	}
	waitUntil(t, "the quiet period's collection", func() bool { return frees.Load() == 1 && r.idle() })
	if elapsed := time.Since(start); elapsed < reclaimQuiet {
		t.Fatalf("memory returned after %v, before the quiet period (%v)", elapsed, reclaimQuiet)
	}
	if got := r.budget.Held(); got != 0 || collects.Load() != 1 {
		t.Fatalf("after the quiet period: held %d, %d collections; want 0 and 1", got, collects.Load())
	}
}

// TestReclaimer_Ended_CollectsEveryHalfBudget: large bodies ending steadily
// are collected whenever half the budget of them waits, without waiting
// for a quiet moment.
func TestReclaimer_Ended_CollectsEveryHalfBudget(t *testing.T) {
	r, collects, frees := countingReclaimer(8 << 20) // collects every 4 MiB
	start := time.Now()
	for range 4 {
		r.budget.Acquire(2 << 20)
		r.Ended(2 << 20)
	}
	waitUntil(t, "collections while bodies keep ending", func() bool { return collects.Load() >= 1 && r.budget.Held() <= 4<<20 })
	if elapsed := time.Since(start); elapsed >= reclaimQuiet || frees.Load() != 0 {
		t.Fatalf("first collection after %v (%d frees): it waited for the quiet period", elapsed, frees.Load())
	}
	r.budget.Acquire(2 << 20)
	r.Ended(2 << 20) // keeps the period from being quiet
	if r.idle() {
		t.Fatal("the reclaimer stopped while bodies were still ending")
	}
	waitUntil(t, "the goroutine's end", r.idle)
	if got := r.budget.Held(); got != 0 {
		t.Fatalf("held = %d at the end", got)
	}
}

// TestReclaimer_Refused_CollectsAtOnce: a refusal for want of budget while
// large bodies wait makes the collection run now, not after the quiet
// period.
func TestReclaimer_Refused_CollectsAtOnce(t *testing.T) {
	r, collects, frees := countingReclaimer(64 << 20)
	r.budget.Acquire(2 << 20)
	start := time.Now()
	r.Ended(2 << 20)
	r.Refused()
	waitUntil(t, "the collection a refusal asks for", func() bool { return r.budget.Held() == 0 })
	if elapsed := time.Since(start); elapsed >= reclaimQuiet || collects.Load() != 1 || frees.Load() != 0 {
		t.Fatalf("after %v: %d collections, %d frees; want 1 and 0 within the quiet period", elapsed, collects.Load(), frees.Load())
	}
	waitUntil(t, "the goroutine's end", r.idle)
}
