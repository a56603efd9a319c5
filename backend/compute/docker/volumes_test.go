package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// volumesOf lists the Docker volumes whose name starts with prefix.
func volumesOf(t *testing.T, p *Provider, prefix string) []string {
	t.Helper()
	vols, err := p.cli.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", prefix))})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vols.Volumes {
		if strings.HasPrefix(v.Name, prefix) {
			out = append(out, v.Name)
		}
	}
	return out
}

func orgVolume(t *testing.T, p *Provider) string {
	t.Helper()
	id := "vol_" + randomHex(8)
	if err := p.CreateVolume(context.Background(), compute.VolumeSpec{ID: id, OrgID: "org-test", Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.DeleteVolume(context.Background(), id) })
	return id
}

// An org volume outlives the sandboxes mounting it, two sandboxes see each
// other's writes in it, and it cannot be removed while one mounts it; a
// private volume goes with its sandbox.
func TestOrgVolumeSharedAndKept(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	id := orgVolume(t, p)
	mounts := []compute.Volume{{Name: "shared", Path: "/shared", VolumeID: id}, {Name: "own", Path: "/own"}}
	specA, specB := testSpec(), testSpec()
	specA.Volumes, specB.Volumes = mounts, mounts
	a, b := mustCreate(t, p, specA), mustCreate(t, p, specB)
	exec(t, p, a, "sh", "-c", "echo from-a > /shared/f && echo mine > /own/f")
	if out := exec(t, p, b, "cat", "/shared/f"); strings.TrimSpace(string(out.Stdout)) != "from-a" {
		t.Fatalf("b does not see a's write: %q", out.Stdout)
	}
	if out := exec(t, p, b, "sh", "-c", "cat /own/f 2>&1 || true"); strings.Contains(string(out.Stdout), "mine") {
		t.Fatal("a private volume is shared")
	}
	wantKind(t, p.DeleteVolume(ctx, id), compute.KindConflict)
	for _, inst := range []compute.Instance{a, b} {
		ref := inst.Ref
		ref.Record = map[string]string{a.Ref.ID: specA.RecordID, b.Ref.ID: specB.RecordID}[inst.Ref.ID]
		if err := p.Delete(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if left := volumesOf(t, p, volumePrefix+specA.RecordID); len(left) > 0 {
		t.Fatalf("private volumes left: %v", left)
	}
	if got := volumesOf(t, p, OrgVolumeName(id)); len(got) != 1 {
		t.Fatalf("the org volume went with the sandboxes: %v", got)
	}
	c := testSpec()
	c.Volumes = mounts[:1]
	if out := exec(t, p, mustCreate(t, p, c), "cat", "/shared/f"); strings.TrimSpace(string(out.Stdout)) != "from-a" {
		t.Fatalf("the org volume lost its contents: %q", out.Stdout)
	}
	gone := testSpec()
	gone.Volumes = []compute.Volume{{Name: "x", Path: "/x", VolumeID: "vol_deleted" + randomHex(4)}}
	_, err := p.Create(ctx, gone)
	wantKind(t, err, compute.KindInvalid)
	if left := volumesOf(t, p, OrgVolumeName("vol_deleted")); len(left) > 0 {
		t.Fatalf("a mount of a deleted org volume made it again: %v", left)
	}
}

// A create that fails after the engine made the sandbox's volumes (its
// main process cannot start) leaves none behind, and keeps the org volume.
func TestFailedCreateLeavesNoPrivateVolume(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	id := orgVolume(t, p)
	spec := testSpec()
	spec.Command = []string{"/no/such/entrypoint"}
	spec.Volumes = []compute.Volume{{Name: "own", Path: "/own"}, {Name: "shared", Path: "/shared", VolumeID: id}}
	cleanupRecord(t, p, spec.RecordID)
	_, err := p.Create(context.Background(), spec)
	wantKind(t, err, compute.KindEntrypoint)
	if left := volumesOf(t, p, volumePrefix+spec.RecordID); len(left) > 0 {
		t.Fatalf("the failed create left its private volumes: %v", left)
	}
	if got := volumesOf(t, p, OrgVolumeName(id)); len(got) != 1 {
		t.Fatalf("the org volume went with the failed create: %v", got)
	}
}

// A sandbox killed while its create was making its volumes (the engine made
// the private volume, no container holds it yet) leaves nothing once its
// record is swept; the org volume stays.
func TestSweepRecordRemovesLeftPrivateVolumes(t *testing.T) {
	t.Parallel()
	p := newProvider(t, Config{})
	ctx := context.Background()
	id := orgVolume(t, p)
	rec := testSpec().RecordID
	left := volumePrefix + rec + "-own"
	if _, err := p.cli.VolumeCreate(ctx, volume.CreateOptions{Name: left, Labels: map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: rec, labelScope: p.cfg.Scope}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cli.VolumeRemove(context.Background(), left, true) })
	if err := p.SweepRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got := volumesOf(t, p, volumePrefix+rec); len(got) > 0 {
		t.Fatalf("the killed create's private volume is left: %v", got)
	}
	if got := volumesOf(t, p, OrgVolumeName(id)); len(got) != 1 {
		t.Fatalf("the org volume was swept: %v", got)
	}
}
