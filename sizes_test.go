package queen_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSizes keeps files readable as the code grows: no non-test Go file
// above 800 lines (a file that long holds more than one concern). The bound
// on package server's lines that issue 27 set is retired (issue 43):
// packages are cut where an abstraction has its own tests and invariants,
// not to meet a line count.
func TestSizes(t *testing.T) {
	const fileMost = 800
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if lines := bytes.Count(b, []byte("\n")); lines > fileMost {
			t.Errorf("%s has %d lines, more than %d: split it by concern", path, lines, fileMost)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
