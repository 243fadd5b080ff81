//go:build race

package main

// raceBuild: this test binary runs with the race detector, and so do the
// nodes it starts (queenBinary).
const raceBuild = true
