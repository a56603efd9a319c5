package tasks

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func hashOf(t *testing.T, b *types.BuildConfig) (*buildContext, string) {
	t.Helper()
	img := &buildContext{Service: "s"}
	if err := img.prepare(b); err != nil {
		t.Fatal(err)
	}
	return img, img.Hash
}

// The content hash covers the context's files, the Dockerfile, the build
// args and the target, and nothing else (not mtimes).
func TestContentHash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "ctx")
	write(t, filepath.Join(ctxDir, "Dockerfile"), "FROM scratch\nCOPY app /app\n")
	write(t, filepath.Join(ctxDir, "app"), "v1")
	v := "1"
	b := &types.BuildConfig{Context: ctxDir, Dockerfile: "Dockerfile", Args: types.MappingWithEquals{"A": &v}}
	_, h1 := hashOf(t, b)
	if _, again := hashOf(t, b); again != h1 {
		t.Fatal("hash not stable")
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(ctxDir, "app"), old, old); err != nil {
		t.Fatal(err)
	}
	if _, h := hashOf(t, b); h != h1 {
		t.Fatal("mtime changed the hash")
	}
	write(t, filepath.Join(ctxDir, "app"), "v2")
	_, h2 := hashOf(t, b)
	if h2 == h1 {
		t.Fatal("a file change did not change the hash")
	}
	v2 := "2"
	b.Args = types.MappingWithEquals{"A": &v2}
	if _, h := hashOf(t, b); h == h2 {
		t.Fatal("a build arg change did not change the hash")
	}
	b.Target = "other"
	if _, h := hashOf(t, b); h == h2 {
		t.Fatal("a target change did not change the hash")
	}
}

// A Dockerfile outside the context (or inline) travels inside the tar.
func TestContextTar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "ctx")
	write(t, filepath.Join(ctxDir, "sub", "file.txt"), "hello")
	write(t, filepath.Join(dir, "outside.Dockerfile"), "FROM scratch\n")
	img, _ := hashOf(t, &types.BuildConfig{Context: ctxDir, Dockerfile: filepath.Join(dir, "outside.Dockerfile")})
	var buf bytes.Buffer
	if err := img.writeContext(&buf); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if got["sub/file.txt"] != "hello" || got[dockerfileInTar] != "FROM scratch\n" {
		t.Fatalf("tar: %v", got)
	}
	inline, _ := hashOf(t, &types.BuildConfig{Context: ctxDir, DockerfileInline: "FROM scratch\nLABEL x=1\n"})
	if inline.dockerfile != "" || string(inline.inline) != "FROM scratch\nLABEL x=1\n" {
		t.Fatal("inline Dockerfile not carried")
	}
}
