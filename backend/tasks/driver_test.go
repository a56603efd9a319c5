package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// The task-environment driver's unit tests: an in-memory engine, a fake
// clock and SQLite in a temporary directory; no Docker. They call the
// driver's entry points (Step, Due, Recover) directly and the API through
// its router.

// fakeEngine is an in-memory Engine: an environment is a set of container
// states by service.
type fakeEngine struct {
	mu        sync.Mutex
	envs      map[string]map[string]string // env -> service -> state
	pauseErr  error
	removed   map[string]int
	bringErrs error
	// bringHook, when set, runs as Bring starts (outside the lock): a test
	// holds a provisioning there.
	bringHook func(ctx context.Context) error
}

var _ Engine = (*fakeEngine)(nil)

func newFakeEngine() *fakeEngine {
	return &fakeEngine{envs: map[string]map[string]string{}, removed: map[string]int{}}
}

func (f *fakeEngine) BuildsImages() bool { return false }
func (f *fakeEngine) Missing(context.Context, map[string]*compute.Image) ([]*compute.Image, error) {
	return nil, nil
}
func (f *fakeEngine) Build(context.Context, map[string]*compute.Image) (int, error) { return 0, nil }
func (f *fakeEngine) Builds() int64                                                 { return 0 }

func (f *fakeEngine) Bring(ctx context.Context, u *compute.Group) (*compute.GroupResult, error) {
	if f.bringHook != nil {
		if err := f.bringHook(ctx); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bringErrs != nil {
		return nil, f.bringErrs
	}
	res := &compute.GroupResult{Endpoints: map[string]compute.Endpoint{}, Containers: map[string]string{}}
	svcs := map[string]string{}
	for name := range u.Services {
		svcs[name] = "running"
		res.Containers[name] = u.ID + "-" + name
	}
	for svc, port := range u.Expose {
		res.Endpoints[svc] = compute.Endpoint{URL: "http://127.0.0.1:1/", Host: "127.0.0.1", Port: port}
	}
	f.envs[u.ID] = svcs
	return res, nil
}

func (f *fakeEngine) Remove(ctx context.Context, envID string) error {
	_, err := f.RemoveCount(ctx, envID)
	return err
}

func (f *fakeEngine) RemoveCount(_ context.Context, envID string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.envs[envID])
	delete(f.envs, envID)
	f.removed[envID] += n
	return n, nil
}

func (f *fakeEngine) setAll(envID, state string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	svcs := f.envs[envID]
	if svcs == nil {
		return &compute.ProviderError{Op: "pausing " + envID, Err: errors.New("no containers")}
	}
	for s := range svcs {
		svcs[s] = state
	}
	return nil
}

func (f *fakeEngine) Pause(_ context.Context, envID string) error {
	f.mu.Lock()
	err := f.pauseErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.setAll(envID, "paused")
}

func (f *fakeEngine) Unpause(_ context.Context, envID string) error {
	return f.setAll(envID, "running")
}

func (f *fakeEngine) Exec(context.Context, string, string, []string, time.Duration, int) (*compute.GroupExecResult, error) {
	return nil, compute.ErrNotRunning
}

// ExecStream: the fake does not stream, so the service answers a stream
// with one buffered run (Exec).
func (f *fakeEngine) ExecStream(context.Context, string, string, []string, time.Duration, compute.Emit) (*compute.GroupExecResult, error) {
	return nil, errors.ErrUnsupported
}

func (f *fakeEngine) Snapshot(context.Context) (*compute.GroupSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	snap := &compute.GroupSnapshot{Containers: map[string][]compute.GroupMember{}, Networks: map[string][]string{}}
	for env, svcs := range f.envs {
		for svc, st := range svcs {
			snap.Containers[env] = append(snap.Containers[env], compute.GroupMember{ID: env + "-" + svc, GroupID: env, Service: svc, State: st, Status: st})
		}
		snap.Networks[env] = []string{"net-" + env}
	}
	return snap, nil
}

func (f *fakeEngine) state(envID string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.envs[envID] {
		out[k] = v
	}
	return out
}

func (f *fakeEngine) LastLogs(context.Context, string, int) []string { return []string{"bye"} }
func (f *fakeEngine) Ping(context.Context) error                     { return nil }
func (f *fakeEngine) Negotiate(context.Context)                      {}
func (f *fakeEngine) Watch(context.Context)                          {}
func (f *fakeEngine) Close() error                                   { return nil }

type taskRig struct {
	t   *testing.T
	db  *store.DB
	eng *fakeEngine
	// wrap, when set, wraps eng as the Service's engine (set it before restart).
	wrap  func(*fakeEngine) Engine
	jobs  int // Config.MaxConcurrentJobs (0: the default)
	clock *reconciler.FakeClock
	svc   *Service
	d     driver
	r     *mux.Router
}

func newTaskRig(t *testing.T) *taskRig {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, _, err := db.EnsureOrg(context.Background(), "acme", 1_000_000_000); err != nil {
		t.Fatal(err)
	}
	g := &taskRig{t: t, db: db, eng: newFakeEngine(), clock: reconciler.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}
	g.restart()
	return g
}

// restart is a new Service on the same database and engine (a backend restart).
func (g *taskRig) restart() {
	if g.svc != nil {
		g.svc.Close()
	}
	var eng Engine = g.eng
	if g.wrap != nil {
		eng = g.wrap(g.eng)
	}
	svc, err := New(Config{DB: g.db, CatalogDir: filepath.Join("testdata", "tasks"), Groups: func(GroupsFor) (Engine, error) { return eng, nil }, Now: g.clock.Now,
		BuildDeadline: 5 * time.Minute, ReadyDeadline: 2 * time.Minute, MaxConcurrentJobs: g.jobs})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { svc.Close() })
	g.svc, g.d = svc, driver{svc}
	g.r = mux.NewRouter()
	g.r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(httpx.WithOrg(r.Context(), "acme")))
		})
	})
	svc.Register(g.r)
}

func (g *taskRig) do(method, path string, body any) (int, map[string]any) {
	g.t.Helper()
	var buf bytes.Buffer
	if body != nil {
		_ = json.NewEncoder(&buf).Encode(body)
	}
	req := httptest.NewRequest(method, "/api/v1/org/acme/ws/ws/environments"+path, &buf)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	g.r.ServeHTTP(rec, req)
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return rec.Code, m
}

func (g *taskRig) create() string {
	g.t.Helper()
	code, m := g.do(http.MethodPost, "", map[string]any{"task_ref": "slow-start", "timeout_sec": 60})
	if code != http.StatusCreated {
		g.t.Fatalf("create: %d %v", code, m)
	}
	return m["id"].(string)
}

// step is one step of the driver and, when it started a build, the build
// (which runs in the build pool, off the step).
func (g *taskRig) step(id string) {
	g.t.Helper()
	if err := g.d.Step(context.Background(), id, g.d.Lane(context.Background(), id)); err != nil {
		g.t.Fatalf("step %s: %v", id, err)
	}
	g.svc.mu.Lock()
	w := g.svc.workers[id]
	g.svc.mu.Unlock()
	if w != nil {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			g.t.Fatalf("the build of %s never ended", id)
		}
	}
}

func (g *taskRig) env(id string) (*Env, *store.Record) {
	g.t.Helper()
	e, err := g.svc.getEnv(context.Background(), id)
	if err != nil {
		g.t.Fatal(err)
	}
	r, err := g.db.GetRecord(context.Background(), e.RecordID)
	if err != nil {
		g.t.Fatal(err)
	}
	return e, r
}

// ready creates an environment and drives it to ready.
func (g *taskRig) ready() string {
	g.t.Helper()
	id := g.create()
	g.step(id)
	if e, r := g.env(id); e.State != taskenv.StateReady || r.Phase != sandbox.PhaseRunning {
		g.t.Fatalf("after a step: %s / record %s, want ready / running (error %q)", e.State, r.Phase, e.Error)
	}
	return id
}

func recordPath(r *store.Record) string {
	var ps []string
	for _, e := range r.Timeline {
		ps = append(ps, e.Phase+"("+string(e.Cause)+")")
	}
	return strings.Join(ps, " ")
}

func TestTaskDriverProvisioningToReady(t *testing.T) {
	g := newTaskRig(t)
	id := g.create()
	due, err := g.d.Due(context.Background(), g.clock.Now())
	if err != nil || len(due) != 1 || due[0] != id {
		t.Fatalf("due %v %v, want the new environment", due, err)
	}
	if l := g.d.Lane(context.Background(), id); l != reconciler.LaneCreate {
		t.Fatalf("lane %d, want create", l)
	}
	g.step(id)
	e, r := g.env(id)
	var states []string
	for _, te := range e.Timeline {
		states = append(states, string(te.State))
	}
	if got := strings.Join(states, ","); got != "building,provisioning,ready" {
		t.Fatalf("states %s", got)
	}
	if r.Phase != sandbox.PhaseRunning || !r.EndAt.Equal(g.clock.Now().Add(60*time.Second)) || !e.ExpiresAt.Equal(r.EndAt) {
		t.Fatalf("record %s endAt %s, env expires %s", r.Phase, r.EndAt, e.ExpiresAt)
	}
	if e.ServiceURLs["web"].Port != 8000 || len(g.eng.state(id)) != 2 {
		t.Fatalf("services %v, engine %v", e.ServiceURLs, g.eng.state(id))
	}
	if due, _ := g.d.Due(context.Background(), g.clock.Now()); len(due) != 0 {
		t.Fatalf("a ready environment is not due: %v", due)
	}
}

func TestTaskDriverTeardown(t *testing.T) {
	g := newTaskRig(t)
	id := g.ready()
	code, m := g.do(http.MethodDelete, "/"+id, nil)
	if code != http.StatusOK || m["state"] != "torn_down" {
		t.Fatalf("delete: %d %v", code, m)
	}
	_, r := g.env(id)
	if r.Phase != sandbox.PhaseDeleted || r.KillReason != sandbox.KillTornDown || len(g.eng.state(id)) != 0 {
		t.Fatalf("record %s (%s), engine %v", r.Phase, r.KillReason, g.eng.state(id))
	}
	// Its record ended by someone else (credits): the driver tears it down.
	id2 := g.ready()
	_, r2 := g.env(id2)
	if _, err := g.db.Transition(context.Background(), r2.ID, sandbox.PhaseStopping, sandbox.CauseCredits, func(r *store.Record) error {
		r.StopAt(g.clock.Now())
		r.KillReason = sandbox.KillInsufficientCredits
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if l := g.d.Lane(context.Background(), id2); l != reconciler.LaneDeadline {
		t.Fatalf("lane %d, want deadline", l)
	}
	g.step(id2)
	e2, _ := g.env(id2)
	if e2.State != taskenv.StateTornDown || !strings.Contains(e2.Error, "ran out of credits") || len(g.eng.state(id2)) != 0 {
		t.Fatalf("credits kill: %s %q, engine %v", e2.State, e2.Error, g.eng.state(id2))
	}
}

func TestTaskDriverPauseResume(t *testing.T) {
	g := newTaskRig(t)
	id := g.ready()
	code, m := g.do(http.MethodPost, "/"+id+"/pause", map[string]any{})
	if code != http.StatusOK || m["state"] != "paused" {
		t.Fatalf("pause: %d %v (the API answers once the pause is done)", code, m)
	}
	e, r := g.env(id)
	if r.Phase != sandbox.PhasePaused || g.eng.state(id)["web"] != "paused" {
		t.Fatalf("after pause: env %s record %s engine %v", e.State, r.Phase, g.eng.state(id))
	}
	if got := recordPath(r); !strings.HasSuffix(got, "running(reconciler) pausing(user) paused(reconciler)") {
		t.Fatalf("record timeline %s: a pause passes through pausing", got)
	}
	code, m = g.do(http.MethodPost, "/"+id+"/resume", map[string]any{})
	if code != http.StatusOK || m["state"] != "ready" {
		t.Fatalf("resume: %d %v", code, m)
	}
	e, r = g.env(id)
	if e.State != taskenv.StateReady || r.Phase != sandbox.PhaseRunning || g.eng.state(id)["web"] != "running" || r.Sessions != 2 {
		t.Fatalf("after resume: env %s record %s engine %v sessions %d", e.State, r.Phase, g.eng.state(id), r.Sessions)
	}
	if got := recordPath(r); !strings.HasSuffix(got, "paused(reconciler) resuming(user) running(reconciler)") {
		t.Fatalf("record timeline %s: a resume passes through resuming", got)
	}
	// A refusal: the answer is the engine's error, the record back to running.
	g.eng.mu.Lock()
	g.eng.pauseErr = &compute.ProviderError{Op: "pausing", Err: errors.New("the engine refused")}
	g.eng.mu.Unlock()
	if code, m = g.do(http.MethodPost, "/"+id+"/pause", map[string]any{}); code != http.StatusBadGateway {
		t.Fatalf("refused pause: %d %v, want 502", code, m)
	}
	if e, r = g.env(id); e.State != taskenv.StateReady || r.Phase != sandbox.PhaseRunning {
		t.Fatalf("after a refused pause: env %s record %s", e.State, r.Phase)
	}
	// Paused twice: a conflict, as before.
	g.eng.mu.Lock()
	g.eng.pauseErr = nil
	g.eng.mu.Unlock()
	g.do(http.MethodPost, "/"+id+"/pause", map[string]any{})
	if code, _ = g.do(http.MethodPost, "/"+id+"/pause", map[string]any{}); code != http.StatusConflict {
		t.Fatalf("second pause: %d, want 409", code)
	}
}

func TestTaskDriverRecoversPauseInFlight(t *testing.T) {
	g := newTaskRig(t)
	id := g.ready()
	// A backend killed between committing pausing and pausing the engine.
	if _, err := g.svc.apply(context.Background(), id, change{expect: taskenv.StateReady, rec: sandbox.PhasePausing, cause: sandbox.CauseUser}); err != nil {
		t.Fatal(err)
	}
	g.restart()
	if err := g.d.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	due, _ := g.d.Due(context.Background(), g.clock.Now())
	if len(due) != 1 || due[0] != id {
		t.Fatalf("due %v: a record left pausing is owed work", due)
	}
	g.step(id)
	if e, r := g.env(id); e.State != taskenv.StatePaused || r.Phase != sandbox.PhasePaused || g.eng.state(id)["web"] != "paused" {
		t.Fatalf("after recovery: env %s record %s engine %v", e.State, r.Phase, g.eng.state(id))
	}
}

func TestTaskDriverDeadlines(t *testing.T) {
	g := newTaskRig(t)
	// Expiry: past expires_at the environment is torn down, reason timeout.
	id := g.ready()
	g.clock.Advance(59 * time.Second)
	if due, _ := g.d.Due(context.Background(), g.clock.Now()); len(due) != 0 {
		t.Fatalf("due before expiry: %v", due)
	}
	g.clock.Advance(time.Second)
	if due, _ := g.d.Due(context.Background(), g.clock.Now()); len(due) != 1 {
		t.Fatalf("due at expiry: %v", due)
	}
	g.step(id)
	e, r := g.env(id)
	if e.State != taskenv.StateTornDown || r.Phase != sandbox.PhaseDeleted || r.KillReason != sandbox.KillTimeout || len(g.eng.state(id)) != 0 {
		t.Fatalf("expired: env %s record %s (%s) engine %v", e.State, r.Phase, r.KillReason, g.eng.state(id))
	}
	if got := recordPath(r); !strings.HasSuffix(got, "deleted(ttl)") {
		t.Fatalf("record timeline %s", got)
	}
	// A build past its deadline fails, saying what did not finish.
	id = g.create()
	g.clock.Advance(5*time.Minute + time.Second)
	if l := g.d.Lane(context.Background(), id); l != reconciler.LaneDeadline {
		t.Fatalf("lane %d, want deadline", l)
	}
	g.step(id)
	if e, r = g.env(id); e.State != taskenv.StateFailed || r.Phase != sandbox.PhaseFailed || !strings.Contains(e.Error, "building did not finish within 5m0s") {
		t.Fatalf("late build: env %s record %s error %q", e.State, r.Phase, e.Error)
	}
	// After a restart past the deadline, recovery fails it and says so.
	id = g.create()
	g.clock.Advance(5*time.Minute + time.Second)
	g.restart()
	if err := g.d.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, r = g.env(id); e.State != taskenv.StateFailed || !strings.Contains(e.Error, "restarted") || !strings.HasSuffix(recordPath(r), "failed(recovery)") {
		t.Fatalf("recovered late build: env %s error %q record %s", e.State, e.Error, recordPath(r))
	}
}

func TestTaskDriverProviderFailure(t *testing.T) {
	g := newTaskRig(t)
	g.eng.mu.Lock()
	g.eng.bringErrs = &compute.ServiceError{Service: "web", Msg: "exited with code 1"}
	g.eng.mu.Unlock()
	id := g.create()
	g.step(id)
	e, r := g.env(id)
	if e.State != taskenv.StateFailed || r.Phase != sandbox.PhaseFailed || r.Diagnostic != e.Error || e.Error == "" {
		t.Fatalf("failed bring: env %s %q record %s %q", e.State, e.Error, r.Phase, r.Diagnostic)
	}
	// A service that dies later: Observe fails the environment with its logs.
	g.eng.mu.Lock()
	g.eng.bringErrs = nil
	g.eng.mu.Unlock()
	id = g.ready()
	g.eng.mu.Lock()
	g.eng.envs[id]["web"] = "exited"
	g.eng.mu.Unlock()
	if err := g.d.Observe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e, _ = g.env(id); e.State != taskenv.StateFailed || !strings.Contains(e.Error, `service "web" stopped unexpectedly`) || !strings.Contains(e.Error, "bye") {
		t.Fatalf("dead service: %s %q", e.State, e.Error)
	}
}
