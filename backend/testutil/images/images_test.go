package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
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

// The base image has what E2B's clients assume (issue 22): bash and a user
// "user" (uid 1000) whose home is /home/user; its default user stays root;
// and it carries the hash of the recipe that built it.
func TestBaseHasUserAndBash(t *testing.T) {
	EnsureBase(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := dockertest.Client(t)
	img, err := cli.ImageInspect(ctx, Base)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config == nil || len(img.Config.Labels["dev.dreadnode.recipe"]) != 16 {
		t.Errorf("%s carries no recipe hash (label dev.dreadnode.recipe): %+v", Base, img.Config)
	}
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: Base, Labels: map[string]string{"dev.dreadnode.test": t.Name()},
		Cmd: []string{"/bin/bash", "-c", `id -un; getent passwd user | cut -d: -f3,6,7; stat -c '%U %F' /home/user`}},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			t.Errorf("the check exited %d", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out, errOut strings.Builder
	if _, err := stdcopy.StdCopy(&out, &errOut, logs); err != nil {
		t.Fatal(err)
	}
	if want := "root\n1000:/home/user:/bin/bash\nuser directory\n"; out.String() != want {
		t.Errorf("in %s: got %q (stderr %q), want %q", Base, out.String(), errOut.String(), want)
	}
}
