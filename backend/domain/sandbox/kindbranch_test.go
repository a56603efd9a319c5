package sandbox_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// kindListAllowed are the files that name the task kind in a list of every
// kind (not a branch on it): the event types each kind emits.
var kindListAllowed = map[string]bool{"events/view.go": true}

// Issue 32: outside the task use cases (backend/tasks) and the kinds'
// declaration (backend/domain), no code branches on the task kind: not
// KindTask in Go, not 'task' in SQL. A property of a kind is declared once
// in the domain (AddressedAsSandbox, OwnInstance, GroupMemberKinds,
// LedgerStoppingKinds) and read everywhere else.
func TestNoTaskKindBranchesOutsideTasks(t *testing.T) {
	use := regexp.MustCompile(`\bKindTask\b|'task'`)
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "tasks" || rel == "domain" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || kindListAllowed[rel] {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if use.MatchString(line) {
				t.Errorf("backend/%s:%d branches on the task kind (declare the property in backend/domain/sandbox): %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked only %d files: is the test's root the backend directory?", files)
	}
}
