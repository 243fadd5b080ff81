package cluster_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/queenmq/queen/cluster"
)

// wirePaths is every internal path as nodes send it, written out: nodes of
// the older binary call these in a rolling upgrade, so a constant changed
// here is a change of the wire, not a rename.
var wirePaths = map[string]struct{ got, want string }{
	"ProposePath":   {cluster.ProposePath, "/internal/v1/propose"},
	"ReadPath":      {cluster.ReadPath, "/internal/v1/read"},
	"BackupPath":    {cluster.BackupPath, "/internal/v1/backup"},
	"MovePath":      {cluster.MovePath, "/internal/v1/move"},
	"ReadIndexPath": {cluster.ReadIndexPath, "/internal/v1/read-index"},
	"JoinPath":      {cluster.JoinPath, "/internal/v1/cluster/join"},
	"LeavePath":     {cluster.LeavePath, "/internal/v1/cluster/leave"},
	"StoragePath":   {cluster.StoragePath, "/internal/v1/cluster/storage"},
	"AnalyticsPath": {cluster.AnalyticsPath, "/internal/v1/cluster/analytics"},
}

// TestPaths_Wire pins each internal path to its wire string, and fails on
// a constant of paths.go that is not pinned here.
func TestPaths_Wire(t *testing.T) {
	for name, p := range wirePaths {
		if p.got != p.want {
			t.Errorf("cluster.%s = %q, want %q: the path is part of the wire between nodes (paths.go)", name, p.got, p.want)
		}
	}
	f, err := parser.ParseFile(token.NewFileSet(), "paths.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	declared := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				declared++
				if _, ok := wirePaths[n.Name]; !ok {
					t.Errorf("paths.go declares %s, which wirePaths does not pin to its wire string", n.Name)
				}
			}
		}
	}
	if declared != len(wirePaths) {
		t.Errorf("paths.go declares %d paths, wirePaths pins %d", declared, len(wirePaths))
	}
}

// TestPaths_DeclaredOnce fails on a string literal holding "/internal/" (or
// starting "/internal") in any non-test .go file of the module but
// paths.go: an internal path written out where it is used, which a rename
// would miss. Import paths (the module's internal/ packages) and comments
// (the route docs, checked against the router by the server's own test)
// are not paths a node calls.
func TestPaths_DeclaredOnce(t *testing.T) {
	inPaths := 0
	walkSource(t, func(rel string, fset *token.FileSet, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(n.Value)
				if err != nil || !(strings.Contains(s, "/internal/") || strings.HasPrefix(s, "/internal")) {
					return true
				}
				if rel == filepath.Join("cluster", "paths.go") {
					inPaths++
					return true
				}
				t.Errorf("%s:%d: %q: declare internal paths in cluster/paths.go and use the constant", rel, fset.Position(n.Pos()).Line, s)
			}
			return true
		})
	})
	if inPaths != len(wirePaths) {
		t.Errorf("found %d internal paths in cluster/paths.go, want %d: the walk does not see them", inPaths, len(wirePaths))
	}
}

// walkSource parses every non-test .go file of the module (not of the
// modules inside it, bench/jetstream) and calls fn with its path from the
// module's root.
func walkSource(t *testing.T, fn func(rel string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		fn(rel, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
