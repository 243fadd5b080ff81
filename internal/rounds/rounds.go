// Package rounds shares one call among the callers that need it at once.
//
// A read index is the canonical use: any number of concurrent readers can
// share one confirmation that the leader still leads, but only if that
// confirmation starts after each of them arrived. A caller never joins a
// round already under way (its answer may predate the caller); it joins
// the next one, which starts as soon as the running one ends. So a burst of
// callers costs at most two rounds, and a lone caller one, at once.
package rounds

import (
	"context"
	"sync"
	"time"
)

// Rounds runs fn once per round for every caller of Do that joined it.
type Rounds[T any] struct {
	fn      func(context.Context) (T, error)
	timeout time.Duration

	mu      sync.Mutex
	running bool
	next    *round[T] // the round callers join; nil until one does
}

// round is one call of fn and the callers waiting for it.
type round[T any] struct {
	done chan struct{} // closed once v and err are set
	v    T
	err  error
}

// New returns Rounds that call fn, each call bounded by timeout: a round
// runs on for callers that have not left, so no caller's context bounds it.
func New[T any](timeout time.Duration, fn func(context.Context) (T, error)) *Rounds[T] {
	return &Rounds[T]{fn: fn, timeout: timeout}
}

// Do returns the result of a call of fn that started after Do was called,
// or ctx's error if ctx ends first.
func (r *Rounds[T]) Do(ctx context.Context) (T, error) {
	r.mu.Lock()
	if r.next == nil {
		r.next = &round[T]{done: make(chan struct{})}
	}
	rd := r.next
	if !r.running {
		r.start()
	}
	r.mu.Unlock()
	select {
	case <-rd.done:
		return rd.v, rd.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// start runs the waiting round in a goroutine of its own and, when it
// ends, the round that gathered meanwhile. r.mu is held.
func (r *Rounds[T]) start() {
	rd := r.next
	r.next, r.running = nil, true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
		rd.v, rd.err = r.fn(ctx)
		cancel()
		close(rd.done)
		r.mu.Lock()
		r.running = false
		if r.next != nil {
			r.start()
		}
		r.mu.Unlock()
	}()
}
