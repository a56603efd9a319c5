package store

import (
	"context"
	"errors"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

// The gate refuses a move the table does not allow, leaving the record as it
// is, and records the cause of a legal one on its timeline entry.
func TestTransitionGate(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		newRecord(t, db, "r1") // pending

		mutated := false
		cur, err := db.Transition(ctx, "r1", sandbox.PhasePaused, sandbox.CauseUser, func(r *Record) error { mutated = true; return nil })
		var ill *IllegalTransitionError
		if !errors.As(err, &ill) || !errors.Is(err, ErrIllegalTransition) || !errors.Is(err, ErrConflict) {
			t.Fatalf("pending → paused: want an illegal transition that is also a conflict, got %v", err)
		}
		if ill.From != sandbox.PhasePending || ill.To != sandbox.PhasePaused || mutated || cur == nil || cur.Phase != sandbox.PhasePending {
			t.Fatalf("refused move: %+v, mutated %v, current %+v", ill, mutated, cur)
		}
		if r, _ := db.GetRecord(ctx, "r1"); r.Phase != sandbox.PhasePending || len(r.Timeline) != 1 || r.Version != 1 {
			t.Fatalf("a refused move changed the record: %+v", r)
		}
		if _, err := db.Transition(ctx, "r1", sandbox.PhasePending, sandbox.CauseUser, nil); !errors.Is(err, ErrIllegalTransition) {
			t.Fatalf("staying in a phase is not a move: %v", err)
		}
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, "", nil); err == nil || errors.Is(err, ErrConflict) {
			t.Fatalf("a move without a cause must be refused as a bug, got %v", err)
		}

		if _, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, nil); err != nil {
			t.Fatal(err)
		}
		r, err := db.Transition(ctx, "r1", sandbox.PhaseStopping, sandbox.CauseCredits, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := db.GetRecord(ctx, "r1")
		want := []TimelineEntry{{Phase: "pending"}, {Phase: "creating", Cause: sandbox.CauseReconciler}, {Phase: "stopping", Cause: sandbox.CauseCredits}}
		if len(got.Timeline) != len(want) || r.Version != got.Version {
			t.Fatalf("timeline %+v", got.Timeline)
		}
		for i, e := range got.Timeline {
			if e.Phase != want[i].Phase || e.Cause != want[i].Cause || e.At.IsZero() {
				t.Errorf("timeline[%d] = %+v, want phase %s cause %q", i, e, want[i].Phase, want[i].Cause)
			}
		}

		// A field-only update works in any phase and adds no entry; Expect
		// refuses one whose observed phase is gone.
		if _, err := db.Transition(ctx, "r1", "", "", func(r *Record) error { r.Diagnostic = "x"; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Transition(ctx, "r1", "", "", Expect(sandbox.PhaseRunning, func(r *Record) error { r.Diagnostic = "y"; return nil })); !errors.Is(err, ErrConflict) {
			t.Fatalf("Expect on a stale phase: %v", err)
		}
		if got, _ := db.GetRecord(ctx, "r1"); got.Diagnostic != "x" || len(got.Timeline) != 3 {
			t.Fatalf("field updates: %+v", got)
		}
	})
}
