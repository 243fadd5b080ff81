package rounds

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A caller that arrives while a round runs never gets that round's answer:
// it waits for the next, which all such callers share.
func TestRounds_LateCallersShareTheNextRound(t *testing.T) {
	var calls atomic.Int64
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	r := New(time.Minute, func(context.Context) (int64, error) {
		n := calls.Add(1)
		entered <- struct{}{}
		if n == 1 {
			<-release
		}
		return n, nil
	})
	first := make(chan int64, 1)
	go func() {
		v, _ := r.Do(context.Background())
		first <- v
	}()
	<-entered // round 1 is under way

	const late = 20
	var wg sync.WaitGroup
	got := make([]int64, late)
	for i := range late {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.Do(context.Background())
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	// Let the late callers queue up behind round 1.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		queued := r.next != nil
		r.mu.Unlock()
		if queued || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the rest join the same next round
	close(release)
	wg.Wait()

	if v := <-first; v != 1 {
		t.Fatalf("first caller got round %d, want 1", v)
	}
	for i, v := range got {
		if v < 2 {
			t.Fatalf("late caller %d got round %d, which started before it arrived", i, v)
		}
	}
	if n := calls.Load(); n > 3 {
		t.Fatalf("%d rounds for 21 callers in two bursts, want at most 3", n)
	}
}

func TestRounds_ErrorsAndLeavingCallers(t *testing.T) {
	boom := errors.New("boom")
	r := New(time.Minute, func(context.Context) (int, error) { return 0, boom })
	if _, err := r.Do(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the round's", err)
	}

	block := make(chan struct{})
	defer close(block)
	slow := New(time.Minute, func(context.Context) (int, error) { <-block; return 1, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := slow.Do(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
}

// A round is bounded by the timeout, whoever waits for it.
func TestRounds_RoundTimeout(t *testing.T) {
	r := New(10*time.Millisecond, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if _, err := r.Do(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the round's deadline", err)
	}
	// And the next caller gets a fresh round.
	if _, err := r.Do(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second round: err = %v", err)
	}
}
