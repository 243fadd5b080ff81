// Package bench holds the project's benchmarks and the `queen bench` load
// driver. Every throughput figure is reported next to the limit measured in the
// same run (raw Pebble synced writes of the same bytes), so results are ratios,
// not machine-specific absolutes. Nothing imports this package.
package bench
