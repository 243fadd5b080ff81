package memory

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Thresholds of the Reclaimer.
const (
	// LargeBody: bodies from this size on are large. The Reclaimer keeps
	// them charged to the budget until they are collected, and a response
	// body buffer this large is not pooled (send). Smaller bodies are the
	// hot path, left to the runtime's own pacing.
	LargeBody = 1 << 20
	// reclaimEvery: a collection runs once this many bytes of large bodies
	// (at most half the budget) wait to be collected.
	reclaimEvery = 64 << 20
	// reclaimQuiet: once no large body has ended for this long, the pages
	// of the burst go back to the operating system.
	reclaimQuiet = time.Second
)

// Reclaimer makes the memory of large request bodies come back. Left to
// itself the runtime collects only when the heap has doubled since its last
// collection, so a burst of large bodies could leave garbage worth the
// budget again on top of the bodies in flight; and a server idle after the
// burst allocates nothing, so nothing is collected for minutes and the
// pages stay with the process.
//
// So a large body stays charged to the budget after its request ends, until
// a collection that began after it has finished: the bytes of large bodies
// held plus those not yet collected never pass the budget. A collection
// runs (runtime.GC, in the Reclaimer's goroutine, never a request's) once
// reclaimEvery bytes of them wait, at once when a request was refused for
// want of budget while some wait, and after reclaimQuiet without a large
// body ending; that last one also returns the free pages to the operating
// system (debug.FreeOSMemory). The goroutine runs only from a large body's
// end to the end of the quiet period after the last one, or to Shutdown.
type Reclaimer struct {
	budget *Budget
	every  int64 // min(reclaimEvery, half the budget)
	// collect and free are runtime.GC and debug.FreeOSMemory; tests count
	// them instead.
	collect, free func()
	wake          chan struct{}   // a collection is due (buffered, 1)
	stop          <-chan struct{} // closed by the server's Shutdown: end the goroutine

	mu      sync.Mutex
	running bool
	waiting int64     // bytes of large bodies ended, still charged
	last    time.Time // when the last large body ended
}

// NewReclaimer returns the reclaimer of b's large bodies; closing stop ends
// its goroutine.
func NewReclaimer(b *Budget, stop <-chan struct{}) *Reclaimer {
	return &Reclaimer{budget: b, every: min(reclaimEvery, b.limit/2),
		collect: runtime.GC, free: debug.FreeOSMemory, wake: make(chan struct{}, 1), stop: stop}
}

// Ended returns the n bytes of a body no longer held: to the budget at once
// for a small body, after the next collection for a large one.
func (r *Reclaimer) Ended(n int64) {
	if n < LargeBody {
		r.budget.Release(n)
		return
	}
	r.mu.Lock()
	r.waiting += n
	r.last = time.Now()
	due := r.waiting >= r.every
	start := !r.running
	r.running = true
	r.mu.Unlock()
	if due {
		r.poke()
	}
	if start {
		go r.run()
	}
}

// Refused is told that a request was refused for want of budget: bytes
// waiting for a collection come back sooner if one runs now.
func (r *Reclaimer) Refused() {
	r.mu.Lock()
	due := r.waiting > 0
	r.mu.Unlock()
	if due {
		r.poke()
	}
}

func (r *Reclaimer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Reclaimer) run() {
	timer := time.NewTimer(reclaimQuiet)
	defer timer.Stop()
	for {
		stopping := false
		select {
		case <-r.wake:
			r.collectWaiting()
			continue
		case <-timer.C:
		case <-r.stop:
			stopping = true
		}
		r.mu.Lock()
		if quiet := time.Since(r.last); quiet < reclaimQuiet && !stopping {
			r.mu.Unlock()
			timer.Reset(reclaimQuiet - quiet)
			continue
		}
		r.running = false
		r.mu.Unlock()
		// A body ending from here on starts a goroutine of its own and
		// waits for its collection; this one collects the rest.
		r.collectWaiting()
		r.free()
		return
	}
}

// collectWaiting runs a collection and gives the bytes that waited for it
// back to the budget: the bodies they count ended before it began, so it
// freed them.
func (r *Reclaimer) collectWaiting() {
	r.mu.Lock()
	n := r.waiting
	r.waiting = 0
	r.mu.Unlock()
	if n == 0 {
		return
	}
	r.collect()
	r.budget.Release(n)
}
