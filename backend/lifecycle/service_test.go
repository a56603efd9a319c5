package lifecycle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// The service's unit tests: the fake compute, a fixed clock, SQLite in a
// temporary directory, and a reconciler whose loop is not started: each use
// case drives the record itself (Drive), so nothing here waits on a pace.

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type svcRig struct {
	s    *Service
	db   *store.DB
	fake *computetest.Fake
	org  string
}

func newSvcRig(t *testing.T) *svcRig {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	org, _, err := db.EnsureOrg(ctx, "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	fake := computetest.New()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := reconciler.New(reconciler.Config{DB: db, Provider: fake, Clock: reconciler.NewFakeClock(t0), Logger: quiet,
		CreateDeadline: 2 * time.Minute, OpDeadline: time.Minute})
	s := New(Config{DB: db, Reconciler: rc, Provider: fake, Logger: quiet, Now: func() time.Time { return t0 },
		MinTimeout: 60, WaitLimit: 10 * time.Second})
	return &svcRig{s: s, db: db, fake: fake, org: org.ID}
}

func (g *svcRig) get(t *testing.T, id string) *store.Record {
	t.Helper()
	r, err := g.db.GetRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// running creates a sandbox and drives it to running.
func (g *svcRig) running(t *testing.T) *store.Record {
	t.Helper()
	c, err := g.s.Create(context.Background(), g.org, Spec{TemplateID: "base", TimeoutSec: 300}, CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := g.s.drive(context.Background(), c.Record.ID)
	if err != nil || r.Phase != sandbox.PhaseRunning {
		t.Fatalf("driving a new create: %+v, %v", r, err)
	}
	return r
}

// paused creates a sandbox and drives it to paused.
func (g *svcRig) paused(t *testing.T) *store.Record {
	t.Helper()
	p, err := g.s.Pause(context.Background(), g.running(t))
	if err != nil || p.Phase != sandbox.PhasePaused {
		t.Fatalf("pausing a running sandbox: %+v, %v", p, err)
	}
	return p
}

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var inv *domain.InvalidError
	if !errors.As(err, &inv) || inv.Field != field {
		t.Fatalf("want an invalid %s, got %v", field, err)
	}
}

func TestCreateStoresAPendingRecordAndReplaysByKey(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	opts := CreateOptions{IdempotencyKey: "k1"}
	c, err := g.s.Create(ctx, g.org, Spec{TimeoutSec: 300, Metadata: map[string]string{"a": "b"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := g.get(t, c.Record.ID)
	if r.Phase != sandbox.PhasePending || r.Kind != sandbox.KindRuntime || r.TemplateID != "base" || r.Provider != "fake" ||
		!r.EndAt.Equal(t0.Add(300*time.Second)) || r.Metadata["a"] != "b" {
		t.Fatalf("created record: %+v", r)
	}
	if c.AccessToken == "" || r.AccessTokenHash != ids.HashSecret(c.AccessToken) || c.Replayed {
		t.Fatalf("the create's token does not match the stored hash: %+v", c)
	}
	again, err := g.s.Create(ctx, g.org, Spec{TimeoutSec: 300}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Record.ID != c.Record.ID || again.AccessToken != "" {
		t.Fatalf("a replay must return the first sandbox without its token: %+v", again)
	}
	if n := g.fake.Calls("create"); n != 0 {
		t.Fatalf("Create returns before the provider is called; called %d times", n)
	}
}

func TestCreateRefusalsNameTheField(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	_, err := g.s.Create(ctx, g.org, Spec{TimeoutSec: 59}, CreateOptions{})
	wantInvalid(t, err, "timeout") // never below the minimum
	_, err = g.s.Create(ctx, g.org, Spec{TemplateID: "nosuch", TimeoutSec: 300}, CreateOptions{})
	wantInvalid(t, err, "templateID")
	cpu := 0
	_, err = g.s.Create(ctx, g.org, Spec{TimeoutSec: 300, CPUCount: &cpu}, CreateOptions{})
	wantInvalid(t, err, "resources.cpuCount")
	if recs, err := g.db.ListRecords(ctx, store.RecordFilter{OrgID: g.org}); err != nil || len(recs) != 0 {
		t.Fatalf("a refused create stored records: %d, %v", len(recs), err)
	}
}

func TestDeleteOfAQueuedRecordEndsItWithoutTheProvider(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	r := &store.Record{ID: "q1", OrgID: g.org, Kind: sandbox.KindRuntime, Provider: "fake", Phase: sandbox.PhaseQueued,
		TemplateID: "base", TimeoutSec: 300, CreatedAt: t0, EndAt: t0.Add(5 * time.Minute)}
	if err := g.db.InsertRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := g.s.Delete(ctx, r, "deleted by the user")
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != sandbox.PhaseDeleted || g.get(t, "q1").Phase != sandbox.PhaseDeleted {
		t.Fatalf("a deleted queued record: %+v", got)
	}
	for _, op := range []string{"create", "delete"} {
		if n := g.fake.Calls(op); n != 0 {
			t.Fatalf("nothing exists at the provider, but %s was called %d times", op, n)
		}
	}
	again, err := g.s.Delete(ctx, got, "again")
	if err != nil || again.Phase != sandbox.PhaseDeleted {
		t.Fatalf("deleting an ended record again is a no-op: %+v, %v", again, err)
	}
}

func TestPauseAndResume(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	r := g.running(t)
	p, err := g.s.Pause(ctx, r)
	if err != nil || p.Phase != sandbox.PhasePaused || g.fake.Calls("pause") != 1 {
		t.Fatalf("pause: %+v, %v (pause calls %d)", p, err, g.fake.Calls("pause"))
	}
	var conflict *domain.ConflictError
	if _, err := g.s.Pause(ctx, p); !errors.As(err, &conflict) {
		t.Fatalf("pausing a paused sandbox: want a conflict, got %v", err)
	}
	cur, resumed, err := g.s.Resume(ctx, p)
	if err != nil || !resumed || cur.Phase != sandbox.PhaseRunning || g.fake.Calls("resume") != 1 {
		t.Fatalf("resume: %+v resumed %v, %v", cur, resumed, err)
	}
	cur, resumed, err = g.s.Resume(ctx, cur)
	if err != nil || resumed || cur.Phase != sandbox.PhaseRunning || g.fake.Calls("resume") != 1 {
		t.Fatalf("resuming a running sandbox returns it as it is: %+v resumed %v, %v", cur, resumed, err)
	}
}

func TestConnectResumesAPausedSandboxAndRotatesItsToken(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	p := g.paused(t)
	r := p
	before := g.get(t, r.ID).AccessTokenHash
	timeout := 600
	cur, token, resumed, err := g.s.Connect(ctx, p, &timeout)
	if err != nil || !resumed || cur.Phase != sandbox.PhaseRunning {
		t.Fatalf("connect to a paused sandbox: %+v resumed %v, %v", cur, resumed, err)
	}
	after := g.get(t, r.ID)
	if token == "" || after.AccessTokenHash != ids.HashSecret(token) || after.AccessTokenHash == before {
		t.Fatalf("connect must issue a fresh token: %q", token)
	}
	if !after.EndAt.Equal(t0.Add(600 * time.Second)) {
		t.Fatalf("connect with timeout 600 moved the end to %s, want %s", after.EndAt, t0.Add(600*time.Second))
	}

	d, err := g.s.Delete(ctx, after, "deleted by the user")
	if err != nil {
		t.Fatal(err)
	}
	var conflict *domain.ConflictError
	if _, _, _, err := g.s.Connect(ctx, d, nil); !errors.As(err, &conflict) || conflict.State != string(sandbox.PhaseDeleted.PublicState()) {
		t.Fatalf("connect to a deleted sandbox: want a conflict in its state, got %v", err)
	}
	owned := *g.get(t, r.ID)
	owned.RuntimeID = "rt1"
	if _, _, _, err := g.s.Connect(ctx, &owned, nil); !errors.As(err, &conflict) {
		t.Fatalf("connect to a runtime's sandbox: want a conflict, got %v", err)
	}
}

// An auto-paused sandbox (its end cleared at expiry) gets its own timeout
// again on connect, and never less than the minimum.
func TestConnectOfAnAutoPausedSandboxNeverBelowTheMinimum(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	p := g.paused(t)
	r := p
	p, err := g.db.Transition(ctx, p.ID, "", "", func(r *store.Record) error {
		r.EndAt, r.TimeoutSec = time.Time{}, 10 // an older, shorter timeout
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := g.s.Connect(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	got := g.get(t, r.ID)
	if want := t0.Add(60 * time.Second); !got.EndAt.Equal(want) || got.TimeoutSec != 60 {
		t.Fatalf("end %s timeout %d, want %s and the minimum 60", got.EndAt, got.TimeoutSec, want)
	}
}

func TestSetEndRefreshesAndExtends(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	r := g.running(t) // ends at t0+300s
	cur, err := g.s.SetEnd(ctx, r, 120*time.Second, true)
	if err != nil || !cur.EndAt.Equal(t0.Add(300*time.Second)) {
		t.Fatalf("extending to a sooner end keeps the later one: %+v, %v", cur, err)
	}
	cur, err = g.s.SetEnd(ctx, r, 120*time.Second, false)
	if err != nil || !cur.EndAt.Equal(t0.Add(120*time.Second)) || cur.TimeoutSec != 120 {
		t.Fatalf("setting the timeout moves the end to now+d: %+v, %v", cur, err)
	}
	d, err := g.s.Delete(ctx, cur, "deleted by the user")
	if err != nil {
		t.Fatal(err)
	}
	var conflict *domain.ConflictError
	if _, err := g.s.SetEnd(ctx, d, time.Hour, true); !errors.As(err, &conflict) {
		t.Fatalf("the timeout of an ended sandbox cannot change: %v", err)
	}
}

// Template answers not found (naming the templates there are) for an id the
// provider does not list.
func TestTemplateLookup(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	if tm, err := g.s.Template(ctx, "base"); err != nil || tm.ID != "base" {
		t.Fatalf("template base: %+v, %v", tm, err)
	}
	var nf *domain.NotFoundError
	if _, err := g.s.Template(ctx, "nosuch"); !errors.As(err, &nf) || nf.ID != "nosuch" || !strings.Contains(nf.Detail, "base") {
		t.Fatalf("unknown template: want not found naming the available ones, got %v", err)
	}
}

// Get reads the path's sandbox in the caller's org: another org's record and
// a task record answer not found, like an unknown id.
func TestGetFindsOnlyTheOrgsSandboxes(t *testing.T) {
	g := newSvcRig(t)
	ctx := context.Background()
	r := g.running(t)
	task := &store.Record{ID: "task1", OrgID: g.org, Kind: sandbox.KindTask, Provider: "fake", Phase: sandbox.PhasePending,
		TemplateID: "base", CreatedAt: t0}
	if err := g.db.InsertRecord(ctx, task); err != nil {
		t.Fatal(err)
	}
	get := func(org, id string) (*store.Record, error) {
		req := httptest.NewRequest(http.MethodGet, "/sandboxes/"+id, nil)
		req = mux.SetURLVars(req.WithContext(httpx.WithOrg(ctx, org)), map[string]string{"id": id})
		return g.s.load(req)
	}
	if got, err := get(g.org, r.ID); err != nil || got.ID != r.ID || got.Phase != sandbox.PhaseRunning {
		t.Fatalf("get in its org: %+v, %v", got, err)
	}
	for _, c := range []struct{ org, id string }{{"other", r.ID}, {g.org, "task1"}, {g.org, "nosuch"}} {
		var nf *httpx.Error
		if got, err := get(c.org, c.id); !errors.As(err, &nf) || nf.Code != http.StatusNotFound || got != nil {
			t.Fatalf("get %s in org %s: want not found, got %+v, %v", c.id, c.org, got, err)
		}
	}
}
