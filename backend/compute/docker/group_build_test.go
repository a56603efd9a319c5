package docker

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// dockerfileImage is a task service image built from dockerfile alone.
func dockerfileImage(dockerfile string) *compute.Image {
	return &compute.Image{Service: "app", Ref: testImagePrefix + "taskbuild:" + randomHex(6), Build: true, Hash: randomHex(8),
		Dockerfile: "Dockerfile", WriteContext: func(w io.Writer) error {
			tw := tar.NewWriter(w)
			if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
				return err
			}
			if _, err := tw.Write([]byte(dockerfile)); err != nil {
				return err
			}
			return tw.Close()
		}}
}

func buildTask(t *testing.T, p *Provider, dockerfile string) error {
	t.Helper()
	g, err := p.Groups(GroupConfig{Owner: "test-taskbuild-" + randomHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	img := dockerfileImage(dockerfile)
	t.Cleanup(func() { _ = g.RemoveImage(context.Background(), img.Ref) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = g.Build(ctx, map[string]*compute.Image{"app": img})
	return err
}

// TestTaskBuildContained: a task's Dockerfile build runs its steps on the
// sandboxes' network, so a RUN step does not reach a listener on the
// host's bridge address (the control: a backend without egress rules
// reaches it, so the rules are what stop it), and within a memory limit
// (a step allocating 3 GB is killed).
func TestTaskBuildContained(t *testing.T) {
	step := func(ip string, port int) string {
		return fmt.Sprintf("FROM %s\nRUN if timeout 5 bash -c 'echo > /dev/tcp/%s/%d'; then echo REACHED; exit 1; fi\n", DefaultBaseImage, ip, port)
	}
	off := newProvider(t, Config{Network: testNetwork + "-taskbuild-off", Egress: EgressConfig{Off: true}})
	gw0, _, port0 := hostListener(t, off, testNetwork+"-taskbuild-off")
	if err := buildTask(t, off, step(gw0, port0)); err == nil || !strings.Contains(err.Error(), "code: 1") {
		t.Fatalf("control: without egress rules a build step must reach the host's bridge address (else this test proves nothing): %v", err)
	}

	p := newProvider(t, Config{Network: testNetwork + "-taskbuild"})
	gw, _, port := hostListener(t, p, testNetwork+"-taskbuild")
	if err := buildTask(t, p, step(gw, port)); err != nil {
		t.Fatalf("a task build step reached the host's address %s (or failed otherwise): %v", gw, err)
	}

	hog := fmt.Sprintf("FROM %s\nRUN python3 -c \"b = bytearray(3 << 30); print(len(b))\"\n", DefaultBaseImage)
	if err := buildTask(t, p, hog); err == nil {
		t.Fatal("a task build step allocated 3 GB: the build has no memory limit")
	}
}
