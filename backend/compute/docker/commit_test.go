package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// A commit copies the filesystem into an image a new instance starts from,
// leaves its source running (or paused) and gives the copy none of the
// source's own labels: without clearInherited, the copy below would come up
// with its parent's egress MAC and rules.
func TestCommitCopiesFilesystemNotLabels(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	parentSpec := testSpec()
	parentSpec.Network.DenyOut = []string{"198.51.100.0/24"} // a rule set, so the parent carries egress labels
	parent := mustCreate(t, p, parentSpec)
	if res := exec(t, p, parent, "sh", "-c", "echo before > /tmp/marker"); res.ExitCode != 0 {
		t.Fatalf("write marker: %+v", res)
	}

	img, err := p.Commit(ctx, parent.Ref, compute.CommitOptions{
		Name:   testImagePrefix + "commit-" + randomHex(4) + ":latest",
		Labels: map[string]string{compute.LabelOrg: "org-test"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.RemoveImage(context.Background(), img.ID) })
	if img.ID == "" || img.SizeBytes <= 0 {
		t.Fatalf("commit answered %+v", img)
	}
	if got, err := p.Get(ctx, parent.Ref); err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("parent after commit: %+v %v", got, err)
	}

	childSpec := testSpec()
	childSpec.Image = img.ID
	child := mustCreate(t, p, childSpec)
	if res := exec(t, p, child, "cat", "/tmp/marker"); res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != "before" {
		t.Fatalf("the copy lacks the parent's file: %+v", res)
	}
	c, err := p.cli.ContainerInspect(ctx, child.Ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{labelEgressMAC, labelEgressDeny} {
		if v := c.Config.Labels[l]; v != "" {
			t.Errorf("the copy inherited its parent's label %s=%q", l, v)
		}
	}
	if c.Config.Labels[compute.LabelRecord] != childSpec.RecordID {
		t.Errorf("the copy's record label is %q", c.Config.Labels[compute.LabelRecord])
	}
	if res := exec(t, p, child, "sh", "-c", "echo child > /tmp/only-child"); res.ExitCode != 0 {
		t.Fatal(res)
	}
	if res := exec(t, p, parent, "test", "-e", "/tmp/only-child"); res.ExitCode == 0 {
		t.Error("a file written in the copy appeared in its parent")
	}

	// An image in use is not removed from under its instance.
	wantKind(t, p.RemoveImage(ctx, img.ID), compute.KindConflict)
	if err := p.Delete(ctx, child.Ref); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveImage(ctx, img.ID); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if err := p.RemoveImage(ctx, img.ID); err != nil {
		t.Fatalf("a second remove: %v", err)
	}

	// A paused source is copied as it is and stays paused.
	if err := p.Pause(ctx, parent.Ref); err != nil {
		t.Fatal(err)
	}
	img2, err := p.Commit(ctx, parent.Ref, compute.CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.RemoveImage(context.Background(), img2.ID) })
	if got, err := p.Get(ctx, parent.Ref); err != nil || got.Status != compute.StatusPaused {
		t.Fatalf("paused parent after commit: %+v %v", got, err)
	}
}
