package store

import (
	"context"
	"errors"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// A phase change made inside mutate, with no target phase named (or another
// one), escapes the table and leaves no timeline entry: the gate refuses it
// and writes nothing, neither the phase nor the fields mutate changed.
func TestGateRefusesPhaseChangeInsideMutate(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		newRecord(t, db, "r1") // pending
		for _, to := range []sandbox.Phase{"", sandbox.PhaseCreating} {
			cur, err := db.Transition(ctx, "r1", to, sandbox.CauseReconciler, func(r *Record) error {
				r.Diagnostic = "smuggled"
				r.Phase = sandbox.PhaseRunning
				return nil
			})
			if !errors.Is(err, ErrPhaseChangeInUpdate) {
				t.Fatalf("to %q: a phase changed inside mutate: want ErrPhaseChangeInUpdate, got %v", to, err)
			}
			if cur == nil || cur.Phase != sandbox.PhasePending {
				t.Fatalf("to %q: the refused update's record says %+v, want the stored phase pending", to, cur)
			}
			got, err := db.GetRecord(ctx, "r1")
			if err != nil {
				t.Fatal(err)
			}
			if got.Phase != sandbox.PhasePending || got.Diagnostic != "" || got.Version != 1 || len(got.Timeline) != 1 {
				t.Fatalf("to %q: the refused update wrote: %+v", to, got)
			}
		}
	})
}

// A record starts in a start phase: an insert at running is refused and
// stores nothing; queued and pending are accepted.
func TestGateRefusesInsertOutsideStartPhases(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, _, err := db.EnsureOrg(ctx, "o1", 0)
		if err != nil {
			t.Fatal(err)
		}
		rec := func(id string, p sandbox.Phase) *Record {
			return &Record{ID: id, OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: p, TemplateID: "base"}
		}
		for _, p := range []sandbox.Phase{sandbox.PhaseRunning, sandbox.PhaseDeleted, ""} {
			if err := db.InsertRecord(ctx, rec("bad", p)); !errors.Is(err, ErrNotStartPhase) {
				t.Fatalf("insert at %q: want ErrNotStartPhase, got %v", p, err)
			}
			if _, err := db.GetRecord(ctx, "bad"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("insert at %q was refused but a record exists: %v", p, err)
			}
		}
		for _, p := range sandbox.StartPhases {
			if err := db.InsertRecord(ctx, rec("ok-"+string(p), p)); err != nil {
				t.Fatalf("insert at start phase %s: %v", p, err)
			}
		}
		// The fixture path, for tests and benchmarks, stores history as is.
		if err := db.InsertFixture(ctx, rec("fixture", sandbox.PhaseRunning)); err != nil {
			t.Fatal(err)
		}
		if got, err := db.GetRecord(ctx, "fixture"); err != nil || got.Phase != sandbox.PhaseRunning {
			t.Fatalf("fixture at running: %+v, %v", got, err)
		}
	})
}
