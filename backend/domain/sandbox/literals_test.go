package sandbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
)

// literalAllowed lists the few string literals, per file under backend/,
// that spell a phase or state name but mean something else.
var literalAllowed = map[string][]string{
	"api/server.go":           {"ready"},             // the health check's own status
	"tasks/usecase_pause.go":  {"paused"},            // a verb in a message
	"tasks/usecase_delete.go": {"deleted"},           // a timeline note
	"store/webhooks.go":       {"pending", "failed"}, // webhook delivery statuses
	"e2bapi/events.go":        {"failed"},            // E2B's delivery status (success|failed)
}

// skipped directories speak another vocabulary or own the names:
// the domain itself, and the compute adapters (an engine's or E2B's own
// instance states, which the reconciler maps onto phases), and the E2B
// clients generated from E2B's documents (E2B's states and delivery
// statuses, for tests).
var skipped = []string{"domain", "compute", "e2bapi/internal/e2bclient", "e2bapi/internal/e2bevents"}

// No phase or state name is spelled outside the domain packages: not as a
// Go string literal, nor quoted inside SQL (build IN-lists from the sets
// with store.SQLList). Schema statements (CREATE …) are the store's and
// keep their literals, as migrations must not change once applied.
func TestNoPhaseLiteralsOutsideDomain(t *testing.T) {
	names := map[string]bool{}
	for _, p := range sandbox.Phases {
		names[string(p)] = true
	}
	for _, s := range sandbox.States {
		names[string(s)] = true
	}
	for _, s := range sandbox.LedgerStates {
		names[string(s)] = true
	}
	for _, s := range taskenv.States {
		names[string(s)] = true
	}
	var alts []string
	for n := range names {
		alts = append(alts, regexp.QuoteMeta(n))
	}
	quoted := regexp.MustCompile(`'(` + strings.Join(alts, "|") + `)'`)

	root := filepath.Join("..", "..")
	files := 0
	used := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			for _, s := range skipped {
				if rel == s {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		tags := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
				tags[fl.Tag] = true
			}
			return true
		})
		for _, imp := range f.Imports {
			tags[imp.Path] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || tags[lit] {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			var found []string
			if names[v] {
				found = append(found, v)
			}
			if !strings.Contains(strings.ToUpper(v), "CREATE ") {
				for _, m := range quoted.FindAllStringSubmatch(v, -1) {
					found = append(found, m[1])
				}
			}
			for _, name := range found {
				allowed := false
				for _, a := range literalAllowed[rel] {
					allowed = allowed || a == name
				}
				used[rel+" "+name] = used[rel+" "+name] || allowed
				if !allowed {
					t.Errorf("%s: %q spells a phase or state: use the names and sets of backend/domain", fset.Position(lit.Pos()), name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel, lits := range literalAllowed {
		for _, l := range lits {
			if !used[rel+" "+l] {
				t.Errorf("literalAllowed lists %q in %s, which no longer spells it: remove the entry", l, rel)
			}
		}
	}
	if files < 50 {
		t.Fatalf("walked only %d files: is %s the backend?", files, root)
	}
}
