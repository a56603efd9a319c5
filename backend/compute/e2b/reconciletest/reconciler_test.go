// Package reconciletest runs the reconciler's crash and orphan scenarios with
// the E2B provider against the fake: everything goes through
// compute.Provider, and every request is checked against E2B's published
// spec. It is a package of its own so the provider's unit tests do not
// depend on the store and reconciler building.
package reconciletest

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
)

var fastRetry = e2b.RetryConfig{MaxAttempts: 5, MaxElapsed: 10 * time.Second, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type recEnv struct {
	fake  *e2bfake.Server
	prov  compute.Provider
	db    *store.DB
	rc    *reconciler.Reconciler
	org   string
	scope string
}

func setupReconciler(t *testing.T) recEnv {
	t.Helper()
	ctx := ctxT(t)
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "e2b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	scope, err := db.DeploymentID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	org, _, err := db.EnsureOrg(ctx, "acme", 0)
	if err != nil {
		t.Fatal(err)
	}
	fake := e2bfake.New(t)
	p, err := e2b.New(e2b.Config{
		APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(), EnvdURL: fake.EnvdURL,
		Retry: fastRetry, ListPageSize: 2, Scope: scope,
	})
	if err != nil {
		t.Fatal(err)
	}
	rc := reconciler.New(reconciler.Config{DB: db, Provider: p, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return recEnv{fake: fake, prov: p, db: db, rc: rc, org: org.ID, scope: scope}
}

func (r recEnv) insert(t *testing.T, id string, phase sandbox.Phase, mutate func(*store.Record)) *store.Record {
	t.Helper()
	now := time.Now().UTC()
	rec := &store.Record{ID: id, OrgID: r.org, Kind: sandbox.KindRuntime, Provider: "e2b", Phase: phase, TemplateID: "base",
		CPUCount: 2, MemoryMB: 512, TimeoutSec: 600, EndAt: now.Add(10 * time.Minute), PhaseDeadline: now.Add(time.Minute)}
	if mutate != nil {
		mutate(rec)
	}
	if err := storetest.InsertFixture(context.Background(), r.db, rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func (r recEnv) record(t *testing.T, id string) *store.Record {
	t.Helper()
	rec, err := r.db.GetRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// startedBy creates the instance a crashed backend made for a record.
func (r recEnv) startedBy(t *testing.T, id string) compute.Instance {
	t.Helper()
	inst, err := r.prov.Create(ctxT(t), compute.Spec{RecordID: id, OrgID: r.org, Kind: sandbox.KindRuntime, Template: "base", Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestReconcilerSweepsOrphansOfItsDeploymentOnly(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)

	live := r.insert(t, "rlive", sandbox.PhaseRunning, nil)
	liveInst := r.startedBy(t, live.ID)
	if _, err := r.db.Transition(ctx, live.ID, "", "", func(rec *store.Record) error {
		rec.ProviderID, rec.ProviderData = liveInst.Ref.ID, liveInst.Ref.Data
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ended := r.insert(t, "rended", sandbox.PhaseDeleted, nil)
	endedInst := r.startedBy(t, ended.ID) // a delete that crashed before removing it
	ghost := r.fake.AddSandbox(e2bfake.SandboxSpec{Paused: true, Metadata: map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: "ghostrecord", compute.LabelDeployment: r.scope,
	}})
	foreign := r.fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{"app": "someone-else"}})
	otherDeployment := r.fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: "ghostrecord", compute.LabelDeployment: "another-backend",
	}})

	if err := r.rc.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{endedInst.Ref.ID, ghost} {
		if _, ok := r.fake.Sandbox(gone); ok {
			t.Errorf("orphan %s was not removed", gone)
		}
	}
	for _, kept := range []string{liveInst.Ref.ID, foreign, otherDeployment} {
		if _, ok := r.fake.Sandbox(kept); !ok {
			t.Errorf("sandbox %s must not be touched", kept)
		}
	}
	if rec := r.record(t, live.ID); rec.Phase != sandbox.PhaseRunning {
		t.Fatalf("live record %s", rec.Phase)
	}
}

func TestReconcilerNoticesASandboxKilledBehindItsBack(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	rec := r.insert(t, "rkilled", sandbox.PhasePending, nil)
	got, err := r.rc.Drive(ctx, rec.ID)
	if err != nil || got.Phase != sandbox.PhaseRunning || got.ProviderID == "" || !strings.Contains(got.ProviderData, "envdAccessToken") {
		t.Fatalf("drive to running: %+v %v", got, err)
	}
	r.fake.Kill(got.ProviderID)
	if err := r.rc.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = r.rc.Drive(ctx, rec.ID)
	if err != nil || got.Phase != sandbox.PhaseFailed || !strings.Contains(got.Diagnostic, "disappeared") {
		t.Fatalf("after the kill: %s %q %v", got.Phase, got.Diagnostic, err)
	}
}

func TestReconcilerAdoptsAfterACrashMidCreate(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	// The killed backend had made the sandbox but not yet stored its id.
	rec := r.insert(t, "rcrash", sandbox.PhaseCreating, nil)
	made := r.startedBy(t, rec.ID)
	if err := r.rc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	got := r.record(t, rec.ID)
	if got.Phase != sandbox.PhaseRunning || got.ProviderID != made.Ref.ID {
		t.Fatalf("record %s on %q, want running on the adopted %s", got.Phase, got.ProviderID, made.Ref.ID)
	}
	if n := len(r.fake.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes, want the one adopted", n)
	}
	// The adopted Ref works for envd.
	res, err := r.prov.Exec(ctx, got.Ref(), compute.ExecRequest{Cmd: []string{"echo", "adopted"}})
	if err != nil || string(res.Stdout) != "adopted\n" {
		t.Fatalf("exec on the adopted sandbox: %+v %v", res, err)
	}
}

func TestReconcilerSurvivesALostCreateAnswer(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	rec := r.insert(t, "rlost", sandbox.PhasePending, nil)
	r.fake.FailNext(e2bfake.RouteCreate, 1, e2bfake.Fault{Status: 502, AfterHandling: true})
	got, err := r.rc.Drive(ctx, rec.ID)
	if err != nil || got.Phase != sandbox.PhaseRunning {
		t.Fatalf("%+v %v", got, err)
	}
	if sbs := r.fake.Sandboxes(); len(sbs) != 1 || sbs[0].ID != got.ProviderID {
		t.Fatalf("want exactly the adopted sandbox, got %+v", sbs)
	}
}

func TestReconcilerRemovesAnInstanceWhoseIDWasLost(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	// Deleted while creating: stopping, no provider id, but a sandbox exists.
	rec := r.insert(t, "rstop", sandbox.PhaseStopping, func(rec *store.Record) {
		rec.KillReason = sandbox.KillDeleted
		// It reached creating (a record deleted while queued never did, and
		// its removal asks the provider nothing).
		now := time.Now().UTC()
		rec.Timeline = []store.TimelineEntry{{Phase: string(sandbox.PhasePending), At: now}, {Phase: string(sandbox.PhaseCreating), At: now}}
	})
	r.startedBy(t, rec.ID)
	got, err := r.rc.Drive(ctx, rec.ID)
	if err != nil || got.Phase != sandbox.PhaseDeleted {
		t.Fatalf("%+v %v", got, err)
	}
	if n := len(r.fake.Sandboxes()); n != 0 {
		t.Fatalf("%d sandboxes left", n)
	}
	if logs, err := r.db.SavedLogs(ctx, rec.ID); err != nil || !strings.Contains(logs, "sandbox started") {
		t.Fatalf("the sandbox's logs were not kept: %q %v", logs, err)
	}
}

func TestReconcilerDiagnosesAnUnavailableE2B(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	rec := r.insert(t, "rfull", sandbox.PhasePending, nil)
	r.fake.FailNext(e2bfake.RouteCreate, 100, e2bfake.Fault{Status: 503, ErrorCode: "sandbox_capacity_unavailable", Message: "no capacity in the cluster"})
	got, err := r.rc.Drive(ctx, rec.ID)
	if err != nil || got.Phase != sandbox.PhaseFailed {
		t.Fatalf("%+v %v", got, err)
	}
	for _, want := range []string{"provider unavailable", "no sandbox capacity", "5 attempts"} {
		if !strings.Contains(got.Diagnostic, want) {
			t.Errorf("diagnostic %q does not mention %q", got.Diagnostic, want)
		}
	}
}

func TestReconcilerPausesAndResumes(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	rec := r.insert(t, "rpause", sandbox.PhasePending, nil)
	got, err := r.rc.Drive(ctx, rec.ID)
	if err != nil || got.Phase != sandbox.PhaseRunning {
		t.Fatalf("%+v %v", got, err)
	}
	token := got.ProviderData
	if _, err := r.db.Transition(ctx, rec.ID, sandbox.PhasePausing, sandbox.CauseUser, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = r.rc.Drive(ctx, rec.ID); err != nil || got.Phase != sandbox.PhasePaused {
		t.Fatalf("pause: %+v %v", got, err)
	}
	if sb, _ := r.fake.Sandbox(got.ProviderID); sb.State != "paused" {
		t.Fatalf("E2B state %s", sb.State)
	}
	if _, err := r.db.Transition(ctx, rec.ID, sandbox.PhaseResuming, sandbox.CauseUser, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = r.rc.Drive(ctx, rec.ID); err != nil || got.Phase != sandbox.PhaseRunning {
		t.Fatalf("resume: %+v %v", got, err)
	}
	if got.ProviderData == token {
		t.Fatal("the resumed record kept the old envd access token")
	}
}
