package wire_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/queenmq/queen/internal/wire"
)

// Each package's sentinel matches itself and the common mark, and nothing
// else matches the mark.
func TestCorrupt_MatchesTheCommonMark(t *testing.T) {
	seg, rec := wire.Corrupt("segment"), wire.Corrupt("keyspace")
	err := fmt.Errorf("%w: frame 3: short", seg)
	switch {
	case !errors.Is(err, seg) || !errors.Is(err, wire.ErrCorrupt):
		t.Fatalf("%v does not match its sentinel and the mark", err)
	case errors.Is(err, rec):
		t.Fatal("one package's sentinel matches another's")
	case errors.Is(errors.New("segment: corrupt"), wire.ErrCorrupt):
		t.Fatal("a look-alike message matches the mark")
	case seg.Error() != "segment: corrupt":
		t.Fatalf("message %q", seg)
	}
}

// What a Writer writes a Reader reads back; a short or trailing input is
// a failure that wraps the sentinel given and the mark.
func TestReader_RoundTripAndFailures(t *testing.T) {
	w := wire.Writer{}
	w.I64(-5)
	w.U32(7)
	w.U8(9)
	w.ID(wire.ID{1, 2})
	w.Uvarint(300)
	w.Varint(-300)
	w.Str("héllo")
	w.Bytes([]byte{0, 1})
	w.Bool(true)
	sentinel := wire.Corrupt("test")
	r := wire.NewReader(w.B, sentinel, "thing")
	if r.I64() != -5 || r.U32() != 7 || r.U8() != 9 || r.ID() != (wire.ID{1, 2}) || r.Uvarint() != 300 ||
		r.Varint() != -300 || r.Str() != "héllo" || string(r.Bytes()) != "\x00\x01" || !r.Bool() {
		t.Fatal("values did not round-trip")
	}
	if err := r.Done(); err != nil {
		t.Fatal(err)
	}
	r = wire.NewReader(append(w.B, 0), sentinel, "thing")
	for range 9 {
		r.Bytes() // reads past the shape written: fails and sticks
	}
	if err := r.Done(); !errors.Is(err, sentinel) || !errors.Is(err, wire.ErrCorrupt) {
		t.Fatalf("misread input: %v, want the sentinel and the mark", err)
	}
	r = wire.NewReader([]byte{2}, sentinel, "thing")
	if r.Bool(); !errors.Is(r.Err(), wire.ErrCorrupt) {
		t.Fatalf("bool 2: %v", r.Err())
	}
}
