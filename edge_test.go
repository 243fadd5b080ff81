package queen_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestEdge_NoCallbackInterface keeps route handlers in package server
// (issue 43): no package under server/ declares an interface through which
// it would call back into the server for a request (a method taking a
// *fasthttp.RequestCtx: writing an error, forwarding, relaying), nor one
// named Host. A leaf takes plain values, functions or reads of the broker;
// a handler that needs the edge lives in the edge.
func TestEdge_NoCallbackInterface(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("server", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Dir(path) == "server" || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			iface, ok := spec.Type.(*ast.InterfaceType)
			if !ok {
				return true
			}
			if spec.Name.Name == "Host" {
				t.Errorf("%s: interface Host: a route package calls back into the server", fset.Position(spec.Pos()))
			}
			for _, m := range iface.Methods.List {
				fn, ok := m.Type.(*ast.FuncType)
				if !ok {
					continue
				}
				for _, p := range fn.Params.List {
					if star, ok := p.Type.(*ast.StarExpr); ok {
						if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "RequestCtx" {
							t.Errorf("%s: %s.%s takes a request: a callback into the server; put the handler in package server",
								fset.Position(m.Pos()), spec.Name.Name, m.Names[0].Name)
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
