// Package invariants is the switch for the checks too costly to run in a
// release build: the engine's per-commit check of the partitions a batch
// touched, and the ack clamp's post-conditions. Build with -tags invariants
// (make test does) to turn them on; a violation then panics, so that the
// test which caused it fails where it happened.
package invariants
