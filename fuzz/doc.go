// Package fuzz holds the project's fuzz targets. Each target checks a property
// with an oracle (a round trip, a bound, a single corruption error), never only
// the absence of a panic. Seed corpora live in testdata/fuzz/<Target>/.
//
// Run one target with:
//
//	go test ./fuzz -run '^$' -fuzz '^FuzzClamp$' -fuzztime 10m
//
// Nothing imports this package.
package fuzz
