package bench

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestPayloads(t *testing.T) {
	for _, size := range []int{MinPayloadSize, 17, 22, 23, 64, 200, 319, 320, 321, 512, 1024, 4096, 65536} {
		docs := Payloads(50, size, 42)
		if len(docs) != 50 {
			t.Fatalf("size %d: %d documents, want 50", size, len(docs))
		}
		seen := map[string]bool{}
		for i, d := range docs {
			if len(d) != size {
				t.Fatalf("size %d: document %d has %d bytes", size, i, len(d))
			}
			if !json.Valid(d) {
				t.Fatalf("size %d: document %d is not JSON: %s", size, i, d)
			}
			var v map[string]any
			if err := json.Unmarshal(d, &v); err != nil {
				t.Fatalf("size %d: document %d is not an object: %v", size, i, err)
			}
			seen[string(d)] = true
		}
		if size >= 64 && len(seen) < 45 {
			t.Errorf("size %d: only %d distinct documents of 50", size, len(seen))
		}
	}
}

func TestPayloads_Deterministic(t *testing.T) {
	a, b, c := Payloads(10, 1024, 7), Payloads(10, 1024, 7), Payloads(10, 1024, 8)
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("document %d differs between two runs with one seed", i)
		}
	}
	if bytes.Equal(a[0], c[0]) {
		t.Fatal("two seeds gave the same document")
	}
}

// A batch of 1 KiB orders compresses like real JSON does: several times,
// but nowhere near the hundreds a padded or repeated body would.
func TestPayloads_Compressibility(t *testing.T) {
	raw := bytes.Join(Payloads(100, 1024, 3), nil)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	ratio := float64(len(raw)) / float64(len(enc.EncodeAll(raw, nil)))
	if ratio < 2 || ratio > 12 {
		t.Fatalf("compression ratio %.1f, want a realistic 2-12", ratio)
	}
	t.Logf("zstd ratio on 100 documents: %.1f", ratio)
}
