package store

import (
	"context"
	"database/sql"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// InsertFixture is storetest.InsertFixture for the store's own tests
// (storetest imports store, so they cannot import it).
func (db *DB) InsertFixture(ctx context.Context, r *Record) error {
	return db.Tx(ctx, func(tx *sql.Tx) error { return InsertFixtureTx(ctx, tx, r) })
}

// InsertFixtureTx is storetest.InsertFixtureTx for the store's own tests.
func InsertFixtureTx(ctx context.Context, tx *sql.Tx, r *Record) error {
	return insertRecordTx(ctx, tx, r)
}

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
		if pkg == "store" || strings.HasPrefix(pkg, "store/") {
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
		for _, im := range f.Imports {
			if strings.HasSuffix(im.Path.Value, "/backend/store/storetest\"") {
				t.Errorf("%s imports storetest: production code inserts at a start phase (sandbox.StartPhases) and moves the record through store.Transition", fset.Position(im.Pos()))
			}
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
