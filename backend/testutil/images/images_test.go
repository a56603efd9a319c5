package images

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEnsureBase(t *testing.T) {
	EnsureBase(t) // fails (does not skip) without Docker
	EnsureBase(t) // cached: no second inspect
}

func TestRepoRootAndMakeTarget(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "images", "base", "build.sh")); err != nil {
		t.Fatalf("repo root %s has no images/base/build.sh: %v", root, err)
	}
	mk := filepath.Join(t.TempDir(), "GNUmakefile")
	if err := os.WriteFile(mk, []byte("build:\n\tgo build\nimage: ## base image\n\timages/base/build.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !hasMakeTarget(mk, "image") || hasMakeTarget(mk, "images") || hasMakeTarget(mk+".missing", "image") {
		t.Fatal("hasMakeTarget misreads the makefile")
	}
}
