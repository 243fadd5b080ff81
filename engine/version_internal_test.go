package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/queenmq/queen/engine/keyspace"
)

// A store written by a newer binary (a higher format version) is refused
// at open, naming both versions, and left as it is.
func TestOpen_NewerFormatRefused(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	newer := uint64(keyspace.FormatVersion + 1)
	if err := e.db.Set(keyspace.Meta(keyspace.MetaVersion), binary.BigEndian.AppendUint64(nil, newer), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // refused again: the first refusal changed nothing
		_, err = Open(dir, DefaultOptions())
		if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("store %d, binary %d", newer, keyspace.FormatVersion)) {
			t.Fatalf("open a format-%d store: %v, want ErrNewerFormat naming both versions", newer, err)
		}
	}
}
