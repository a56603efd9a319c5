package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// Migration 00010 moves billed figures from sandboxes to accruals and its
// Down moves them back: a database migrated either way keeps what every
// record was billed and the state the charge arithmetic reads.
func TestAccrualsMigrationKeepsBilledFigures(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, _, err := db.EnsureOrg(ctx, "o1", 0)
		if err != nil {
			t.Fatal(err)
		}
		since := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		r := &Record{ID: "billed", OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhaseRunning,
			TemplateID: "base", CPUCount: 2, MemoryMB: 1024, RuntimeNs: 7e9, BilledNs: 5e9, BilledMicro: 1234}
		r.RunningSince = since
		if err := db.InsertFixture(ctx, r); err != nil {
			t.Fatal(err)
		}
		p := newProvider(t, db.w, db.dialect)
		if _, err := p.DownTo(ctx, 9); err != nil {
			t.Fatal(err)
		}
		var micro, ns int64
		if err := db.w.QueryRowContext(ctx, `SELECT billed_micro, billed_ns FROM sandboxes WHERE id = 'billed'`).Scan(&micro, &ns); err != nil || micro != 1234 || ns != 5e9 {
			t.Fatalf("after Down: billed %d micro for %d ns (%v), want 1234 for 5e9", micro, ns, err)
		}
		if err := MigrateSchema(ctx, db.w, db.dialect); err != nil {
			t.Fatal(err)
		}
		got, err := db.BillingRowsOf(ctx, "billed")
		if err != nil {
			t.Fatal(err)
		}
		if got.BilledMicro != 1234 || got.BilledNs != 5e9 || got.RuntimeNs != 7e9 || !got.RunningSince.Equal(since) ||
			got.CPUCount != 2 || got.MemoryMB != 1024 || got.OrgID != org.ID {
			t.Fatalf("after Up again: %+v", got)
		}
	})
}

// Only settlement moves billed figures: a transition that changes them is
// refused, and one that changes the run state updates the accruals row.
func TestTransitionMirrorsAccruals(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		newRecord(t, db, "r1")
		_, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, func(r *Record) error {
			r.BilledMicro = 5
			return nil
		})
		if !errors.Is(err, ErrBilledBySettlement) {
			t.Fatalf("a transition that bills: %v, want ErrBilledBySettlement", err)
		}
		at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, func(r *Record) error {
			r.MarkRunning(at)
			r.CPUCount = 3
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := db.BillingRowsOf(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if !got.RunningSince.Equal(at) || got.CPUCount != 3 || got.Version != 2 {
			t.Fatalf("accruals row after the move: %+v, want running since %s, 3 CPUs, version 2", got, at)
		}
	})
}
