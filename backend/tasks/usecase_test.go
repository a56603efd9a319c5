package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// The use cases' unit tests (Create, Get, List, Pause, Resume, Delete,
// Execute): the driver tests' in-memory engine, a fixed clock and SQLite in
// a temporary directory; no Docker, no HTTP. The reconciler does not run:
// a test that needs a ready environment steps the driver itself.

// execEngine is the in-memory engine with commands: a command runs only in
// a service the engine has running, and answers what run says.
type execEngine struct {
	*fakeEngine
	mu   sync.Mutex
	ran  [][]string
	run  func(argv []string) (*compute.GroupExecResult, error)
	outs int // Exec calls
}

func (f *execEngine) Exec(_ context.Context, envID, service string, argv []string, _ time.Duration, _ int) (*compute.GroupExecResult, error) {
	if st := f.state(envID)[service]; st != "running" {
		return nil, compute.ErrNotRunning
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, argv)
	f.outs++
	if f.run == nil {
		return &compute.GroupExecResult{Output: []byte("ok\n"), Duration: 5 * time.Millisecond}, nil
	}
	return f.run(argv)
}

type useRig struct {
	svc   *Service
	db    *store.DB
	eng   *execEngine
	admit error // what Config.Admit answers
}

func newUseRig(t *testing.T) *useRig {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, _, err := db.EnsureOrg(ctx, "acme", 1_000_000_000); err != nil {
		t.Fatal(err)
	}
	g := &useRig{db: db, eng: &execEngine{fakeEngine: newFakeEngine()}}
	clock := reconciler.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	g.svc, err = New(Config{DB: db, CatalogDir: filepath.Join("testdata", "tasks"), Groups: func(GroupsFor) (Engine, error) { return g.eng, nil }, Now: clock.Now,
		Admit: func(context.Context, string) error { return g.admit }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.svc.Close() })
	return g
}

func (g *useRig) create(t *testing.T, ws string, body apitypes.CreateTaskEnvironment, key string) (Created, error) {
	t.Helper()
	return g.svc.Create(context.Background(), CreateRequest{Org: "acme", Workspace: ws, Body: body, IdempotencyKey: key})
}

// ready creates a slow-start environment and steps the driver to ready.
func (g *useRig) ready(t *testing.T) *Env {
	t.Helper()
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "")
	if err != nil {
		t.Fatal(err)
	}
	d := driver{g.svc}
	if err := d.Step(context.Background(), c.Env.ID, d.Lane(context.Background(), c.Env.ID)); err != nil {
		t.Fatal(err)
	}
	// The step hands the build to the build pool (off the driver's lanes):
	// wait for it, as taskRig.step does.
	g.svc.mu.Lock()
	w := g.svc.workers[c.Env.ID]
	g.svc.mu.Unlock()
	if w != nil {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the build of %s never ended", c.Env.ID)
		}
	}
	return g.env(t, c.Env.ID, taskenv.StateReady)
}

// env reads environment id and checks its state.
func (g *useRig) env(t *testing.T, id string, want taskenv.State) *Env {
	t.Helper()
	e, err := g.svc.Get(context.Background(), "acme", "ws", id)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != want {
		t.Fatalf("environment %s is %s (error %q), want %s", id, e.State, e.Error, want)
	}
	return e
}

func (g *useRig) record(t *testing.T, e *Env) *store.Record {
	t.Helper()
	r, err := g.db.FreshRecord(context.Background(), e.RecordID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// counts is how many environments and ledger records the database holds.
func (g *useRig) counts(t *testing.T) (envs, records int) {
	t.Helper()
	for q, n := range map[string]*int{"SELECT COUNT(*) FROM task_environments": &envs, "SELECT COUNT(*) FROM sandboxes": &records} {
		if err := g.db.Reader().QueryRowContext(context.Background(), q).Scan(n); err != nil {
			t.Fatal(err)
		}
	}
	return envs, records
}

func wantInvalidAt(t *testing.T, err error, in, field string, path []any) {
	t.Helper()
	var inv *domain.InvalidError
	if !errors.As(err, &inv) || inv.Field != field || inv.In != in || !reflect.DeepEqual(inv.Path, path) {
		t.Fatalf("want an invalid %s %s (path %v), got %#v", in, field, path, err)
	}
}

func wantConflict(t *testing.T, err error, detail string) {
	t.Helper()
	var c *domain.ConflictError
	if !errors.As(err, &c) || !strings.Contains(c.Detail, detail) {
		t.Fatalf("want a conflict saying %q, got %v", detail, err)
	}
}

func TestCreateRecordsAndReplaysByKey(t *testing.T) {
	g := newUseRig(t)
	timeout, project := 600, "proj-1"
	body := apitypes.CreateTaskEnvironment{TaskRef: "slow-start", TimeoutSec: &timeout, ProjectID: project, SecretIDs: []string{"s1"}}
	c, err := g.create(t, "ws", body, "k1")
	if err != nil {
		t.Fatal(err)
	}
	e := g.env(t, c.Env.ID, taskenv.StateBuilding)
	if c.Replayed || c.ExecuteToken == "" || e.TokenHash != ids.HashSecret(c.ExecuteToken) {
		t.Fatalf("a first create: replayed %v, token %q (hash matches: %v)", c.Replayed, c.ExecuteToken, e.TokenHash == ids.HashSecret(c.ExecuteToken))
	}
	if e.TaskRef != "slow-start" || e.TaskName != "slow-start" || e.TimeoutSec != 600 || e.ProjectID == nil || *e.ProjectID != project ||
		!reflect.DeepEqual(e.SecretIDs, []string{"s1"}) || e.ExecuteService != "client" {
		t.Fatalf("stored environment: %+v", e)
	}
	r := g.record(t, e)
	if r.Phase != sandbox.PhasePending || r.Kind != sandbox.KindTask || r.EnvironmentID != e.ID || r.Provider != "docker" ||
		r.TimeoutSec != 600 || r.Metadata["workspace"] != "ws" {
		t.Fatalf("ledger record: %+v", r)
	}
	// The same key again: the first environment, without its token.
	again, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Env.ID != e.ID || again.ExecuteToken != "" || again.Env.TimeoutSec != 600 {
		t.Fatalf("a replay: %+v (token %q)", again.Env, again.ExecuteToken)
	}
	// A key is scoped to its workspace; no key never replays.
	other, err := g.create(t, "ws2", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "k1")
	if err != nil || other.Replayed || other.Env.ID == e.ID {
		t.Fatalf("the same key in another workspace: %+v, %v", other, err)
	}
	third, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "")
	if err != nil || third.Replayed || third.Env.TimeoutSec != DefaultTimeoutSec || third.Env.ProjectID != nil {
		t.Fatalf("a create without a key: %+v, %v", third, err)
	}
	if envs, recs := g.counts(t); envs != 3 || recs != 3 {
		t.Fatalf("%d environments and %d records, want 3 of each", envs, recs)
	}
}

func TestCreateRefusesBadInputBeforeRecording(t *testing.T) {
	g := newUseRig(t)
	low, high := 59, 86401
	cases := []struct {
		name      string
		body      apitypes.CreateTaskEnvironment
		key       string
		in, field string
		path      []any
	}{
		{"no task_ref", apitypes.CreateTaskEnvironment{TaskRef: " "}, "", domain.InBody, "task_ref", nil},
		{"malformed task_ref", apitypes.CreateTaskEnvironment{TaskRef: "Web Login!"}, "", domain.InBody, "task_ref", nil},
		{"timeout low", apitypes.CreateTaskEnvironment{TaskRef: "slow-start", TimeoutSec: &low}, "", domain.InBody, "timeout_sec", nil},
		{"timeout high", apitypes.CreateTaskEnvironment{TaskRef: "slow-start", TimeoutSec: &high}, "", domain.InBody, "timeout_sec", nil},
		{"project long", apitypes.CreateTaskEnvironment{TaskRef: "slow-start", ProjectID: strings.Repeat("p", 201)}, "", domain.InBody, "project_id", nil},
		{"many secrets", apitypes.CreateTaskEnvironment{TaskRef: "slow-start", SecretIDs: make([]string, 101)}, "", domain.InBody, "secret_ids", nil},
		{"empty secret", apitypes.CreateTaskEnvironment{TaskRef: "slow-start", SecretIDs: []string{"s1", ""}}, "", domain.InBody, "secret_ids.1", []any{"secret_ids", 1}},
		{"key long", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, strings.Repeat("k", 256), domain.InHeader, "Idempotency-Key", nil},
		{"unknown input", apitypes.CreateTaskEnvironment{TaskRef: "slow-start", Inputs: map[string]string{"a.b": "1"}}, "", domain.InBody, "inputs.a.b", []any{"inputs", "a.b"}},
		{"missing required input", apitypes.CreateTaskEnvironment{TaskRef: "nonce-build"}, "", domain.InBody, "inputs.nonce", []any{"inputs", "nonce"}},
	}
	for _, tc := range cases {
		_, err := g.create(t, "ws", tc.body, tc.key)
		wantInvalidAt(t, err, tc.in, tc.field, tc.path)
	}
	var nf *domain.NotFoundError
	if _, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "nope@1.0.0"}, ""); !errors.As(err, &nf) || !strings.Contains(nf.Error(), "nope@1.0.0") {
		t.Fatalf("an unknown task: %v, want not found naming it", err)
	}
	if envs, recs := g.counts(t); envs != 0 || recs != 0 {
		t.Fatalf("refused creates recorded %d environments and %d records", envs, recs)
	}
}

// An admission refusal (no credits) records nothing, not even the key: the
// same key retried once admitted makes the environment.
func TestCreateAdmissionRefusal(t *testing.T) {
	g := newUseRig(t)
	g.admit = &domain.InsufficientCreditsError{Org: "acme"}
	_, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "k1")
	var credits *domain.InsufficientCreditsError
	if !errors.As(err, &credits) {
		t.Fatalf("create refused by admission: %v, want the admission's error", err)
	}
	if envs, recs := g.counts(t); envs != 0 || recs != 0 {
		t.Fatalf("a refused create recorded %d environments and %d records", envs, recs)
	}
	g.admit = nil
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "k1")
	if err != nil || c.Replayed || c.ExecuteToken == "" {
		t.Fatalf("the retry once admitted: %+v, %v", c, err)
	}
	// A replay is answered without asking admission again.
	g.admit = &domain.InsufficientCreditsError{Org: "acme"}
	if again, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "k1"); err != nil || !again.Replayed {
		t.Fatalf("a replay while admission refuses: %+v, %v", again, err)
	}
}

func TestGetAndList(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	e := g.ready(t)
	var nf *domain.NotFoundError
	for _, x := range []struct{ ws, id string }{{"ws2", e.ID}, {"ws", "nope"}, {"ws", strings.Repeat("x", 300)}} {
		if _, err := g.svc.Get(ctx, "acme", x.ws, x.id); !errors.As(err, &nf) {
			t.Fatalf("Get %s/%.20s: %v, want not found", x.ws, x.id, err)
		}
		if len(nf.Error()) > 200 {
			t.Fatalf("the not found error echoes a long id whole: %s", nf.Error())
		}
	}
	for range 2 {
		if _, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	p, err := g.svc.List(ctx, ListRequest{Org: "acme", Workspace: "ws", Limit: 2})
	if err != nil || len(p.Envs) != 2 || !p.HasNext || p.Envs[0].ID != e.ID {
		t.Fatalf("first page: %d, next %v, %v (oldest first)", len(p.Envs), p.HasNext, err)
	}
	p, err = g.svc.List(ctx, ListRequest{Org: "acme", Workspace: "ws", Offset: 2, Limit: 2})
	if err != nil || len(p.Envs) != 1 || p.HasNext {
		t.Fatalf("last page: %d, next %v, %v", len(p.Envs), p.HasNext, err)
	}
	p, err = g.svc.List(ctx, ListRequest{Org: "acme", Workspace: "ws", States: []taskenv.State{taskenv.StateBuilding}, Limit: 10})
	if err != nil || len(p.Envs) != 2 || p.Envs[0].State != taskenv.StateBuilding {
		t.Fatalf("building ones: %d, %v", len(p.Envs), err)
	}
	if _, err := g.svc.List(ctx, ListRequest{Org: "acme", Workspace: "ws"}); err == nil {
		t.Fatal("a list without a limit is refused")
	}
}

func TestPauseResume(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	e := g.ready(t)
	p, err := g.svc.Pause(ctx, e)
	if err != nil || p.State != taskenv.StatePaused || g.eng.state(e.ID)["web"] != "paused" || g.record(t, e).Phase != sandbox.PhasePaused {
		t.Fatalf("pause: %v, %v; engine %v", p, err, g.eng.state(e.ID))
	}
	_, err = g.svc.Pause(ctx, p)
	wantConflict(t, err, "only a ready environment can be paused")
	r, err := g.svc.Resume(ctx, p)
	if err != nil || r.State != taskenv.StateReady || g.eng.state(e.ID)["web"] != "running" || g.record(t, e).Phase != sandbox.PhaseRunning {
		t.Fatalf("resume: %v, %v; engine %v", r, err, g.eng.state(e.ID))
	}
	_, err = g.svc.Resume(ctx, r)
	wantConflict(t, err, "only a paused environment can be resumed")
	// The engine refuses: a provider error, the environment and its record as they were.
	g.eng.fakeEngine.mu.Lock()
	g.eng.pauseErr = &compute.ProviderError{Op: "pausing", Err: errors.New("the engine refused")}
	g.eng.fakeEngine.mu.Unlock()
	_, err = g.svc.Pause(ctx, r)
	var pe *domain.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "the engine refused") {
		t.Fatalf("a refused pause: %v, want a provider error", err)
	}
	if after := g.env(t, e.ID, taskenv.StateReady); g.record(t, after).Phase != sandbox.PhaseRunning {
		t.Fatalf("after a refused pause the record is %s", g.record(t, after).Phase)
	}
}

// An environment that is not ready (building) is neither paused nor
// resumed, and its record is left pending.
func TestPauseResumeNotReady(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.svc.Pause(ctx, c.Env)
	wantConflict(t, err, "is building; only a ready environment can be paused")
	_, err = g.svc.Resume(ctx, c.Env)
	wantConflict(t, err, "is building; only a paused environment can be resumed")
	if e := g.env(t, c.Env.ID, taskenv.StateBuilding); g.record(t, e).Phase != sandbox.PhasePending {
		t.Fatalf("the record of a refused pause is %s", g.record(t, e).Phase)
	}
	// Torn down: a conflict too.
	d, err := g.svc.Delete(ctx, c.Env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.svc.Resume(ctx, d)
	wantConflict(t, err, "is torn_down")
}

func TestDeleteTwice(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	e := g.ready(t)
	d, err := g.svc.Delete(ctx, e)
	if err != nil || d.State != taskenv.StateTornDown || len(g.eng.state(e.ID)) != 0 {
		t.Fatalf("delete: %v, %v; engine %v", d, err, g.eng.state(e.ID))
	}
	r := g.record(t, e)
	if r.Phase != sandbox.PhaseDeleted || r.KillReason != sandbox.KillTornDown {
		t.Fatalf("record after delete: %s (%s)", r.Phase, r.KillReason)
	}
	// Again (with the environment as first read): the same answer, nothing moves.
	d2, err := g.svc.Delete(ctx, d)
	if err != nil || d2.State != taskenv.StateTornDown || len(d2.Timeline) != len(d.Timeline) {
		t.Fatalf("second delete: %v, %v", d2, err)
	}
	if r2 := g.record(t, e); r2.Phase != sandbox.PhaseDeleted || len(r2.Timeline) != len(r.Timeline) {
		t.Fatalf("a second delete moved the record: %s", recordPath(r2))
	}
	// One that never got past building is torn down as well.
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err = g.svc.Delete(ctx, c.Env); err != nil || d.State != taskenv.StateTornDown || g.record(t, d).Phase != sandbox.PhaseDeleted {
		t.Fatalf("deleting a building environment: %v, %v", d, err)
	}
}

func cmd(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func TestExecute(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	e := g.ready(t)
	res, err := g.svc.Execute(ctx, e, ExecRequest{Command: cmd("echo hi")})
	if err != nil || res.ExitCode != 0 || res.Output != "ok\n" || res.Service != "client" || res.DurationMs != 5 || res.Note != "" {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	if got := g.eng.ran[len(g.eng.ran)-1]; !reflect.DeepEqual(got, []string{"sh", "-c", "echo hi"}) {
		t.Fatalf("a string command runs with sh -c: %q", got)
	}
	// Timed out and truncated: exit code as the engine says, a note for each.
	g.eng.mu.Lock()
	g.eng.run = func([]string) (*compute.GroupExecResult, error) {
		return &compute.GroupExecResult{ExitCode: 124, Output: []byte("a\xffb"), TimedOut: true, Truncated: true}, nil
	}
	g.eng.mu.Unlock()
	two := 2
	res, err = g.svc.Execute(ctx, e, ExecRequest{Command: cmd([]string{"sleep", "9"}), TimeoutSec: &two})
	if err != nil || res.ExitCode != 124 || !res.TimedOut || !res.Truncated || res.Output != "a\uFFFDb" ||
		!strings.Contains(res.Note, "timeout_sec (2 s)") || !strings.Contains(res.Note, "truncated") {
		t.Fatalf("a timed out command: %+v, %v", res, err)
	}
	// The engine fails: a provider error.
	g.eng.mu.Lock()
	g.eng.run = func([]string) (*compute.GroupExecResult, error) {
		return nil, &compute.ProviderError{Op: "exec", Err: errors.New("daemon gone")}
	}
	g.eng.mu.Unlock()
	var pe *domain.ProviderError
	if _, err = g.svc.Execute(ctx, e, ExecRequest{Command: cmd("true")}); !errors.As(err, &pe) || !strings.Contains(pe.Detail, "daemon gone") {
		t.Fatalf("an engine failure: %v, want a provider error", err)
	}
}

func TestExecuteRefusesBadInput(t *testing.T) {
	g := newUseRig(t)
	e := g.ready(t)
	zero, big := 0, MaxExecTimeoutSec+1
	cases := []struct {
		name  string
		req   ExecRequest
		field string
		path  []any
	}{
		{"no command", ExecRequest{}, "command", nil},
		{"null command", ExecRequest{Command: cmd(nil)}, "command", nil},
		{"empty string", ExecRequest{Command: cmd(" ")}, "command", nil},
		{"empty argv", ExecRequest{Command: cmd([]string{})}, "command", nil},
		{"not a command", ExecRequest{Command: cmd(5)}, "command", nil},
		{"NUL in an argument", ExecRequest{Command: cmd([]string{"ls", "a\x00"})}, "command.1", []any{"command", 1}},
		{"too long", ExecRequest{Command: cmd(strings.Repeat("x", maxCommandLen))}, "command", nil},
		{"timeout 0", ExecRequest{Command: cmd("true"), TimeoutSec: &zero}, "timeout_sec", nil},
		{"timeout too long", ExecRequest{Command: cmd("true"), TimeoutSec: &big}, "timeout_sec", nil},
	}
	for _, tc := range cases {
		_, err := g.svc.Execute(context.Background(), e, tc.req)
		wantInvalidAt(t, err, domain.InBody, tc.field, tc.path)
		err = g.svc.ExecuteStream(context.Background(), e, tc.req, func(compute.ProcessEvent) error {
			t.Fatalf("%s: a refused command emitted an event", tc.name)
			return nil
		})
		wantInvalidAt(t, err, domain.InBody, tc.field, tc.path)
	}
	if g.eng.outs != 0 {
		t.Fatalf("refused commands reached the engine %d times", g.eng.outs)
	}
}

// A command runs only in a ready environment whose execute service runs.
func TestExecuteNotRunning(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	e := g.ready(t)
	// The execute service is gone from the engine.
	g.eng.fakeEngine.mu.Lock()
	delete(g.eng.envs[e.ID], "client")
	g.eng.fakeEngine.mu.Unlock()
	_, err := g.svc.Execute(ctx, e, ExecRequest{Command: cmd("true")})
	wantConflict(t, err, "cannot run commands now")
	err = g.svc.ExecuteStream(ctx, e, ExecRequest{Command: cmd("true")}, func(compute.ProcessEvent) error { return nil })
	wantConflict(t, err, "cannot run commands now")
	// Paused: a conflict saying to resume, before the engine is asked.
	e = g.ready(t)
	p, err := g.svc.Pause(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.svc.Execute(ctx, p, ExecRequest{Command: cmd("true")})
	wantConflict(t, err, "is paused; commands run only in a ready environment (resume it first)")
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.svc.Execute(ctx, c.Env, ExecRequest{Command: cmd("true")})
	wantConflict(t, err, "is building")
	if g.eng.outs != 0 {
		t.Fatalf("the engine ran %d commands", g.eng.outs)
	}
}

// An engine that does not stream answers a stream with one buffered run:
// start, the output, exit.
func TestExecuteStreamFallsBackToOneRun(t *testing.T) {
	g := newUseRig(t)
	e := g.ready(t)
	g.eng.mu.Lock()
	g.eng.run = func([]string) (*compute.GroupExecResult, error) {
		return &compute.GroupExecResult{ExitCode: 3, Output: []byte("out")}, nil
	}
	g.eng.mu.Unlock()
	var got []string
	err := g.svc.ExecuteStream(context.Background(), e, ExecRequest{Command: cmd([]string{"false"})}, func(ev compute.ProcessEvent) error {
		got = append(got, ev.Type+":"+string(ev.Data))
		if ev.Type == compute.EventExit && ev.ExitCode != 3 {
			t.Errorf("exit code %d, want 3", ev.ExitCode)
		}
		return nil
	})
	if err != nil || strings.Join(got, " ") != "start: stdout:out exit:" {
		t.Fatalf("events %q, %v", got, err)
	}
	// A client that leaves mid-stream ends it with its error.
	gone := errors.New("client gone")
	if err := g.svc.ExecuteStream(context.Background(), e, ExecRequest{Command: cmd("true")}, func(compute.ProcessEvent) error { return gone }); !errors.Is(err, gone) {
		t.Fatalf("a failed emit: %v", err)
	}
}

// The HTTP edge keeps a use case's error location part by part: a list
// index stays a number, an input name with a dot one part.
func TestCreateErrorLocations(t *testing.T) {
	g := newUseRig(t)
	r := mux.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			next.ServeHTTP(w, req.WithContext(httpx.WithOrg(req.Context(), "acme")))
		})
	})
	g.svc.Register(r)
	for body, want := range map[string][]any{
		`{"task_ref": "slow-start", "secret_ids": ["s1", ""]}`: {"body", "secret_ids", float64(1)},
		`{"task_ref": "slow-start", "inputs": {"a.b": "1"}}`:   {"body", "inputs", "a.b"},
		`{"task_ref": "slow-start", "timeout_sec": 1}`:         {"body", "timeout_sec"},
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/org/acme/ws/ws/environments", strings.NewReader(body)))
		var env struct {
			Errors []struct {
				Loc []any `json:"loc"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != http.StatusBadRequest || len(env.Errors) != 1 ||
			!reflect.DeepEqual(env.Errors[0].Loc, want) {
			t.Errorf("%s: %d %s, want loc %v", body, rec.Code, rec.Body, want)
		}
	}
}

func TestCheck(t *testing.T) {
	g := newUseRig(t)
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "nonce-build", Inputs: map[string]string{"nonce": "n-42"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	for value, want := range map[string]bool{"n-42": true, "n-4": false, "": false, "n-42 ": false} {
		if got, err := g.svc.Check(c.Env, apitypes.CheckInput{Input: str("nonce"), Value: str(value)}); err != nil || got != want {
			t.Errorf("check %q: %v, %v; want %v", value, got, err, want)
		}
	}
	for _, tc := range []struct {
		req   apitypes.CheckInput
		field string
	}{
		{apitypes.CheckInput{Value: str("x")}, "input"},
		{apitypes.CheckInput{Input: str("nonce")}, "value"},
		{apitypes.CheckInput{Input: str("bogus"), Value: str("x")}, "input"},
		{apitypes.CheckInput{Input: str("nonce"), Value: str(strings.Repeat("x", 1<<20))}, "value"},
	} {
		_, err := g.svc.Check(c.Env, tc.req)
		wantInvalidAt(t, err, domain.InBody, tc.field, nil)
	}
}

func TestWaitState(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	c, err := g.create(t, "ws", apitypes.CreateTaskEnvironment{TaskRef: "slow-start"}, "")
	if err != nil {
		t.Fatal(err)
	}
	// No wait: the state as it is.
	if e, err := g.svc.WaitState(ctx, c.Env, WaitRequest{}); err != nil || e.State != taskenv.StateBuilding {
		t.Fatalf("no wait: %v, %v", e, err)
	}
	// A wait while building ends when the driver makes it ready.
	got := make(chan *Env, 1)
	go func() {
		e, err := g.svc.WaitState(ctx, c.Env, WaitRequest{Wait: 50 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- e
	}()
	d := driver{g.svc}
	if err := d.Step(ctx, c.Env.ID, d.Lane(ctx, c.Env.ID)); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e == nil || e.State != taskenv.StateReady {
			t.Fatalf("the wait answered %v, want ready", e)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the wait did not end when the environment became ready")
	}
	// Since a state it is not in: at once. Since its own state: until the caller leaves.
	ready := g.env(t, c.Env.ID, taskenv.StateReady)
	if e, err := g.svc.WaitState(ctx, ready, WaitRequest{Since: taskenv.StateBuilding, Wait: 50 * time.Second}); err != nil || e.State != taskenv.StateReady {
		t.Fatalf("since building: %v, %v", e, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.svc.WaitState(cctx, ready, WaitRequest{Since: taskenv.StateReady, Wait: 50 * time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a caller that left: %v", err)
	}
}

// An environment whose record is stopping (its teardown decided, its
// containers being removed) still shows ready, but runs no more commands:
// a conflict saying it is being torn down, before the engine is asked.
func TestExecuteRefusedWhileTornDown(t *testing.T) {
	g := newUseRig(t)
	ctx := context.Background()
	e := g.ready(t)
	if _, err := g.svc.Execute(ctx, e, ExecRequest{Command: cmd("true")}); err != nil {
		t.Fatalf("a ready environment: %v", err)
	}
	ran := g.eng.outs
	if _, err := g.db.Transition(ctx, e.RecordID, sandbox.PhaseStopping, sandbox.CauseUser, func(r *store.Record) error {
		r.StopAt(time.Now())
		r.KillReason = sandbox.KillTornDown
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if e.State != taskenv.StateReady {
		t.Fatalf("environment %s, want ready (the state a teardown in progress shows)", e.State)
	}
	_, err := g.svc.Execute(ctx, e, ExecRequest{Command: cmd("true")})
	wantConflict(t, err, "it is being torn down")
	err = g.svc.ExecuteStream(ctx, e, ExecRequest{Command: cmd("true")}, func(compute.ProcessEvent) error {
		t.Fatal("a refused command emitted an event")
		return nil
	})
	wantConflict(t, err, "it is being torn down")
	if httpx.AsError(err).Code != http.StatusConflict {
		t.Fatalf("answered %d, want 409", httpx.AsError(err).Code)
	}
	if g.eng.outs != ran {
		t.Fatalf("the engine ran %d commands after the teardown was decided", g.eng.outs-ran)
	}
}
