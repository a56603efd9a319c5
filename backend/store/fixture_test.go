package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureUsers are the non-test packages allowed to insert records past the
// start-phase check: the benchmarks, which load history at scale.
var fixtureUsers = []string{"bench"}

// InsertFixture(Tx) skips the gate's start-phase check; only tests and
// benchmarks may call it. A production caller would let a record begin its
// timeline at a phase no move led to.
func TestInsertFixtureOnlyInTestsAndBenchmarks(t *testing.T) {
	root := filepath.Join("..") // backend/
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "store" {
			return nil // defines it
		}
		for _, ok := range fixtureUsers {
			if pkg == ok || strings.HasPrefix(pkg, ok+"/") {
				return nil
			}
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "InsertFixture") {
				t.Errorf("%s: production code calls %s; insert at a start phase (sandbox.StartPhases) and move the record through store.Transition", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
