package keyspace_test

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/queenmq/queen/engine/keyspace"
)

// The import mark's key and record, byte for byte (doc.go, "Moving a
// queue"), and the parsers the move needs.
func TestImportMark_Layout(t *testing.T) {
	k := keyspace.ImportMark("orders")
	if got := string(k); got != "\x01import/orders" {
		t.Fatalf("mark key %q", got)
	}
	if q, err := keyspace.ParseImportMark(k); err != nil || q != "orders" {
		t.Fatalf("parse mark key: %q, %v", q, err)
	}
	if _, err := keyspace.ParseImportMark(keyspace.Meta("applied")); !errors.Is(err, keyspace.ErrCorrupt) {
		t.Fatalf("parse another meta key: %v", err)
	}
	rec := keyspace.ImportRecord{ID: keyspace.ID{0x01, 0x98}, Epoch: 7, Next: 258}
	b := rec.Encode(nil)
	const want = "01" + "01980000000000000000000000000000" + "0000000000000007" + "00000102"
	if hex.EncodeToString(b) != want {
		t.Fatalf("import record %x, want %s", b, want)
	}
	if got, err := keyspace.DecodeImport(b); err != nil || got != rec {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	if _, err := keyspace.DecodeImport(b[:len(b)-1]); !errors.Is(err, keyspace.ErrCorrupt) {
		t.Fatalf("decode short: %v", err)
	}
}

func TestParseDLQQueue(t *testing.T) {
	row := keyspace.MakeRowKey(1_754_000_000_000_000, keyspace.ID{0xab})
	k := keyspace.DLQQueue("orders", "billing", row)
	q, g, r, err := keyspace.ParseDLQQueue(k)
	if err != nil || q != "orders" || g != "billing" || r != row {
		t.Fatalf("parse: %q %q %x %v", q, g, r, err)
	}
	for _, bad := range [][]byte{k[:len(k)-1], append(k, 0), keyspace.DLQ(row)} {
		if _, _, _, err := keyspace.ParseDLQQueue(bad); !errors.Is(err, keyspace.ErrCorrupt) {
			t.Fatalf("parse %x: %v", bad, err)
		}
	}
}
