// Package bench holds the project's benchmarks and the `queen bench` load
// driver (Run, Options, Report). Every throughput figure is reported next to
// a limit measured in the same run (raw Pebble synced writes of the same
// bytes for the Go benchmarks, the push-path ceiling for the HTTP driver),
// so results are ratios, not machine-specific absolutes: see README.md.
// Only cmd/queen imports this package.
package bench
