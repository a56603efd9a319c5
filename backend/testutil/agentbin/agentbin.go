// Package agentbin builds the sandbox agent (backend/cmd/dn-agent) once per
// test binary, static for Linux, as the backend image's build does, so tests
// inject the agent built from the code under test.
package agentbin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

var (
	once sync.Once
	dir  string
	path string
	err  error
)

// Path returns the built agent, building it on first use; it fails the
// test when the build fails.
func Path(t testing.TB) string {
	t.Helper()
	p, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Build builds the agent once and returns its path.
func Build() (string, error) {
	once.Do(func() {
		var root string
		if root, err = images.RepoRoot(); err != nil {
			return
		}
		if dir, err = os.MkdirTemp("", "dn-agent-test-"); err != nil {
			return
		}
		path = filepath.Join(dir, "dn-agent")
		cmd := exec.CommandContext(context.Background(), "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", path, "./backend/cmd/dn-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("building the sandbox agent (go build ./backend/cmd/dn-agent): %w\n%s", berr, out)
		}
	})
	return path, err
}

// Cleanup removes the built agent (call it from TestMain after m.Run).
func Cleanup() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
