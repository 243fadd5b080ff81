//go:build race

package segment_test

// The race detector makes sync.Pool drop items at random, so allocation
// counts are meaningless under it.
func init() { raceEnabled = true }
