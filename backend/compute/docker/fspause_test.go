package docker

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A filesystem-only pause stops the container (no process, no memory held)
// and resume starts it again: the filesystem is kept, the processes are new.
func TestPauseFilesystemResume(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	inst := mustCreate(t, p, testSpec())
	ctx := context.Background()

	exec(t, p, inst, "sh", "-c", "echo kept > /root/marker; sleep 1000 >/dev/null 2>&1 &")
	if out := exec(t, p, inst, "ps", "-o", "args"); !bytes.Contains(out.Stdout, []byte("sleep 1000")) {
		t.Fatalf("background process not started: %s", out.Stdout)
	}
	if err := p.PauseFilesystem(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	got, err := p.Get(ctx, inst.Ref)
	if err != nil || got.Status != compute.StatusExited {
		t.Fatalf("after a filesystem-only pause: %+v %v", got, err)
	}
	c, err := p.cli.ContainerInspect(ctx, inst.Ref.ID)
	if err != nil || c.State.Running || c.State.Pid != 0 {
		t.Fatalf("the container still runs (its memory held): %+v %v", c.State, err)
	}
	wantKind(t, p.PauseFilesystem(ctx, inst.Ref), compute.KindConflict)
	wantKind(t, p.Pause(ctx, inst.Ref), compute.KindConflict)

	got, err = p.Resume(ctx, inst.Ref)
	if err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("resume: %+v %v", got, err)
	}
	if out := exec(t, p, inst, "cat", "/root/marker"); strings.TrimSpace(string(out.Stdout)) != "kept" {
		t.Fatalf("the filesystem was not kept: %q", out.Stdout)
	}
	if out := exec(t, p, inst, "ps", "-o", "args"); bytes.Contains(out.Stdout, []byte("sleep 1000")) {
		t.Fatalf("a process survived the filesystem-only pause: %s", out.Stdout)
	}
	_, err = p.Resume(ctx, inst.Ref)
	wantKind(t, err, compute.KindConflict)
	// A memory pause after it still freezes.
	if err := p.Pause(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Resume(ctx, inst.Ref); err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("memory resume after a filesystem-only one: %+v %v", got, err)
	}
	wantKind(t, p.PauseFilesystem(ctx, compute.Ref{ID: "dn-no-such-container"}), compute.KindNotFound)
}
