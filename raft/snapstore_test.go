package raft

import (
	"fmt"
	"io"
	"strings"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/queenmq/queen/engine"
	"github.com/queenmq/queen/engine/enginetest"
)

// storeRef files a reference snapshot at index into a fresh file store.
func storeRef(t *testing.T, index uint64) (hraft.SnapshotStore, string) {
	t.Helper()
	files, err := hraft.NewFileSnapshotStore(t.TempDir(), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := hraft.NewInmemTransport("")
	sink, err := files.Create(hraft.SnapshotVersionMax, index, 1, hraft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := refSnapshot(index).Persist(sink); err != nil {
		t.Fatal(err)
	}
	return files, sink.ID()
}

// Opening a reference streams the engine's current state; restoring that
// stream elsewhere gives an identical store.
func TestRefStore_OpenStreamsTheEngine(t *testing.T) {
	t.Parallel()
	src := enginetest.MustOpen(t)
	for i := 0; i < 300; i++ {
		src.PushOne(fmt.Sprintf("q%d", i%7), "", fmt.Sprintf("t%d", i), strings.Repeat("x", i))
	}
	src.Do(func(b *engine.Batch) {}) // applied index stays 0: a reference at 0
	files, id := storeRef(t, 0)
	list, err := files.List()
	if err != nil || len(list) != 1 || list[0].Size != int64(refLen) {
		t.Fatalf("stored snapshot = %+v, %v; want one of %d bytes", list, err, refLen)
	}

	s := &refStore{SnapshotStore: files, e: src.Engine}
	meta, rc, err := s.Open(id)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	body, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatalf("read stream: %v", err)
	}
	if int64(len(body)) != meta.Size || meta.Size < 300*100 {
		t.Fatalf("stream of %d bytes, meta.Size %d", len(body), meta.Size)
	}
	dst := enginetest.MustOpen(t)
	if err := dst.Restore(strings.NewReader(string(body))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	a, _ := src.Digest()
	b, _ := dst.Digest()
	if a != b {
		t.Fatalf("digests differ after restoring the expanded reference")
	}
}

// A reference the engine is behind cannot be served: the state it names is
// gone, and sending an older one would lose entries.
func TestRefStore_RefusesAReferenceAheadOfTheEngine(t *testing.T) {
	t.Parallel()
	e := enginetest.MustOpen(t)
	files, id := storeRef(t, 100)
	s := &refStore{SnapshotStore: files, e: e.Engine}
	if _, rc, err := s.Open(id); err == nil {
		rc.Close()
		t.Fatalf("open of a reference at 100 with the engine at %d succeeded", e.Applied())
	}
}

// Closing a stream half read stops its producer (no goroutine or engine
// snapshot left behind: the engine closes cleanly at cleanup).
func TestRefStore_CloseMidStream(t *testing.T) {
	t.Parallel()
	e := enginetest.MustOpen(t)
	for i := 0; i < 200; i++ {
		e.PushOne("q", "", fmt.Sprintf("t%d", i), strings.Repeat("y", 2000))
	}
	files, id := storeRef(t, 0)
	s := &refStore{SnapshotStore: files, e: e.Engine}
	_, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
}
