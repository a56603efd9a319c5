package billing

import (
	"context"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Billing stops at the moment a sandbox should have stopped, however late
// the engine removes it: at endAt for a TTL, at the kill when the balance
// reaches zero. From that moment every view counts it as ended.
func TestBillingStopsAtTheStopMoment(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		s := newTestService(t, db, c, milliRate) // 1 micro-credit per ms of one CPU
		ctx := context.Background()

		// A TTL of 10 s that nothing enforced for 100 s (a late engine).
		rich := ensureOrg(t, db, "rich", 1_000_000_000)
		ttl := insertRunning(t, db, rich, "ttl", t0, sandbox.KindRuntime)
		if _, err := db.Transition(ctx, ttl.ID, "", "", func(r *store.Record) error { r.EndAt = t0.Add(10 * time.Second); return nil }); err != nil {
			t.Fatal(err)
		}
		c.Advance(100 * time.Second)
		if _, err := s.SettleAll(ctx); err != nil {
			t.Fatal(err)
		}
		if r, _ := db.GetRecord(ctx, ttl.ID); r.BilledMicro != 10_000 || s.View(r).TotalRuntimeSeconds != 10 {
			t.Fatalf("overdue TTL: billed %d micro for %v s, want 10000 for 10 s", r.BilledMicro, s.View(r).TotalRuntimeSeconds)
		}

		// An org whose balance covers 5 s: killed at that moment, then the
		// engine takes its time; nothing accrues meanwhile.
		poor := ensureOrg(t, db, "poor", 5_000)
		insertRunning(t, db, poor, "poor1", c.Now(), sandbox.KindRuntime)
		c.Advance(5 * time.Second)
		killAt := c.Now()
		if res, err := s.SettleAll(ctx); err != nil || res.Killed != 1 {
			t.Fatalf("kill pass: %+v %v", res, err)
		}
		c.Advance(80 * time.Second) // the container stays up meanwhile
		if _, err := s.SettleAll(ctx); err != nil {
			t.Fatal(err)
		}
		r, _ := db.GetRecord(ctx, "poor1")
		v := s.View(r)
		if r.Phase != sandbox.PhaseStopping || !r.KilledAt.Equal(killAt) || v.State != "killed" || v.RunningCredits != 0 || v.TotalRuntimeSeconds != 5 {
			t.Fatalf("killed record: phase %s killed_at %s (want %s), ledger state %s, running %v, runtime %v s",
				r.Phase, r.KilledAt, killAt, v.State, v.RunningCredits, v.TotalRuntimeSeconds)
		}
		b, err := s.Balance(context.Background(), poor)
		if err != nil {
			t.Fatal(err)
		}
		if b.RunningSandboxes != 0 || b.RunningCredits != 0 || b.Balance != 0 {
			t.Fatalf("/credits of the killed org: %+v; want no running sandbox and nothing accruing", b)
		}
	})
}
