package keyspace_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/queenmq/queen/engine/keyspace"
)

func TestKeys_OrderIsNumeric(t *testing.T) {
	id := keyspace.ID{1, 2, 3}
	a, b := keyspace.Segment(id, 9), keyspace.Segment(id, 10)
	if bytes.Compare(a, b) >= 0 {
		t.Fatalf("segment 9 sorts after segment 10")
	}
	gotID, base, err := keyspace.ParseSegment(b)
	if err != nil || gotID != id || base != 10 {
		t.Fatalf("ParseSegment = %v %d %v", gotID, base, err)
	}
	lo, hi := keyspace.SegmentSpan(id, 0, 10)
	if bytes.Compare(lo, a) > 0 || bytes.Compare(a, hi) >= 0 || bytes.Compare(b, hi) < 0 {
		t.Fatalf("SegmentSpan [0,10) does not hold exactly 9")
	}
}

func TestKeys_LengthPrefixKeepsNamesApart(t *testing.T) {
	// "q1" must not be a prefix-scan match of "q12".
	p := keyspace.DLQQueuePrefix("q1", "", false)
	k := keyspace.DLQQueue("q12", "g", keyspace.MakeRowKey(1, keyspace.ID{}))
	if bytes.HasPrefix(k, p) {
		t.Fatal("queue q12's index key matches queue q1's prefix")
	}
	p = keyspace.DLQAddrPrefix(keyspace.ID{}, "t1")
	k = keyspace.DLQAddr(keyspace.ID{}, "t12", keyspace.MakeRowKey(1, keyspace.ID{}))
	if bytes.HasPrefix(k, p) {
		t.Fatal("txn t12's index key matches txn t1's prefix")
	}
	q, g, err := keyspace.ParseSub(keyspace.Sub("orders", "billing"))
	if err != nil || q != "orders" || g != "billing" {
		t.Fatalf("ParseSub = %q %q %v", q, g, err)
	}
}

func TestRowKey_RoundTrip(t *testing.T) {
	id := keyspace.ID{9, 8, 7}
	rk := keyspace.MakeRowKey(1234567, id)
	if rk.FailedAt() != 1234567 || rk.ID() != id {
		t.Fatalf("row key = %d %v", rk.FailedAt(), rk.ID())
	}
	got, err := keyspace.ParseDLQ(keyspace.DLQ(rk))
	if err != nil || got != rk {
		t.Fatalf("ParseDLQ = %v %v", got, err)
	}
	got, err = keyspace.RowKeyOfIndex(keyspace.DLQQueue("q", "g", rk))
	if err != nil || got != rk {
		t.Fatalf("RowKeyOfIndex = %v %v", got, err)
	}
}

func TestPrefixEnd(t *testing.T) {
	if got := keyspace.PrefixEnd([]byte{1, 0xff}); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("PrefixEnd = %x", got)
	}
	if got := keyspace.PrefixEnd([]byte{0xff}); got != nil {
		t.Fatalf("PrefixEnd(ff) = %x", got)
	}
}

func TestRecords_RoundTrip(t *testing.T) {
	q := keyspace.QueueRecord{ID: keyspace.ID{1}, CreatedAt: 5, Namespace: "billing", Task: "invoice",
		Options: []keyspace.Option{{Number: 1, Value: 300}, {Number: 2, Value: -1}}}
	gotQ, err := keyspace.DecodeQueue(q.Encode(nil))
	if err != nil || !reflect.DeepEqual(gotQ, q) {
		t.Fatalf("queue: got %+v, %v", gotQ, err)
	}
	p := keyspace.PartitionRecord{Queue: "q", Name: "Default", Next: 10, Start: 3, CreatedAt: 1, LastWriteAt: 2}
	if got, err := keyspace.DecodePartition(p.Encode(nil)); err != nil || got != p {
		t.Fatalf("partition: got %+v, %v", got, err)
	}
	x := keyspace.TxnRecord{Offset: 7, CreatedAt: 8, MessageID: keyspace.ID{3}}
	if got, err := keyspace.DecodeTxn(x.Encode(nil)); err != nil || got != x {
		t.Fatalf("txn: got %+v, %v", got, err)
	}
	c := keyspace.CursorRecord{Committed: -1, BatchEnd: 4, Lease: keyspace.ID{4}, LeaseExpiresAt: 9, RetryCount: 2,
		AttemptOffset: 0, AttemptCount: 3, TotalConsumed: 11, CreatedAt: 1, LastConsumedAt: 2, RetryAfter: 3}
	if got, err := keyspace.DecodeCursor(c.Encode(nil)); err != nil || got != c {
		t.Fatalf("cursor: got %+v, %v", got, err)
	}
	s := keyspace.SubRecord{Mode: 2, Timestamp: 99, CreatedAt: 98}
	if got, err := keyspace.DecodeSub(s.Encode(nil)); err != nil || got != s {
		t.Fatalf("sub: got %+v, %v", got, err)
	}
	d := keyspace.DeadLetterRecord{PartitionID: keyspace.ID{5}, Queue: "q", Partition: "p", Group: "g", Offset: 3,
		MessageID: keyspace.ID{6}, TransactionID: "t", HasTrace: true, TraceID: keyspace.ID{7}, ProducerSub: "sub",
		Payload: []byte(`{"a":1}`), Error: "bad", RetryCount: 3, EnqueuedAt: 10, Deliveries: 4}
	if got, err := keyspace.DecodeDeadLetter(d.Encode(nil)); err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("dead letter: got %+v, %v", got, err)
	}
	d.Sealed = true
	if got, err := keyspace.DecodeDeadLetter(d.Encode(nil)); err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("sealed dead letter: got %+v, %v", got, err)
	}
}

// TestDeadLetterRecord_Encode_Versions checks which version a row is
// written as: 1 without flags, byte for byte what it was before version 2
// existed plus nothing, and 2 with the sealed flag, one byte longer.
func TestDeadLetterRecord_Encode_Versions(t *testing.T) {
	d := keyspace.DeadLetterRecord{Queue: "q", Payload: []byte(`{}`)}
	plain := d.Encode(nil)
	d.Sealed = true
	sealed := d.Encode(nil)
	if plain[0] != 1 || sealed[0] != 2 {
		t.Fatalf("versions = %d (plain), %d (sealed), want 1 and 2", plain[0], sealed[0])
	}
	if !bytes.Equal(sealed[1:len(sealed)-1], plain[1:]) || sealed[len(sealed)-1] != 1 {
		t.Fatalf("version 2 is not version 1 plus a flags byte:\n%x\n%x", plain, sealed)
	}
}

func TestDecodeDeadLetter_Corrupt(t *testing.T) {
	d := keyspace.DeadLetterRecord{Queue: "q", Payload: []byte(`{}`), Sealed: true}
	good := d.Encode(nil)
	withFlags := func(flags byte) []byte { return append(bytes.Clone(good[:len(good)-1]), flags) }
	cases := map[string]struct {
		b    []byte
		want string
	}{
		"unknown-version":      {append([]byte{3}, good[1:]...), "unknown version 3"},
		"version-0":            {append([]byte{0}, good[1:]...), "unknown version 0"},
		"v2-missing-flags":     {good[:len(good)-1], "short"},
		"v2-without-flags":     {withFlags(0), "version 2 without flags"},
		"v2-unknown-flag":      {withFlags(3), "unknown flags 0x2"},
		"v1-with-a-flags-byte": {append([]byte{1}, good[1:]...), "trailing"},
	}
	for name, c := range cases {
		_, err := keyspace.DecodeDeadLetter(c.b)
		if !errors.Is(err, keyspace.ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrCorrupt mentioning %q", name, err, c.want)
		}
	}
}

func TestRecords_Corrupt(t *testing.T) {
	c := keyspace.CursorRecord{Committed: 1}
	good := c.Encode(nil)
	cases := map[string][]byte{
		"empty":           {},
		"unknown-version": append([]byte{9}, good[1:]...),
		"short":           good[:len(good)-1],
		"trailing-bytes":  append(append([]byte{}, good...), 0),
	}
	for name, b := range cases {
		if _, err := keyspace.DecodeCursor(b); !errors.Is(err, keyspace.ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	d := keyspace.DeadLetterRecord{Payload: []byte("x")}
	b := d.Encode(nil)
	b[1+16] = 0x7f // queue name length now runs past the end
	if _, err := keyspace.DecodeDeadLetter(b); !errors.Is(err, keyspace.ErrCorrupt) {
		t.Errorf("long length: err = %v, want ErrCorrupt", err)
	}
	if _, _, err := keyspace.ParseSegment([]byte{byte(keyspace.FamilySegment), 1}); !errors.Is(err, keyspace.ErrCorrupt) {
		t.Errorf("short segment key: err = %v", err)
	}
}
