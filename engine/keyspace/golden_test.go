package keyspace_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine/keyspace"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// goldenDeadLetters are the dead-letter records kept in testdata as format
// fixtures, one file (a hex dump) each.
var goldenDeadLetters = []struct {
	file string
	rec  keyspace.DeadLetterRecord
}{
	{"deadletter-v1.golden", keyspace.DeadLetterRecord{
		PartitionID: keyspace.ID{0x01, 0x98, 0x6a}, Queue: "orders", Partition: "eu", Group: "billing", Offset: 1 << 33,
		MessageID: keyspace.ID{0x01, 0x98, 0x6b}, TransactionID: "t-1", HasTrace: true, TraceID: keyspace.ID{0xaa},
		ProducerSub: "auth0|u1", Payload: []byte(`{"orderId":1}`), Error: "poison", RetryCount: 3,
		EnqueuedAt: 1_754_000_000_123_456, Deliveries: 4,
	}},
	// Version 2: the same row, its payload sealed by the broker.
	{"deadletter-v2-sealed.golden", keyspace.DeadLetterRecord{
		PartitionID: keyspace.ID{0x01, 0x98, 0x6a}, Queue: "orders", Partition: "eu", Group: "billing", Offset: 1 << 33,
		MessageID: keyspace.ID{0x01, 0x98, 0x6b}, TransactionID: "t-1", HasTrace: true, TraceID: keyspace.ID{0xaa},
		ProducerSub: "auth0|u1", Payload: []byte(`{"encrypted":"","iv":"AAAAAAAAAAAAAAAAAAAAAA==","authTag":"AAAAAAAAAAAAAAAAAAAAAA=="}`),
		Error: "poison", RetryCount: 3, EnqueuedAt: 1_754_000_000_123_456, Deliveries: 4, Sealed: true,
	}},
}

// TestDeadLetterRecord_Encode_Golden pins the dead-letter record byte for
// byte: each golden record encodes to its file, and the file decodes back
// to it. Run with -rewrite only to add a fixture: a file that changes is a
// layout changed in place, which older binaries would misread.
func TestDeadLetterRecord_Encode_Golden(t *testing.T) {
	for _, g := range goldenDeadLetters {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			got := hex.Dump(g.rec.Encode(nil))
			if *rewrite {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (create it with -rewrite): %v", err)
			}
			if got != string(want) {
				t.Errorf("encoding changed:\ngot\n%swant\n%s", got, want)
			}
			b := undump(t, string(want))
			dec, err := keyspace.DecodeDeadLetter(b)
			if err != nil {
				t.Fatalf("decode golden: %v", err)
			}
			if !reflect.DeepEqual(dec, g.rec) {
				t.Errorf("decode golden = %+v, want %+v", dec, g.rec)
			}
			if re := dec.Encode(nil); !bytes.Equal(re, b) {
				t.Errorf("the decoded golden re-encodes differently:\n%s", hex.Dump(re))
			}
		})
	}
}

// undump parses the output of hex.Dump.
func undump(t *testing.T, s string) []byte {
	t.Helper()
	var b []byte
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		line, _, _ = strings.Cut(line, "  |") // drop the ASCII column
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		h, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("golden line %q: %v", line, err)
		}
		b = append(b, h...)
	}
	return b
}
