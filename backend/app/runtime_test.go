package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
)

// DOCKER_SANDBOX_RUNTIME names the runtime of the base template: one the
// engine lacks stops the start-up with the engine's runtimes; one it has
// runs every sandbox.
func TestSandboxRuntime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := New(context.Background(), Config{Listen: "127.0.0.1:0", DataDir: dir, DatabaseURL: filepath.Join(dir, "db"),
		TasksDir: filepath.Join(dir, "tasks"), Provider: "docker", DockerRuntime: "dn-no-such-runtime"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		t.Fatal("the backend started with a runtime the engine lacks")
	}
	for _, want := range []string{"DOCKER_SANDBOX_RUNTIME=dn-no-such-runtime", "template base: runtime", "available: ", "runc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("start-up error %q does not say %q", err, want)
		}
	}

	ta := newTestApp(t, func(c *Config) { c.DockerRuntime = "runc" })
	c := ta.req("POST", "/sandboxes", map[string]any{"waitReady": true})
	if c.code != http.StatusCreated {
		t.Fatalf("create: %d %s", c.code, c.body)
	}
	id := c.json(t)["sandboxID"].(string)
	defer ta.req("DELETE", "/sandboxes/"+id, nil)
	cs := ta.containersOf(id)
	if len(cs) != 1 {
		t.Fatalf("sandbox %s has %d containers", id, len(cs))
	}
	in, err := dockertest.Client(t).ContainerInspect(context.Background(), cs[0].ID)
	if err != nil || in.HostConfig.Runtime != "runc" {
		t.Fatalf("runtime of the sandbox: %q %v", in.HostConfig.Runtime, err)
	}
}
