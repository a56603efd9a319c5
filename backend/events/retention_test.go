package events

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	sbx "github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
)

// The sweep keeps events for the retention: 7 days unless configured
// (DREADNODE_EVENT_RETENTION), deleting only the older ones.
func TestSweepKeepsEventsForTheRetention(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	org, _, err := db.EnsureOrg(ctx, "o", 1000)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	r := &store.Record{ID: "r1", OrgID: org.ID, Kind: sbx.KindRuntime, Provider: "test", ProviderID: "r1", Phase: sbx.PhaseRunning,
		TemplateID: "base", CPUCount: 1, MemoryMB: 512, CreatedAt: now, Metadata: map[string]string{"n": "0"}}
	r.MarkRunning(now)
	if err := storetest.InsertFixture(ctx, db, r); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Transition(ctx, "r1", "", "", func(r *store.Record) error { r.Metadata["n"] = "1"; return nil }); err != nil { // an updated event
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		evs, err := db.ListEvents(ctx, store.EventFilter{OrgID: org.ID})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	if count() != 1 {
		t.Fatalf("want the updated event, have %d", count())
	}
	sweepAt := func(retention, later time.Duration) {
		New(Config{DB: db, Retention: retention, Now: func() time.Time { return time.Now().Add(later) }}).Sweep(ctx)
	}
	if New(Config{DB: db}).cfg.Retention != 7*24*time.Hour {
		t.Fatalf("default retention %s", New(Config{DB: db}).cfg.Retention)
	}
	sweepAt(0, 6*24*time.Hour) // the default, six days on
	if count() != 1 {
		t.Fatal("a six-day-old event went under the default retention of 7 days")
	}
	sweepAt(10*24*time.Hour, 8*24*time.Hour) // configured to 10 days, eight days on
	if count() != 1 {
		t.Fatal("an eight-day-old event went under a retention of 10 days")
	}
	sweepAt(0, 8*24*time.Hour) // the default, eight days on
	if count() != 0 {
		t.Fatal("an eight-day-old event stayed under the default retention of 7 days")
	}
}
