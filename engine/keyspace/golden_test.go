package keyspace_test

import (
	"bytes"
	"encoding/hex"
	"errors"
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

// goldenOutbox is the outbox record kept in testdata as a format fixture.
var goldenOutbox = keyspace.OutboxRecord{CreatedAt: 1_754_000_000_123_456, Tx: keyspace.ID{0x01, 0x98, 0x6c}, Queue: "emails",
	Partition: "eu", TransactionID: "t-2", HasTrace: true, TraceID: keyspace.ID{0xaa}, ProducerSub: "auth0|u1",
	Payload: []byte(`{"to":"a@b"}`), Sealed: true}

// TestOutboxRecord_Encode_Golden pins the outbox record byte for byte, as
// TestDeadLetterRecord_Encode_Golden does the dead-letter record; a flag
// bit this binary does not know is refused.
func TestOutboxRecord_Encode_Golden(t *testing.T) {
	path := filepath.Join("testdata", "outbox-v1.golden")
	got := hex.Dump(goldenOutbox.Encode(nil))
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
	if dec, err := keyspace.DecodeOutbox(b); err != nil || !reflect.DeepEqual(dec, goldenOutbox) {
		t.Fatalf("decode golden = %+v, %v; want %+v", dec, err, goldenOutbox)
	}
	for n := range len(b) {
		if _, err := keyspace.DecodeOutbox(b[:n]); !errors.Is(err, keyspace.ErrCorrupt) {
			t.Fatalf("cut at %d of %d bytes: err %v, want ErrCorrupt", n, len(b), err)
		}
	}
	flags := 1 + 8 + 16 + 1 + len("emails") + 1 + len("eu") + 1 + len("t-2")
	bad := bytes.Clone(b)
	bad[flags] |= 1 << 2
	if _, err := keyspace.DecodeOutbox(bad); !errors.Is(err, keyspace.ErrCorrupt) {
		t.Fatalf("unknown flag: err %v, want ErrCorrupt", err)
	}
	id := keyspace.ID{0x01, 0x98, 0x6d}
	if got, err := keyspace.ParseOutbox(keyspace.Outbox(id)); err != nil || got != id {
		t.Fatalf("ParseOutbox(Outbox(id)) = %v, %v", got, err)
	}
}
