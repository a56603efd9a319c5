package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// ledger is the ledger API's (§2, package billing) view of environment
// id's record, read through its route on the rig's database.
func (g *taskRig) ledger(id string) map[string]any {
	g.t.Helper()
	_, r := g.env(id)
	b, err := billing.New(context.Background(), billing.Config{DB: g.db, Now: g.clock.Now})
	if err != nil {
		g.t.Fatal(err)
	}
	rt := mux.NewRouter()
	b.Register(rt)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/org/acme/sandboxes/"+r.ID, nil)
	rt.ServeHTTP(rec, req.WithContext(httpx.WithOrg(req.Context(), "acme")))
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); rec.Code != http.StatusOK || err != nil {
		g.t.Fatalf("ledger record %s: %d %s", r.ID, rec.Code, rec.Body)
	}
	return m
}

// slowRig is a rig whose engine is slow to remove: removals wait on the
// returned hold (the same engine and hold across restarts).
func slowRig(t *testing.T) (*taskRig, *computetest.RemoveHold) {
	g := newTaskRig(t)
	slow := computetest.NewRemoveHold()
	g.wrap = func(f *fakeEngine) Engine { return slow.Wrap(f) }
	g.restart()
	return g, slow
}

// A delete commits its decision (stopping, billing ended) at once, but the
// ledger record ends (deleted) only once the engine has removed every
// container: while the engine is slow to remove, the record reads stopping
// and the containers are still there.
func TestTaskTeardownEndsOnlyAfterRemoval(t *testing.T) {
	g, slow := slowRig(t)
	id := g.ready()
	type answer struct {
		code int
		m    map[string]any
	}
	done := make(chan answer, 1)
	go func() {
		code, m := g.do(http.MethodDelete, "/"+id, nil)
		done <- answer{code, m}
	}()
	slow.WaitRemoving(t, id, 10*time.Second)
	e, r := g.env(id)
	if r.Phase != sandbox.PhaseStopping || r.KillReason != sandbox.KillTornDown || r.KilledAt.IsZero() {
		t.Fatalf("during the removal: record %s (%s, killed at %s), want stopping (torn_down) with billing stopped", r.Phase, r.KillReason, r.KilledAt)
	}
	if n := len(g.eng.state(id)); n == 0 {
		t.Fatal("the engine removed the containers before the gate opened")
	}
	if e.State != taskenv.StateReady {
		t.Fatalf("environment %s during its removal, want ready: it shows torn_down only once its containers are gone", e.State)
	}
	// It shows ready, but runs no more commands.
	_, err := g.svc.Execute(context.Background(), e, ExecRequest{Command: json.RawMessage(`"true"`)})
	wantConflict(t, err, "it is being torn down")
	// The ledger reads it as what it is leaving, not killed, until then.
	if l := g.ledger(id); l["state"] != string(sandbox.LedgerRunning) || l["credits_per_second"] != float64(0) {
		t.Fatalf("ledger during the removal: %v, want running with billing stopped", l)
	}
	// Level-triggered: the driver owes the stopping record its end.
	if due, _ := g.d.Due(context.Background(), g.clock.Now()); len(due) != 1 || due[0] != id {
		t.Fatalf("due %v during the removal, want the stopping environment", due)
	}
	if l := g.d.Lane(context.Background(), id); l != reconciler.LaneDeadline {
		t.Fatalf("lane %d, want deadline", l)
	}
	slow.Release()
	var a answer
	select {
	case a = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the delete never answered")
	}
	if a.code != http.StatusOK || a.m["state"] != "torn_down" {
		t.Fatalf("delete: %d %v", a.code, a.m)
	}
	_, r = g.env(id)
	if r.Phase != sandbox.PhaseDeleted || len(g.eng.state(id)) != 0 {
		t.Fatalf("after the removal: record %s, engine %v", r.Phase, g.eng.state(id))
	}
	if l := g.ledger(id); l["state"] != string(sandbox.LedgerKilled) {
		t.Fatalf("ledger after the removal: %v, want killed", l["state"])
	}
	if got := recordPath(r); !strings.HasSuffix(got, "running(reconciler) stopping(user) deleted(user)") {
		t.Fatalf("record timeline %s: a delete passes through stopping", got)
	}
	if due, _ := g.d.Due(context.Background(), g.clock.Now()); len(due) != 0 {
		t.Fatalf("due %v after the end", due)
	}
}

// A failure ends the same way: stopping (failed) until the engine removed
// what the environment started, then failed.
func TestTaskFailureEndsOnlyAfterRemoval(t *testing.T) {
	g, slow := slowRig(t)
	id := g.ready()
	g.eng.mu.Lock()
	g.eng.envs[id]["web"] = "exited"
	g.eng.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- g.d.Observe(context.Background()) }()
	slow.WaitRemoving(t, id, 10*time.Second)
	e, r := g.env(id)
	if r.Phase != sandbox.PhaseStopping || r.KillReason != sandbox.KillFailed || e.State != taskenv.StateReady ||
		!strings.Contains(e.Error, `service "web" stopped unexpectedly`) || len(g.eng.state(id)) == 0 {
		t.Fatalf("during the removal: record %s (%s), env %s %q, engine %v", r.Phase, r.KillReason, e.State, e.Error, g.eng.state(id))
	}
	if l := g.ledger(id); l["state"] != string(sandbox.LedgerRunning) {
		t.Fatalf("ledger during the removal: %v, want running (killed once the containers are gone)", l["state"])
	}
	slow.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e, r = g.env(id); r.Phase != sandbox.PhaseFailed || e.State != taskenv.StateFailed || len(g.eng.state(id)) != 0 ||
		!strings.HasSuffix(recordPath(r), "stopping(provider) failed(provider)") {
		t.Fatalf("after the removal: record %s (%s), env %s, engine %v", r.Phase, recordPath(r), e.State, g.eng.state(id))
	}
	if l := g.ledger(id); l["state"] != string(sandbox.LedgerKilled) || l["kill_reason"] != sandbox.KillFailed {
		t.Fatalf("ledger after the removal: %v (%v), want killed (failed)", l["state"], l["kill_reason"])
	}
}

// A removal the engine refuses leaves the record stopping with its
// containers; a backend killed between the decision and the removal
// leaves it stopping too. The driver finishes both from the database.
func TestTaskStopFinishedFromTheDatabase(t *testing.T) {
	g, slow := slowRig(t)
	slow.Release()
	// Refused: the step reports it, nothing ends.
	id := g.ready()
	slow.FailWith(errors.New("the engine is down"))
	if code, m := g.do(http.MethodDelete, "/"+id, nil); code != http.StatusOK || m["state"] != "ready" {
		t.Fatalf("delete: %d %v (accepted; the environment shows ready until its containers are gone)", code, m)
	}
	if _, r := g.env(id); r.Phase != sandbox.PhaseStopping || len(g.eng.state(id)) == 0 {
		t.Fatalf("after a refused removal: record %s, engine %v", r.Phase, g.eng.state(id))
	}
	if err := g.d.Step(context.Background(), id, g.d.Lane(context.Background(), id)); err == nil {
		t.Fatal("a step whose removal was refused reported no error")
	}
	if _, r := g.env(id); r.Phase != sandbox.PhaseStopping {
		t.Fatalf("after a refused step: record %s, want stopping", r.Phase)
	}
	slow.FailWith(nil)
	g.step(id)
	if e, r := g.env(id); r.Phase != sandbox.PhaseDeleted || e.State != taskenv.StateTornDown || len(g.eng.state(id)) != 0 {
		t.Fatalf("finished: record %s env %s engine %v", r.Phase, e.State, g.eng.state(id))
	}
	// A crash after the decision: a new backend finds the record stopping.
	id = g.ready()
	now := g.clock.Now()
	if _, err := g.svc.apply(context.Background(), id, change{rec: sandbox.PhaseStopping, cause: sandbox.CauseTTL,
		recMut: func(r *store.Record) { r.StopAt(now); r.KillReason = sandbox.KillTimeout }}); err != nil {
		t.Fatal(err)
	}
	g.restart()
	if err := g.d.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, r := g.env(id); r.Phase != sandbox.PhaseStopping || len(g.eng.state(id)) == 0 {
		t.Fatalf("after recovery's observation: record %s engine %v (the lanes finish it)", r.Phase, g.eng.state(id))
	}
	due, _ := g.d.Due(context.Background(), g.clock.Now())
	if len(due) != 1 || due[0] != id {
		t.Fatalf("due %v: a record left stopping is owed its end", due)
	}
	g.step(id)
	if e, r := g.env(id); r.Phase != sandbox.PhaseDeleted || r.KillReason != sandbox.KillTimeout || e.State != taskenv.StateTornDown ||
		len(g.eng.state(id)) != 0 || e.Error != "" {
		t.Fatalf("finished after the crash: record %s (%s) env %s %q engine %v", r.Phase, r.KillReason, e.State, e.Error, g.eng.state(id))
	}
}

// A build runs off the lanes: the step that starts it moves the record to
// creating and returns while the build goes on; at most MaxConcurrentJobs
// build at once, the others wait in the pool (not in a lane).
func TestTaskBuildsRunOffTheLanes(t *testing.T) {
	g := newTaskRig(t)
	g.jobs = 1
	g.restart()
	entered := make(chan struct{}, 4)
	release := make(chan struct{})
	g.eng.bringHook = func(ctx context.Context) error {
		entered <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a, b := g.create(), g.create()
	for _, id := range []string{a, b} {
		if err := g.d.Step(context.Background(), id, reconciler.LaneCreate); err != nil {
			t.Fatal(err)
		}
		if _, r := g.env(id); r.Phase != sandbox.PhaseCreating {
			t.Fatalf("after its step: record %s, want creating", r.Phase)
		}
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no build started")
	}
	// Checking on it again changes nothing and does not wait.
	if err := g.d.Step(context.Background(), a, reconciler.LaneCreate); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
		t.Fatal("two environments provisioned at once with MaxConcurrentJobs 1")
	case <-time.After(200 * time.Millisecond): // a negative: nothing to poll for
	}
	// A delete of the one waiting in the pool goes through meanwhile.
	waiting := b
	if e, _ := g.env(a); e.State == taskenv.StateBuilding {
		waiting = a // a is still in the pool: b took the slot
	}
	if code, m := g.do(http.MethodDelete, "/"+waiting, nil); code != http.StatusOK || m["state"] != "torn_down" {
		t.Fatalf("delete while another builds: %d %v", code, m)
	}
	close(release)
	other := a
	if waiting == a {
		other = b
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		e, r := g.env(other)
		if e.State == taskenv.StateReady {
			if !strings.HasSuffix(recordPath(r), "creating(reconciler) running(reconciler)") {
				t.Fatalf("record timeline %s", recordPath(r))
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the build never finished: %s", e.State)
		}
	}
	if _, r := g.env(waiting); r.Phase != sandbox.PhaseDeleted {
		t.Fatalf("the deleted environment's record %s", r.Phase)
	}
}
