package fuzz

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/queenmq/queen/engine/backup"
)

// FuzzBackupVerify reads any input as a backup file: what it refuses is
// refused with ErrCorrupt or ErrNewer (never a panic, never another error),
// and what it accepts round-trips: its manifest and group streams, written
// again by a Writer, read back as a complete file.
func FuzzBackupVerify(f *testing.F) {
	if seed, err := os.ReadFile("../engine/backup/testdata/v1.qbak"); err == nil {
		f.Add(seed)
	}
	f.Add([]byte("QBAK\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := backup.NewReader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, backup.ErrCorrupt) && !errors.Is(err, backup.ErrNewer) {
				t.Fatalf("NewReader: %v, want ErrCorrupt or ErrNewer", err)
			}
			return
		}
		defer r.Close()
		var streams [][]byte
		for {
			_, g, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				var b []byte
				b, err = io.ReadAll(g)
				streams = append(streams, b)
			}
			if err != nil {
				if !errors.Is(err, backup.ErrCorrupt) {
					t.Fatalf("read: %v, want ErrCorrupt", err)
				}
				return
			}
		}
		var again bytes.Buffer
		w, err := backup.NewWriter(&again, r.Manifest())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range streams {
			if err := w.WriteGroup(bytes.NewReader(s)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := backup.Verify(&again); err != nil {
			t.Fatalf("an accepted file's content, written again, does not verify: %v", err)
		}
	})
}
