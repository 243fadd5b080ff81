package engine_test

import (
	"errors"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/keyspace"
	"github.com/queenmq/queen/engine/segment"
)

// engine.ErrCorrupt is what every format's decoding failure matches: a
// segment that does not decode, and a record that does not.
func TestErrCorrupt_MatchedBySegmentsAndRecords(t *testing.T) {
	_, err := segment.Decode([]byte("not a segment"))
	if !errors.Is(err, segment.ErrCorrupt) || !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("corrupt segment: %v; want it to match segment.ErrCorrupt and engine.ErrCorrupt", err)
	}
	_, err = keyspace.DecodeQueue([]byte{0xff})
	if !errors.Is(err, keyspace.ErrCorrupt) || !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("corrupt record: %v; want it to match keyspace.ErrCorrupt and engine.ErrCorrupt", err)
	}
	if errors.Is(engine.ErrInvalid, engine.ErrCorrupt) {
		t.Fatal("ErrInvalid matches ErrCorrupt")
	}
}
