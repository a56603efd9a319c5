package reconciler

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// The sandbox driver's unit tests: a fake compute, a fake clock and SQLite
// in a temporary directory; no engine. Each test calls the driver's entry
// points (Drive, Recover, the deadline sweep) directly, so what it asserts
// does not depend on the loop's pace.

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type rig struct {
	db    *store.DB
	fake  *computetest.Fake
	clock *FakeClock
	rc    *Reconciler
	org   string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	org, _, err := db.EnsureOrg(context.Background(), "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	g := &rig{db: db, fake: computetest.New(), clock: NewFakeClock(t0), org: org.ID}
	g.rc = g.restart()
	return g
}

// restart is a new Reconciler on the same database and compute, as after a
// backend restart.
func (g *rig) restart() *Reconciler {
	return New(Config{DB: g.db, Provider: g.fake, Clock: g.clock, CreateDeadline: 2 * time.Minute, OpDeadline: time.Minute})
}

func (g *rig) insert(t *testing.T, id string, timeoutSec int) {
	t.Helper()
	r := &store.Record{ID: id, OrgID: g.org, Kind: sandbox.KindRuntime, Provider: "fake", Phase: sandbox.PhasePending,
		TemplateID: "base", TimeoutSec: timeoutSec, CreatedAt: g.clock.Now(), EndAt: g.clock.Now().Add(time.Duration(timeoutSec) * time.Second)}
	if err := g.db.InsertRecord(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func (g *rig) get(t *testing.T, id string) *store.Record {
	t.Helper()
	r, err := g.db.GetRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (g *rig) drive(t *testing.T, id string) *store.Record {
	t.Helper()
	r, err := g.rc.Drive(context.Background(), id)
	if err != nil {
		t.Fatalf("drive %s: %v", id, err)
	}
	return r
}

// move makes a transition as a handler would (user cause), and tells the
// reconciler, as the lifecycle service does.
func (g *rig) move(t *testing.T, id string, to sandbox.Phase, mutate func(r *store.Record)) {
	t.Helper()
	r, err := g.db.Transition(context.Background(), id, to, sandbox.CauseUser, func(r *store.Record) error {
		if mutate != nil {
			mutate(r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("move %s to %s: %v", id, to, err)
	}
	g.rc.Changed(r)
}

func lastCause(r *store.Record) string {
	if len(r.Timeline) == 0 {
		return ""
	}
	return string(r.Timeline[len(r.Timeline)-1].Cause)
}

func TestSandboxDriverCreateToRunning(t *testing.T) {
	g := newRig(t)
	g.insert(t, "sb1", 300)
	g.clock.Advance(5 * time.Second) // a create that waited: the TTL counts from running
	r := g.drive(t, "sb1")
	if r.Phase != sandbox.PhaseRunning {
		t.Fatalf("phase %s, want running", r.Phase)
	}
	if r.ProviderID == "" || len(g.fake.Instances()) != 1 {
		t.Fatalf("instance not recorded: provider id %q, instances %v", r.ProviderID, g.fake.Instances())
	}
	if want := t0.Add(5*time.Second + 300*time.Second); !r.EndAt.Equal(want) {
		t.Fatalf("endAt %s, want %s (the TTL buys running time)", r.EndAt, want)
	}
	if !r.StartedAt.Equal(t0.Add(5*time.Second)) || !r.PhaseDeadline.IsZero() {
		t.Fatalf("startedAt %s deadline %s", r.StartedAt, r.PhaseDeadline)
	}
	var phases []string
	for _, e := range r.Timeline {
		phases = append(phases, e.Phase)
	}
	if got := strings.Join(phases, ","); got != "pending,creating,running" {
		t.Fatalf("timeline %s", got)
	}
}

func TestSandboxDriverTTLExpiryStopsAtEndAt(t *testing.T) {
	g := newRig(t)
	g.insert(t, "sb1", 60)
	r := g.drive(t, "sb1")
	endAt := r.EndAt
	g.clock.Advance(59 * time.Second)
	g.rc.sweepDue(context.Background())
	if r = g.drive(t, "sb1"); r.Phase != sandbox.PhaseRunning {
		t.Fatalf("before endAt: phase %s, want running", r.Phase)
	}
	// The sweep runs late (a busy backend): the stop is still dated endAt.
	g.clock.Advance(17 * time.Second)
	g.rc.sweepDue(context.Background())
	if r = g.get(t, "sb1"); r.Phase != sandbox.PhaseStopping || !r.KilledAt.Equal(endAt) || r.KillReason != sandbox.KillTimeout {
		t.Fatalf("after the sweep: phase %s killedAt %s reason %q, want stopping at %s (timeout)", r.Phase, r.KilledAt, r.KillReason, endAt)
	}
	if lastCause(r) != string(sandbox.CauseTTL) {
		t.Fatalf("cause %q, want ttl", lastCause(r))
	}
	r = g.drive(t, "sb1")
	if r.Phase != sandbox.PhaseDeleted || !r.KilledAt.Equal(endAt) || r.RuntimeAt(g.clock.Now()) != 60*time.Second {
		t.Fatalf("phase %s killedAt %s runtime %s, want deleted at %s after exactly 60s", r.Phase, r.KilledAt, r.RuntimeAt(g.clock.Now()), endAt)
	}
	if n := len(g.fake.Instances()); n != 0 {
		t.Fatalf("%d instance(s) left", n)
	}
}

func TestSandboxDriverStopDuringCreateCancelsIt(t *testing.T) {
	g := newRig(t)
	g.insert(t, "sb1", 300)
	g.fake.Hold()
	defer g.fake.Release()
	done := make(chan *store.Record, 1)
	go func() {
		r, err := g.rc.Drive(context.Background(), "sb1")
		if err != nil {
			t.Errorf("drive: %v", err)
		}
		done <- r
	}()
	select {
	case <-g.fake.Entered():
	case <-time.After(10 * time.Second):
		t.Fatal("the create never reached the provider")
	}
	g.move(t, "sb1", sandbox.PhaseStopping, func(r *store.Record) { r.StopAt(g.clock.Now()); r.KillReason = sandbox.KillDeleted })
	var r *store.Record
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stop did not cancel the create in flight")
	}
	if r == nil || r.Phase != sandbox.PhaseDeleted {
		t.Fatalf("record %+v, want deleted", r)
	}
	if n := len(g.fake.Instances()); n != 0 {
		t.Fatalf("%d instance(s) left after a stop during the create", n)
	}
}

func TestSandboxDriverPauseResume(t *testing.T) {
	g := newRig(t)
	g.insert(t, "sb1", 300)
	g.drive(t, "sb1")
	g.clock.Advance(10 * time.Second)
	g.move(t, "sb1", sandbox.PhasePausing, nil)
	r := g.drive(t, "sb1")
	if r.Phase != sandbox.PhasePaused || g.fake.Instances()[0].Status != compute.StatusPaused {
		t.Fatalf("after pausing: phase %s, instance %s", r.Phase, g.fake.Instances()[0].Status)
	}
	if !r.LastPausedAt.Equal(g.clock.Now()) || r.RuntimeAt(g.clock.Now().Add(time.Hour)) != 10*time.Second {
		t.Fatalf("paused at %s with runtime %s; a paused sandbox accrues no time", r.LastPausedAt, r.RuntimeAt(g.clock.Now().Add(time.Hour)))
	}
	g.move(t, "sb1", sandbox.PhaseResuming, nil)
	if r = g.drive(t, "sb1"); r.Phase != sandbox.PhaseRunning || g.fake.Instances()[0].Status != compute.StatusRunning || r.Sessions != 2 {
		t.Fatalf("after resuming: phase %s, instance %s, sessions %d", r.Phase, g.fake.Instances()[0].Status, r.Sessions)
	}
	// A refused pause leaves the record running and reports the refusal.
	g.fake.Fail("pause", compute.Errorf(compute.KindUnavailable, "pause", nil, "engine busy"))
	g.move(t, "sb1", sandbox.PhasePausing, nil)
	_, err := g.rc.Drive(context.Background(), "sb1")
	var op *OpError
	if !errors.As(err, &op) || op.Op != "pause" {
		t.Fatalf("refused pause: err %v, want *OpError pause", err)
	}
	if r = g.get(t, "sb1"); r.Phase != sandbox.PhaseRunning || lastCause(r) != string(sandbox.CauseProvider) {
		t.Fatalf("after a refused pause: phase %s cause %s, want running (provider)", r.Phase, lastCause(r))
	}
}

func TestSandboxDriverRecoversTransitionalRecords(t *testing.T) {
	g := newRig(t)
	ctx := context.Background()
	// A killed backend left: a create it never finished, one whose instance
	// it made but never recorded, a pause and a delete in progress, and a
	// create past its deadline.
	for _, id := range []string{"creating", "made", "pausing", "stopping", "late"} {
		g.insert(t, id, 300)
	}
	for _, id := range []string{"pausing", "stopping"} {
		g.drive(t, id)
	}
	for _, id := range []string{"creating", "made", "late"} {
		if _, err := g.db.Transition(ctx, id, sandbox.PhaseCreating, sandbox.CauseReconciler, func(r *store.Record) error {
			r.PhaseDeadline = g.clock.Now().Add(2 * time.Minute)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	g.fake.Put("made", compute.StatusRunning)
	g.move(t, "pausing", sandbox.PhasePausing, nil)
	g.move(t, "stopping", sandbox.PhaseStopping, func(r *store.Record) { r.StopAt(g.clock.Now()); r.KillReason = sandbox.KillDeleted })
	// An orphan: an instance whose record this database never had.
	g.fake.Put("unknown", compute.StatusRunning)

	g.clock.Advance(30 * time.Second)
	if _, err := g.db.Transition(ctx, "late", "", "", func(r *store.Record) error {
		r.PhaseDeadline = g.clock.Now().Add(-time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	g.rc = g.restart()
	if err := g.rc.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]sandbox.Phase{"creating": sandbox.PhaseRunning, "made": sandbox.PhaseRunning,
		"pausing": sandbox.PhasePaused, "stopping": sandbox.PhaseDeleted, "late": sandbox.PhaseFailed}
	for id, p := range want {
		r := g.get(t, id)
		if r.Phase != p {
			t.Errorf("%s: phase %s, want %s", id, r.Phase, p)
		}
		if lastCause(r) != string(sandbox.CauseRecovery) {
			t.Errorf("%s: cause %q, want recovery", id, lastCause(r))
		}
	}
	if r := g.get(t, "late"); !strings.Contains(r.Diagnostic, "did not start within 2m0s") {
		t.Errorf("late create: diagnostic %q", r.Diagnostic)
	}
	made := 0
	for _, in := range g.fake.Instances() {
		switch in.RecordID {
		case "made":
			made++
		case "unknown", "stopping", "late":
			t.Errorf("instance of %s left after recovery", in.RecordID)
		}
	}
	if made != 1 {
		t.Errorf("the instance made before the crash was not adopted: %d instance(s) of it", made)
	}
}

func TestSandboxDriverProviderErrorFailsWithDiagnostic(t *testing.T) {
	g := newRig(t)
	g.insert(t, "sb1", 300)
	g.fake.Fail("create", compute.Errorf(compute.KindImageMissing, "create", nil,
		"image dreadnode/nope not found in /var/lib/docker/image/overlay2"))
	r := g.drive(t, "sb1")
	if r.Phase != sandbox.PhaseFailed || r.KillReason != sandbox.KillFailed {
		t.Fatalf("phase %s reason %q, want failed", r.Phase, r.KillReason)
	}
	if want := "image missing: create: image dreadnode/nope not found in <engine storage>"; r.Diagnostic != want {
		t.Fatalf("diagnostic %q, want %q", r.Diagnostic, want)
	}
	causes := map[string]bool{}
	for _, e := range r.Timeline {
		causes[e.Phase+":"+string(e.Cause)] = true
	}
	if !causes["stopping:provider"] {
		t.Fatalf("timeline %+v: the failure must be recorded with cause provider", r.Timeline)
	}
	// The instance that exited on its own: the observation completes or fails it.
	g.fake.Fail("create", nil)
	g.insert(t, "sb2", 300)
	r = g.drive(t, "sb2")
	g.fake.SetStatus(r.Ref(), compute.StatusExited, 3)
	if err := g.rc.Observe(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r = g.drive(t, "sb2"); r.Phase != sandbox.PhaseFailed || !strings.Contains(r.Diagnostic, "exited with code 3") {
		t.Fatalf("exited instance: phase %s diagnostic %q", r.Phase, r.Diagnostic)
	}
}
