//go:build !linux

package analytics

// readProc reports nothing outside Linux: system-metrics' CPU and memory
// are 0 there.
func readProc() procStats { return procStats{} }
