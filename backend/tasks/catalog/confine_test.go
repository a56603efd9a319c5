package catalog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTask makes a task directory (inside a parent holding a secret
// beside it) with compose's build section given.
func writeTask(t *testing.T, build string) (dir, parent string) {
	t.Helper()
	parent = t.TempDir()
	dir = filepath.Join(parent, "task")
	for p, body := range map[string]string{
		"secret/key":          "the backend's key",
		"secret/Dockerfile":   "FROM scratch\n",
		"task/app/Dockerfile": "FROM dreadnode/base:latest\n",
		"task/task.yaml":      "name: confined\nversion: 1.0.0\ninputs:\n  ctx: { default: ./app }\n",
		"task/compose.yaml":   "services:\n  app:\n    build:\n" + build,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(parent, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(parent, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, parent
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Fatalf("want a refusal naming %s, got %v", field, err)
	}
}

// TestBuildPathsConfined: a task's build context or Dockerfile outside its
// directory, through ".." or a symlink, is refused naming the field, at
// load and when an input puts it there; inside it loads. (Seen failing
// with checkBuildPaths off: every case loaded.)
func TestBuildPathsConfined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, _ := writeTask(t, "      context: ./app\n")
	if _, err := LoadTask(ctx, dir, "x"); err != nil {
		t.Fatalf("a context inside the task: %v", err)
	}

	dir, _ = writeTask(t, "      context: ../\n")
	_, err := LoadTask(ctx, dir, "x")
	wantField(t, err, "services.app.build.context")

	dir, _ = writeTask(t, "      context: ./app/../../secret\n")
	_, err = LoadTask(ctx, dir, "x")
	wantField(t, err, "services.app.build.context")

	dir, parent := writeTask(t, "      context: ./link\n")
	if err := os.Symlink(filepath.Join(parent, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	_, err = LoadTask(ctx, dir, "x")
	wantField(t, err, "services.app.build.context")
	if !strings.Contains(err.Error(), "symlink") {
		t.Errorf("the refusal does not say a symlink leads out: %v", err)
	}

	dir, _ = writeTask(t, "      context: ./app\n      dockerfile: ../../secret/Dockerfile\n")
	_, err = LoadTask(ctx, dir, "x")
	wantField(t, err, "services.app.build.dockerfile")

	dir, parent = writeTask(t, "      context: ./app\n      dockerfile: df\n")
	if err := os.Symlink(filepath.Join(parent, "secret", "Dockerfile"), filepath.Join(dir, "app", "df")); err != nil {
		t.Fatal(err)
	}
	_, err = LoadTask(ctx, dir, "x")
	wantField(t, err, "services.app.build.dockerfile")

	dir, _ = writeTask(t, "      context: ${ctx}\n")
	tk, err := LoadTask(ctx, dir, "x")
	if err != nil {
		t.Fatalf("an input-made context inside the task: %v", err)
	}
	_, err = tk.Project(ctx, "p", map[string]string{"ctx": "../secret"})
	wantField(t, err, "services.app.build.context")
}
