//go:build !race

package engine_test

// raceEnabled shortens the randomized tests under the race detector.
const raceEnabled = false
