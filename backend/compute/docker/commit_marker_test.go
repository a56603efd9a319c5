package docker

import (
	"context"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A container paused for a commit (found running when the commit began)
// shows running through Get and List while the commit holds it, so the
// reconciler's drift repair does not unpause it mid-copy; a container
// paused before the commit shows paused; once the commit ends the pause
// shows again. Without the marker (commits.mask a no-op), Get shows the
// commit's pause and the reconciler resumes the sandbox.
func TestCommitPauseShowsRunning(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	inst := mustCreate(t, p, testSpec())
	statusOf := func() (compute.Status, compute.Status) {
		t.Helper()
		got, err := p.Get(ctx, inst.Ref)
		if err != nil {
			t.Fatal(err)
		}
		all, err := p.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		listed := compute.Status("")
		for _, in := range all {
			if in.Ref.ID == inst.Ref.ID {
				listed = in.Status
			}
		}
		return got.Status, listed
	}
	end := p.commits.begin(inst.Ref.ID, true)
	if err := p.cli.ContainerPause(ctx, inst.Ref.ID); err != nil { // as loadLayer (or the engine's commit) does
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cli.ContainerUnpause(context.Background(), inst.Ref.ID) })
	if g, l := statusOf(); g != compute.StatusRunning || l != compute.StatusRunning {
		t.Fatalf("paused for a commit: Get %q, List %q; want running", g, l)
	}
	end()
	if g, l := statusOf(); g != compute.StatusPaused || l != compute.StatusPaused {
		t.Fatalf("after the commit: Get %q, List %q; want paused", g, l)
	}
	// A commit of a container already paused (a paused sandbox) hides nothing.
	defer p.commits.begin(inst.Ref.ID, false)()
	if g, _ := statusOf(); g != compute.StatusPaused {
		t.Fatalf("a paused sandbox being committed: Get %q, want paused", g)
	}
}
