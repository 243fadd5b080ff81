//go:build race

package engine_test

// raceEnabled shortens the randomized tests under the race detector, which
// slows them tenfold without making a single-goroutine model any more racy.
const raceEnabled = true
