package reconciler

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
)

// TTLs are enforced at their endAt, not at the next periodic sweep: with an
// hour between sweeps, 30 sandboxes whose TTLs pass within a second are all
// stopped (cause ttl, once each, billed up to their endAt) within seconds,
// and one with an hour left keeps running.
func TestTTLStopDecidedAtEndAtNotAnIntervalLater(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	org, _, err := db.EnsureOrg(ctx, "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	fake := computetest.New()
	now := time.Now().UTC()
	insert := func(tx *sql.Tx, id string, endAt time.Time) error {
		ref := fake.Put(id, compute.StatusRunning)
		r := &store.Record{ID: id, OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: ref.Provider, ProviderID: ref.ID,
			Phase: sandbox.PhaseRunning, TemplateID: "base", CreatedAt: now, EndAt: endAt}
		r.MarkRunning(now)
		return storetest.InsertFixtureTx(ctx, tx, r)
	}
	const n = 30
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		for i := range n {
			if err := insert(tx, fmt.Sprintf("exp%02d", i), now.Add(time.Second+time.Duration(i)*30*time.Millisecond)); err != nil {
				return err
			}
		}
		return insert(tx, "long", now.Add(time.Hour))
	}); err != nil {
		t.Fatal(err)
	}
	if next, err := db.NextExpiry(ctx, now); err != nil || !next.Equal(now.Add(time.Second)) {
		t.Fatalf("NextExpiry = %v, %v; want %v", next, err, now.Add(time.Second))
	}

	rc := New(Config{DB: db, Provider: fake, Interval: time.Hour, ObserveEvery: time.Hour})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rc.Run(rctx) }()
	defer func() { cancel(); <-done }()

	deadline := time.Now().Add(20 * time.Second)
	for i := range n {
		id := fmt.Sprintf("exp%02d", i)
		for {
			r, err := db.GetRecord(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			stops := 0
			for _, e := range r.Timeline {
				if e.Phase == string(sandbox.PhaseStopping) {
					stops++
					if e.Cause != sandbox.CauseTTL {
						t.Fatalf("%s stopped with cause %q", id, e.Cause)
					}
				}
			}
			if stops > 1 {
				t.Fatalf("%s stopped %d times", id, stops)
			}
			if stops == 1 {
				if r.KillReason != sandbox.KillTimeout || r.RuntimeAt(time.Now()) > r.EndAt.Sub(now) {
					t.Fatalf("%s: kill reason %q, runtime %v past its endAt", id, r.KillReason, r.RuntimeAt(time.Now()))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s (endAt %v) not stopped by %v with an hour between sweeps", id, r.EndAt, deadline)
			}
			time.Sleep(10 * time.Millisecond) // poll interval, bounded by the deadline
		}
	}
	if r, err := db.GetRecord(ctx, "long"); err != nil || r.Phase != sandbox.PhaseRunning {
		t.Fatalf("the record with an hour left: %v %v", r, err)
	}
}
