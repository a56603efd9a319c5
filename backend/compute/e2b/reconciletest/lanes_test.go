package reconciletest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// TestDeadlinesDoNotWaitBehindCreates: while a burst of creates is blocked
// in a slow E2B (more creates than workers), a TTL expiry and a delete are
// carried out at once, and the expired sandbox is billed up to its endAt
// only.
func TestDeadlinesDoNotWaitBehindCreates(t *testing.T) {
	t.Parallel()
	r := setupReconciler(t)
	ctx := ctxT(t)
	const workers = 8
	rc := reconciler.New(reconciler.Config{DB: r.db, Provider: r.prov, Workers: workers, Interval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	// A sandbox with a 1 s TTL, running before the burst.
	now := time.Now().UTC()
	due := r.insert(t, "rdue", sandbox.PhasePending, func(rec *store.Record) { rec.TimeoutSec, rec.EndAt = 1, now.Add(time.Second) })
	if got, err := rc.Drive(ctx, due.ID); err != nil || got.Phase != sandbox.PhaseRunning {
		t.Fatalf("drive to running: %+v %v", got, err)
	}

	release := r.fake.Hold(e2bfake.RouteCreate)
	defer release()
	for i := range 2 * workers {
		r.insert(t, fmt.Sprintf("rburst%02d", i), sandbox.PhasePending, nil)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rc.Run(runCtx) }()
	defer func() { stop(); release(); <-done }()
	waitFor(t, 10*time.Second, "creates blocked in E2B", func() bool { return r.fake.Held() > 0 })

	// A sandbox whose create is blocked too is deleted by its user.
	victim := "rburst00"
	waitFor(t, 10*time.Second, "the victim's create in flight", func() bool { return r.record(t, victim).Phase == sandbox.PhaseCreating })
	stopAt := time.Now().UTC()
	rec, err := r.db.Transition(ctx, victim, sandbox.PhaseStopping, sandbox.CauseUser, func(rec *store.Record) error {
		rec.StopAt(stopAt)
		rec.KillReason = sandbox.KillDeleted
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rc.Changed(rec)
	rc.Kick(victim)

	for _, id := range []string{due.ID, victim} {
		waitFor(t, 10*time.Second, id+" deleted while creates are blocked", func() bool {
			return r.record(t, id).Phase == sandbox.PhaseDeleted
		})
	}
	if r.fake.Held() == 0 {
		t.Fatal("the creates were released before the deadlines were met: the test proves nothing")
	}
	got := r.record(t, due.ID)
	if !got.KilledAt.Equal(got.EndAt) || got.RuntimeNs != int64(got.EndAt.Sub(got.StartedAt)) || got.RuntimeNs > int64(time.Second) {
		t.Fatalf("expired sandbox: killed at %s (endAt %s), runtime %s; want killed at endAt and at most its 1 s TTL",
			got.KilledAt, got.EndAt, time.Duration(got.RuntimeNs))
	}
	if _, ok := r.fake.Sandbox(got.ProviderID); ok {
		t.Fatalf("the expired sandbox's instance %s is still there", got.ProviderID)
	}

	release()
	waitFor(t, 20*time.Second, "the burst running after the release", func() bool {
		for i := 1; i < 2*workers; i++ {
			if r.record(t, fmt.Sprintf("rburst%02d", i)).Phase != sandbox.PhaseRunning {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond) // poll interval within the deadline
	}
}
