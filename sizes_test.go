package queen_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSizes keeps two limits of issue 27 true as the code grows: no
// non-test Go file above 800 lines (a file that long holds more than one
// concern), and package server's own non-test files under 6,000 lines in
// all (the edge keeps the router, auth glue, the error table and the
// handlers; everything else has a package of its own under server/).
func TestSizes(t *testing.T) {
	const fileMost, serverMost = 800, 6000
	server := 0
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
		lines := bytes.Count(b, []byte("\n"))
		if lines > fileMost {
			t.Errorf("%s has %d lines, more than %d: split it by concern", path, lines, fileMost)
		}
		if filepath.Dir(path) == "server" {
			server += lines
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if server == 0 || server >= serverMost {
		t.Errorf("package server's non-test files hold %d lines, want 1 to %d: move what is not a handler to a sub-package", server, serverMost-1)
	}
}
