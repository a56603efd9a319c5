package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Deliveries: one per event and webhook however often fan-out runs; only
// the oldest pending one of a sandbox is claimable (order); a claim whose
// holder died lapses and the same delivery is claimed again by another
// replica, whose result counts (the dead one's late result is ignored).
func TestDeliveryClaimsAndOrder(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		if err := db.PutWebhook(ctx, &Webhook{ID: "wh1", OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhaseStopping, sandbox.CauseUser, sandbox.PhaseDeleted, sandbox.CauseReconciler)
		n := 0
		newID := func() string { n++; return fmt.Sprintf("d%d", n) }
		render := func(e *Event) []byte { return []byte(e.ID) }
		now := time.Now()
		if got, err := db.FanOut(ctx, now, render, newID); err != nil || got != 2 {
			t.Fatalf("fan-out: %d %v", got, err)
		}
		// A webhook registered now gets none of the earlier events.
		if err := db.PutWebhook(ctx, &Webhook{ID: "wh2", OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if got, err := db.FanOut(ctx, now, render, newID); err != nil || got != 0 {
			t.Fatalf("second fan-out: %d %v", got, err)
		}
		if late, _ := db.ListDeliveries(ctx, "wh2", 10); len(late) != 0 {
			t.Fatalf("a webhook registered later got earlier events: %v", late)
		}
		a, err := db.ClaimDeliveries(ctx, "A", now, time.Minute, 10)
		if err != nil || len(a) != 1 || a[0].EventType != "sandbox.lifecycle.created" {
			t.Fatalf("A claims %v (%v): want only the first of the sandbox", a, err)
		}
		if b, _ := db.ClaimDeliveries(ctx, "B", now, time.Minute, 10); len(b) != 0 {
			t.Fatalf("B claims a held delivery: %v", b)
		}
		later := now.Add(2 * time.Minute) // A died: its claim lapsed
		b, _ := db.ClaimDeliveries(ctx, "B", later, time.Minute, 10)
		if len(b) != 1 || b[0].ID != a[0].ID {
			t.Fatalf("B after the lapse: %v, want %s again", b, a[0].ID)
		}
		if err := db.FinishDelivery(ctx, a[0], "A", DeliveryResult{At: later, Error: "late", Retry: later}); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishDelivery(ctx, b[0], "B", DeliveryResult{At: later, Status: 204}); err != nil {
			t.Fatal(err)
		}
		log, _ := db.ListDeliveries(ctx, "wh1", 10)
		if len(log) != 2 || log[1].Status != DeliveryDelivered || log[1].Attempts != 1 || log[1].LastError != "" {
			t.Fatalf("log after B's success: %+v", log[1])
		}
		next, _ := db.ClaimDeliveries(ctx, "B", later, time.Minute, 10)
		if len(next) != 1 || next[0].EventType != "sandbox.lifecycle.killed" {
			t.Fatalf("the next in order: %v", next)
		}
	})
}
