package engine_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// TestEngine_Open_ReadOnlyNoStore: read-only, a directory that does not
// exist or holds no store is ErrNoStore, and nothing is created.
func TestEngine_Open_ReadOnlyNoStore(t *testing.T) {
	opts := enginetest.Options()
	opts.ReadOnly = true
	missing := filepath.Join(t.TempDir(), "typo", "engine")
	if _, err := engine.Open(missing, opts); !errors.Is(err, engine.ErrNoStore) {
		t.Fatalf("open of a missing directory: %v, want ErrNoStore", err)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open created %s: %v", filepath.Dir(missing), err)
	}
	empty := t.TempDir()
	if _, err := engine.Open(empty, opts); !errors.Is(err, engine.ErrNoStore) {
		t.Fatalf("open of an empty directory: %v, want ErrNoStore", err)
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Fatalf("open left %v in an empty directory (%v)", entries, err)
	}
}

// TestEngine_Open_ReadOnlyReadsTheStore: a store opened read-only holds what
// was written (same digest and applied index), passes Check, and starts
// no batch.
func TestEngine_Open_ReadOnlyReadsTheStore(t *testing.T) {
	h := enginetest.MustOpen(t)
	h.PushOne("q", "", "t1", `{"a":1}`)
	h.PushOne("q", "p", "t2", `{"a":2}`)
	b, err := h.Engine.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(7); err != nil {
		t.Fatal(err)
	}
	want, err := h.Engine.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Engine.Close(); err != nil {
		t.Fatal(err)
	}
	opts := enginetest.Options()
	opts.ReadOnly = true
	ro, err := engine.Open(h.Dir, opts)
	if err != nil {
		t.Fatalf("open read-only: %v", err)
	}
	h.Engine = ro // checked and closed at cleanup
	if got, err := ro.Digest(); err != nil || got != want {
		t.Fatalf("digest read-only = %x, %v; written %x", got, err, want)
	}
	if got := ro.Applied(); got != 7 {
		t.Fatalf("applied = %d, want 7", got)
	}
	if _, err := ro.Begin(); !errors.Is(err, engine.ErrReadOnly) {
		t.Fatalf("Begin on a read-only engine: %v, want ErrReadOnly", err)
	}
}
