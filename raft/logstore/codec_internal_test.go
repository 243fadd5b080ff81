package logstore

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	hraft "github.com/hashicorp/raft"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden files in testdata")

// golden is the entry behind testdata/log-v1.golden. Changing it, or the
// bytes it encodes to, changes the on-disk format.
var golden = hraft.Log{
	Index:      0x0102030405060708,
	Term:       7,
	Type:       hraft.LogCommand,
	Data:       []byte("payload"),
	Extensions: []byte("ext"),
	AppendedAt: time.Unix(1_700_000_000, 123_456_789),
}

// encode returns l's value; the test entries all fit the format.
func encode(l *hraft.Log) []byte {
	n, err := encodedLen(l)
	if err != nil {
		panic(err)
	}
	v := make([]byte, n)
	encodeLog(v, l)
	return v
}

// TestEncodeLog_Golden pins format version 1 byte for byte. Run with
// -rewrite only together with a version bump and a decoder for the old one.
func TestEncodeLog_Golden(t *testing.T) {
	path := filepath.Join("testdata", "log-v1.golden")
	got := hex.Dump(encode(&golden))
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
	// The golden bytes still decode to the golden entry.
	b, err := undump(string(want))
	if err != nil {
		t.Fatal(err)
	}
	var l hraft.Log
	if err := decodeLog(b, &l); err != nil {
		t.Fatalf("decode golden: %v", err)
	}
	if l.Index != golden.Index || l.Term != golden.Term || l.Type != golden.Type ||
		!bytes.Equal(l.Data, golden.Data) || !bytes.Equal(l.Extensions, golden.Extensions) ||
		!l.AppendedAt.Equal(golden.AppendedAt) {
		t.Errorf("decode golden = %+v, want %+v", l, golden)
	}
}

// undump parses the output of hex.Dump.
func undump(s string) ([]byte, error) {
	var b []byte
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		_, rest, _ := strings.Cut(line, "  ")
		hexPart, _, _ := strings.Cut(rest, "  |")
		hexPart = strings.Join(strings.Fields(hexPart), "")
		chunk, err := hex.DecodeString(hexPart)
		if err != nil {
			return nil, err
		}
		b = append(b, chunk...)
	}
	return b, nil
}

// reseal recomputes the checksum so a test can corrupt a field behind it.
func reseal(v []byte) []byte {
	body := v[:len(v)-checksumLen]
	binary.BigEndian.PutUint32(v[len(body):], crc32.Checksum(body, castagnoli))
	return v
}

// TestDecodeLog_Corrupt names each failure the decoder must report as
// ErrCorrupt rather than panic or decode garbage.
func TestDecodeLog_Corrupt(t *testing.T) {
	valid := func() []byte { return encode(&golden) }
	cases := map[string][]byte{
		"empty":              nil,
		"shorter-than-frame": valid()[:valueOverhead-1],
		"checksum-mismatch": func() []byte {
			v := valid()
			v[offTerm] ^= 0x01
			return v
		}(),
		"unknown-version": func() []byte {
			v := valid()
			v[offVersion] = 2
			return reseal(v)
		}(),
		"data-length-too-long": func() []byte {
			v := valid()
			binary.BigEndian.PutUint32(v[offDataLen:], 1<<32-1)
			return reseal(v)
		}(),
		"extensions-length-too-short": func() []byte {
			v := valid()
			binary.BigEndian.PutUint32(v[offExtLen:], 0)
			return reseal(v)
		}(),
		"nanoseconds-out-of-range": func() []byte {
			v := valid()
			binary.BigEndian.PutUint32(v[offNanos:], uint32(time.Second))
			return reseal(v)
		}(),
		"trailing-bytes": reseal(append(valid(), 0, 0, 0, 0)),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			var l hraft.Log
			if err := decodeLog(v, &l); !errors.Is(err, ErrCorrupt) {
				t.Errorf("decode: err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestDecodeLog_Damage: every single-byte change and every truncation of a
// valid value is caught (CRC-32C detects all bursts up to 32 bits).
func TestDecodeLog_Damage(t *testing.T) {
	valid := encode(&golden)
	var l hraft.Log
	for i := range valid {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			v := bytes.Clone(valid)
			v[i] ^= mask
			if err := decodeLog(v, &l); !errors.Is(err, ErrCorrupt) {
				t.Errorf("byte %d ^ %#x: err = %v, want ErrCorrupt", i, mask, err)
			}
		}
	}
	for n := range len(valid) {
		if err := decodeLog(valid[:n], &l); !errors.Is(err, ErrCorrupt) {
			t.Errorf("truncated to %d: err = %v, want ErrCorrupt", n, err)
		}
	}
}

// TestDecodeLog_NoAlias: the decoded entry owns its bytes, and Data cannot
// grow into Extensions.
func TestDecodeLog_NoAlias(t *testing.T) {
	v := encode(&golden)
	var l hraft.Log
	if err := decodeLog(v, &l); err != nil {
		t.Fatal(err)
	}
	clear(v)
	_ = append(l.Data, 'X')
	if string(l.Data) != "payload" || string(l.Extensions) != "ext" {
		t.Errorf("decoded Data %q Extensions %q changed with the input or each other", l.Data, l.Extensions)
	}
}

// TestStore_GetLog_Corrupt writes bad values under log keys straight into
// Pebble: GetLog and Check must return errors wrapping ErrCorrupt.
func TestStore_GetLog_Corrupt(t *testing.T) {
	cases := map[string][]byte{
		"garbage":        []byte("not a log entry"),
		"index-mismatch": encode(&hraft.Log{Index: 99, Term: 1}),
		"checksum-mismatch": func() []byte {
			v := encode(&hraft.Log{Index: 1, Term: 1, Data: []byte("x")})
			v[headerLen] = 'y'
			return v
		}(),
	}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			err = s.db.Set(newKeyspace(1).logKey(1), v, pebble.Sync)
			if err = errors.Join(err, s.Close()); err != nil {
				t.Fatal(err)
			}
			// Reopening reads only keys, so it succeeds and finds the entry.
			if s, err = Open(dir, DefaultOptions()); err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer s.Close()
			if first, _ := s.FirstIndex(); first != 1 {
				t.Errorf("first index = %d, want 1", first)
			}
			var l hraft.Log
			if err := s.GetLog(1, &l); !errors.Is(err, ErrCorrupt) {
				t.Errorf("get log: err = %v, want ErrCorrupt", err)
			}
			if err := s.Check(); !errors.Is(err, ErrCorrupt) {
				t.Errorf("check: err = %v, want ErrCorrupt", err)
			}
		})
	}
}

// FuzzDecodeLog: any input either fails with ErrCorrupt or decodes to an
// entry that encodes back to the same bytes (the format is canonical). The
// checksum is recomputed first, so the fuzzer reaches the checks behind it.
func FuzzDecodeLog(f *testing.F) {
	f.Add(encode(&golden))
	f.Add(encode(&hraft.Log{Index: 1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		if len(v) >= checksumLen {
			v = reseal(bytes.Clone(v))
		}
		var l hraft.Log
		err := decodeLog(v, &l)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode: err = %v, want ErrCorrupt", err)
			}
			return
		}
		if got := encode(&l); !bytes.Equal(got, v) {
			t.Fatalf("re-encoded\n%x\nwant\n%x", got, v)
		}
	})
}

// Group 1's keys are the store's keys from before there were groups, byte
// for byte; another group's carry familyGroup and its id in front.
func TestKeyspace_Bytes(t *testing.T) {
	for _, c := range []struct {
		group       uint32
		log, stable string
	}{
		{1, "01000000000000002a", "024b"},
		{2, "030000000201000000000000002a", "0300000002024b"},
		{0, "030000000001000000000000002a", "0300000000024b"},
	} {
		ks := newKeyspace(c.group)
		if got := hex.EncodeToString(ks.logKey(42)); got != c.log {
			t.Errorf("group %d log key %s, want %s", c.group, got, c.log)
		}
		if got := hex.EncodeToString(ks.stableKey([]byte("K"))); got != c.stable {
			t.Errorf("group %d stable key %s, want %s", c.group, got, c.stable)
		}
		if i, err := ks.parseLogKey(ks.logKey(42)); err != nil || i != 42 {
			t.Errorf("group %d parses its key as %d, %v", c.group, i, err)
		}
		if _, err := ks.parseLogKey(newKeyspace(c.group + 1).logKey(42)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("group %d parses group %d's key: %v", c.group, c.group+1, err)
		}
	}
}
