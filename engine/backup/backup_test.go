package backup_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/queenmq/queen/engine/backup"
)

// stream is a group's engine stream as WriteGroup takes it.
type stream []byte

func (s stream) WriteTo(w io.Writer) (int64, error) {
	// Odd-sized writes, as a buffered writer's flushes come.
	var n int64
	for b := []byte(s); len(b) > 0; {
		k := min(len(b), 100_003)
		m, err := w.Write(b[:k])
		n += int64(m)
		if err != nil {
			return n, err
		}
		b = b[k:]
	}
	return n, nil
}

// sample writes a backup of two groups, one spanning several chunks.
func sample(t *testing.T) ([]byte, backup.Manifest, [][]byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3*backup.ChunkSize+12345)
	for i := range big {
		big[i] = "abcdefgh"[rng.IntN(8)] // compressible, not trivially
	}
	streams := [][]byte{[]byte("QSNP\x01small"), big}
	m := backup.Manifest{Created: time.Unix(1700000000, 0).UTC(), Node: "n1", Members: []string{"n1", "n2"},
		Groups: []backup.Group{{ID: 0, Index: 7, Queues: map[string]int64{"q": 3}}, {ID: 1, Index: 42}}}
	var buf bytes.Buffer
	w, err := backup.NewWriter(&buf, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		if err := w.WriteGroup(stream(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	m.Format = backup.Version
	return buf.Bytes(), m, streams
}

func TestReader_RoundTrip(t *testing.T) {
	file, m, streams := sample(t)
	r, err := backup.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := r.Manifest(); got.Node != m.Node || len(got.Groups) != 2 || got.Groups[0].Queues["q"] != 3 || got.Format != 1 {
		t.Fatalf("manifest = %+v, want %+v", got, m)
	}
	for i := 0; ; i++ {
		g, gr, err := r.Next()
		if errors.Is(err, io.EOF) {
			if i != len(streams) {
				t.Fatalf("EOF after %d groups, want %d", i, len(streams))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(gr)
		if err != nil {
			t.Fatal(err)
		}
		if g.ID != m.Groups[i].ID || !bytes.Equal(got, streams[i]) {
			t.Fatalf("group %d: id %d, %d bytes; want id %d, %d bytes", i, g.ID, len(got), m.Groups[i].ID, len(streams[i]))
		}
	}
	if len(file) > len(streams[1]) {
		t.Fatalf("file of %d bytes: the chunks were not compressed", len(file))
	}
}

// Every cut of the file short of its end is refused: whatever the cut, the
// trailer is missing.
func TestVerify_Truncated(t *testing.T) {
	file, _, _ := sample(t)
	for _, n := range []int{0, 3, 5, 20, len(file) / 3, len(file) / 2, len(file) - 30, len(file) - 29, len(file) - 1} {
		_, err := backup.Verify(bytes.NewReader(file[:n]))
		if !errors.Is(err, backup.ErrCorrupt) {
			t.Fatalf("cut at %d of %d: err = %v, want ErrCorrupt", n, len(file), err)
		}
	}
	if _, err := backup.Verify(bytes.NewReader(file)); err != nil {
		t.Fatalf("whole file: %v", err)
	}
}

// A flipped bit anywhere is found.
func TestVerify_FlippedByte(t *testing.T) {
	file, _, _ := sample(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		at := rng.IntN(len(file))
		bad := bytes.Clone(file)
		bad[at] ^= 1 << rng.IntN(8)
		_, err := backup.Verify(bytes.NewReader(bad))
		if !errors.Is(err, backup.ErrCorrupt) && !errors.Is(err, backup.ErrNewer) {
			t.Fatalf("flip at %d of %d: err = %v, want ErrCorrupt", at, len(file), err)
		}
	}
}

func TestVerify_TrailingBytes(t *testing.T) {
	file, _, _ := sample(t)
	_, err := backup.Verify(bytes.NewReader(append(bytes.Clone(file), 0)))
	if !errors.Is(err, backup.ErrCorrupt) || !strings.Contains(err.Error(), "after the trailer") {
		t.Fatalf("err = %v, want ErrCorrupt: bytes after the trailer", err)
	}
}

// A newer format is refused, naming both versions.
func TestNewReader_Newer(t *testing.T) {
	file, _, _ := sample(t)
	bad := bytes.Clone(file)
	bad[4] = backup.Version + 1
	_, err := backup.NewReader(bytes.NewReader(bad))
	if !errors.Is(err, backup.ErrNewer) || !strings.Contains(err.Error(), "version 2") || !strings.Contains(err.Error(), "up to 1") {
		t.Fatalf("err = %v, want ErrNewer naming versions 2 and 1", err)
	}
}

func TestNewReader_NotABackup(t *testing.T) {
	_, err := backup.NewReader(strings.NewReader("QSNP\x01 an engine stream"))
	if !errors.Is(err, backup.ErrCorrupt) || !strings.Contains(err.Error(), "not a backup file") {
		t.Fatalf("err = %v, want ErrCorrupt: not a backup file", err)
	}
}

// A writer whose groups do not match its manifest does not finish a file.
func TestWriter_Close_MissingGroup(t *testing.T) {
	var buf bytes.Buffer
	w, err := backup.NewWriter(&buf, backup.Manifest{Groups: []backup.Group{{ID: 1}, {ID: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteGroup(stream("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close with a group missing: no error")
	}
	if _, err := backup.Verify(bytes.NewReader(buf.Bytes())); !errors.Is(err, backup.ErrCorrupt) {
		t.Fatalf("Verify of the unfinished file: %v, want ErrCorrupt", err)
	}
}

// BenchmarkWriter measures a backup's compression and framing of a
// 32 MiB stream (compressible, not trivially); MB/s is the stream's.
func BenchmarkWriter(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	// JSON messages with random ids and numbers, as a queue holds.
	data := make([]byte, 0, 32<<20)
	for len(data) < 32<<20 {
		data = fmt.Appendf(data, `{"orderId":"%016x%016x","amount":%d,"note":"`, rng.Uint64(), rng.Uint64(), rng.IntN(1e6))
		for range 64 {
			data = append(data, "abcdefghijklmnopqrstuvwxyz0123456789 "[rng.IntN(37)])
		}
		data = append(data, `"}`...)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		w, err := backup.NewWriter(io.Discard, backup.Manifest{Groups: []backup.Group{{ID: 1}}})
		if err != nil {
			b.Fatal(err)
		}
		if err := w.WriteGroup(stream(data)); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// withManifest returns file with its manifest frame's JSON edited by edit,
// the frame's length and CRC made to match: a file some tool wrote, or a
// newer queen, intact as a file.
func withManifest(t *testing.T, file []byte, edit func([]byte) []byte) []byte {
	t.Helper()
	const at = 5 // "QBAK" and the version byte
	n := binary.BigEndian.Uint32(file[at+1:])
	js := edit(bytes.Clone(file[at+5 : at+5+int(n)]))
	head := append([]byte{'M'}, binary.BigEndian.AppendUint32(nil, uint32(len(js)))...)
	crc := crc32.Update(crc32.Checksum(head, crc32.MakeTable(crc32.Castagnoli)), crc32.MakeTable(crc32.Castagnoli), js)
	out := append(bytes.Clone(file[:at]), head...)
	out = append(out, js...)
	out = binary.BigEndian.AppendUint32(out, crc)
	return append(out, file[at+5+int(n)+4:]...)
}

// A manifest whose format is newer than this binary reads is refused as a
// newer header is, naming both versions; one that disagrees with the
// header is corrupt. Before, a header of 1 let a manifest of 2 restore.
func TestNewReader_NewerManifest(t *testing.T) {
	file, _, _ := sample(t)
	for _, tc := range []struct {
		format string
		want   error
		text   []string
	}{
		{`"format":2`, backup.ErrNewer, []string{"format version 2", "up to 1"}},
		{`"format":0`, backup.ErrCorrupt, []string{"format version 0", "header 1"}},
	} {
		bad := withManifest(t, file, func(js []byte) []byte { return bytes.Replace(js, []byte(`"format":1`), []byte(tc.format), 1) })
		_, err := backup.NewReader(bytes.NewReader(bad))
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: err = %v, want %v", tc.format, err, tc.want)
		}
		for _, s := range tc.text {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %q does not say %q", tc.format, err, s)
			}
		}
		if _, err := backup.Verify(bytes.NewReader(bad)); !errors.Is(err, tc.want) {
			t.Fatalf("%s: Verify: %v, want %v", tc.format, err, tc.want)
		}
	}
	// The helper itself leaves a good file good.
	same := withManifest(t, file, func(js []byte) []byte { return js })
	if _, err := backup.Verify(bytes.NewReader(same)); err != nil {
		t.Fatal(err)
	}
}
