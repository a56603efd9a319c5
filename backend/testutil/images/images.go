// Package images makes sure the locally built images tests need exist,
// building them (through `make image`) when they are missing. Tests that need
// Docker fail, never skip, when the engine is unreachable.
package images

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"
)

// Base is the sandbox base image built by images/base/build.sh.
const Base = "dreadnode/base:latest"

var (
	mu    sync.Mutex
	built bool // Base is known to exist (in this process)
)

// EnsureBase fails the test when the base image is missing and cannot be
// built, or when Docker is unreachable.
func EnsureBase(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := EnsureBaseImage(ctx); err != nil {
		t.Fatal(err)
	}
}

// EnsureBaseImage builds dreadnode/base:latest when it is missing or was
// built from an older recipe. The build script takes a file lock, so
// concurrent test binaries build it once.
func EnsureBaseImage(ctx context.Context) error {
	mu.Lock()
	defer mu.Unlock()
	if built {
		return nil
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("these tests need a running Docker engine: %w", err)
	}
	if _, err := cli.ImageInspect(ctx, Base); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspecting %s: %w", Base, err)
	}
	// The build runs even when the image exists: it returns at once when
	// the image was built from the current recipe (its label
	// dev.dreadnode.recipe), and rebuilds one an older recipe made.
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "make", "-C", root, "image")
	if !hasMakeTarget(filepath.Join(root, "GNUmakefile"), "image") {
		cmd = exec.CommandContext(ctx, filepath.Join(root, "images", "base", "build.sh"))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s with %q failed: %w\n%s", Base, strings.Join(cmd.Args, " "), err, out)
	}
	if _, err := cli.ImageInspect(ctx, Base); err != nil {
		return fmt.Errorf("%q succeeded but %s is still missing: %w", strings.Join(cmd.Args, " "), Base, err)
	}
	built = true
	return nil
}

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// hasMakeTarget reports whether the makefile defines target (the lead adds
// `image:`; until then the build script is called directly).
func hasMakeTarget(makefile, target string) bool {
	f, err := os.Open(makefile)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), target+":") {
			return true
		}
	}
	return false
}
