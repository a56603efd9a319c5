package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// A claim passes over the webhooks of the orgs it is told to skip (the
// dispatcher's orgs with no room left), and claims given back unattempted
// are due again at once for anyone.
func TestDeliveryClaimsSkipOrgsAndRelease(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		if err := db.PutWebhook(ctx, &Webhook{ID: "wh1", OrgID: rec.OrgID, URL: "http://x", Enabled: true, Secret: "s", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler)
		n := 0
		if _, err := db.FanOut(ctx, time.Now(), func(e *Event) []byte { return []byte(e.ID) }, func() string { n++; return fmt.Sprintf("d%d", n) }); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if got, err := db.ClaimDeliveries(ctx, "A", now, time.Minute, 10, "another-org", rec.OrgID); err != nil || len(got) != 0 {
			t.Fatalf("a claim skipping the webhook's org took %v (%v)", got, err)
		}
		got, err := db.ClaimDeliveries(ctx, "A", now, time.Minute, 10, "another-org")
		if err != nil || len(got) != 1 {
			t.Fatalf("a claim skipping another org: %v (%v), want the delivery", got, err)
		}
		if err := db.ReleaseClaims(ctx, "B", []string{got[0].ID}); err != nil {
			t.Fatal(err)
		}
		if again, _ := db.ClaimDeliveries(ctx, "B", now, time.Minute, 10); len(again) != 0 {
			t.Fatalf("a release by another owner freed A's claim: %v", again)
		}
		if err := db.ReleaseClaims(ctx, "A", []string{got[0].ID}); err != nil {
			t.Fatal(err)
		}
		if again, _ := db.ClaimDeliveries(ctx, "B", now, time.Minute, 10); len(again) != 1 || again[0].ID != got[0].ID {
			t.Fatalf("after A gave it back, B claims %v, want %s", again, got[0].ID)
		}
	})
}
