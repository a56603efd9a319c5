package reconciler

import (
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/template"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// The orphan sweep on the real engine removes the images the backend made
// whose owner is gone, and only those: a fork checkpoint no live record
// names (one whose forks all ended, one no record ever named), a snapshot
// with no build record, a template build's tag no build names. It keeps a
// checkpoint a live fork names, a snapshot and a template tag whose build
// exists, another deployment's images, and anything younger than the grace.
func TestSweepRemovesOrphanedImages(t *testing.T) {
	images.EnsureBase(t)
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	scope, err := db.DeploymentID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := db.EnsureOrg(ctx, "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := docker.New(docker.Config{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	tag := strings.ToLower(ids.New())
	var made []string
	// image makes a local image of dreadnode/base with labels (a build of
	// LABEL lines only: no layer, no pull), tagged ref.
	image := func(ref string, labels map[string]string) string {
		t.Helper()
		args := []string{"build", "-q", "-t", ref}
		for k, v := range labels {
			args = append(args, "--label", k+"="+v)
		}
		cmd := exec.Command("docker", append(args, "-")...)
		cmd.Stdin = strings.NewReader("FROM dreadnode/base:latest\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker build: %v: %s", err, out)
		}
		made = append(made, ref)
		return ref
	}
	t.Cleanup(func() {
		for _, ref := range made {
			_ = exec.Command("docker", "rmi", "-f", ref).Run()
		}
	})
	ours := func(extra map[string]string) map[string]string {
		out := map[string]string{compute.LabelDeployment: scope}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	liveCP, endedCP, neverCP := "cp-live-"+tag, "cp-ended-"+tag, "cp-never-"+tag
	for i, r := range []struct {
		id, cp string
		phase  sandbox.Phase
	}{{"fork-live-" + tag, liveCP, sandbox.PhasePending}, {"fork-ended-" + tag, endedCP, sandbox.PhaseDeleted}} {
		rec := &store.Record{ID: r.id, OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhasePending, TemplateID: "base",
			Checkpoint: r.cp, CreatedAt: time.Now().Add(time.Duration(i) * time.Millisecond)}
		if err := db.InsertRecord(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if r.phase == sandbox.PhaseDeleted { // its forks all ended
			for _, ph := range []sandbox.Phase{sandbox.PhaseStopping, sandbox.PhaseDeleted} {
				if _, err := db.Transition(ctx, r.id, ph, sandbox.CauseUser, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	now := time.Now()
	keptBuild, keptTemplateBuild := "build-kept-"+tag, "tbuild-kept-"+tag
	keptTemplateRef := "dreadnode-template/t" + tag + ":" + keptTemplateBuild
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		for _, b := range []struct{ id, img string }{{keptBuild, "dreadnode-snapshot/sb:" + keptBuild}, {keptTemplateBuild, keptTemplateRef}} {
			tpl := &store.Template{ID: "tpl" + b.id, OrgID: org.ID, Kind: template.KindSnapshot, CPUCount: 2, MemoryMB: 512, CreatedAt: now, UpdatedAt: now}
			if _, _, err := store.EnsureTemplateTx(ctx, tx, tpl); err != nil {
				return err
			}
			if err := store.InsertBuildTx(ctx, tx, &store.TemplateBuild{ID: b.id, TemplateID: tpl.ID, OrgID: org.ID, Status: template.StatusReady,
				Spec: "{}", Image: b.img, CPUCount: 2, MemoryMB: 512, CreatedAt: now, UpdatedAt: now, FinishedAt: now}, nil); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	kept := []string{
		image("dreadnode-checkpoint/"+liveCP+":sandbox", ours(map[string]string{compute.LabelCheckpoint: liveCP})),
		image("dreadnode-snapshot/sb:"+keptBuild, ours(map[string]string{compute.LabelSnapshotBuild: keptBuild})),
		image(keptTemplateRef, ours(nil)),
		// Another deployment's orphan is that deployment's to sweep.
		image("dreadnode-checkpoint/other-"+tag+":sandbox", map[string]string{compute.LabelDeployment: "other-" + tag, compute.LabelCheckpoint: "x"}),
	}
	gone := []string{
		image("dreadnode-checkpoint/"+endedCP+":sandbox", ours(map[string]string{compute.LabelCheckpoint: endedCP})),
		image("dreadnode-checkpoint/"+neverCP+":sandbox", ours(map[string]string{compute.LabelCheckpoint: neverCP})),
		image("dreadnode-snapshot/sb:gone-"+tag, ours(map[string]string{compute.LabelSnapshotBuild: "gone-" + tag})),
		image("dreadnode-template/t"+tag+":gone-"+tag, ours(nil)),
	}
	exists := func(ref string) bool {
		return exec.Command("docker", "image", "inspect", ref).Run() == nil
	}

	// Within the grace, nothing goes: a record may be about to name them.
	rc := New(Config{DB: db, Provider: p, ImageGrace: time.Hour})
	rc.sweepImages(ctx)
	for _, ref := range slices.Concat(kept, gone) {
		if !exists(ref) {
			t.Fatalf("%s was removed within the grace", ref)
		}
	}

	rc = New(Config{DB: db, Provider: p, ImageGrace: time.Nanosecond})
	if err := rc.Observe(ctx); err != nil { // the sweep is part of the orphan sweep
		t.Fatal(err)
	}
	for _, ref := range gone {
		if exists(ref) {
			t.Errorf("orphaned image %s was not removed", ref)
		}
	}
	for _, ref := range kept {
		if !exists(ref) {
			t.Errorf("image %s, which its record (or another deployment) owns, was removed", ref)
		}
	}
}
