package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

func eventTypes(t *testing.T, db *DB, f EventFilter) []*Event {
	t.Helper()
	evs, err := db.ListEvents(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func moveAll(t *testing.T, db *DB, id string, steps ...any) {
	t.Helper()
	for i := 0; i < len(steps); i += 2 {
		to, cause := steps[i].(sandbox.Phase), steps[i+1].(sandbox.Cause)
		if _, err := db.Transition(context.Background(), id, to, cause, func(r *Record) error {
			now := time.Now()
			switch to {
			case sandbox.PhaseRunning:
				r.MarkRunning(now)
			case sandbox.PhasePaused, sandbox.PhaseStopping:
				r.MarkStopped(now)
			case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhasePausing, sandbox.PhaseResuming, sandbox.PhaseDeleted, sandbox.PhaseCompleted, sandbox.PhaseFailed:
				// as below the switch; named so that a value added to the enum is decided here
			}
			if to == sandbox.PhaseStopping && cause == sandbox.CauseTTL {
				r.KillReason = sandbox.KillTimeout
			}
			return nil
		}); err != nil {
			t.Fatalf("%s → %s: %v", id, to, err)
		}
	}
}

// The gate writes exactly the events of the phase → event table, in order,
// with the cause that decided an end (not the reconciler finishing it), and
// the execution on paused and killed.
func TestTransitionsWriteEvents(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		moveAll(t, db, "r1",
			sandbox.PhaseCreating, sandbox.CauseReconciler,
			sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhasePausing, sandbox.CauseUser,
			sandbox.PhasePaused, sandbox.CauseReconciler,
			sandbox.PhaseResuming, sandbox.CauseUser,
			sandbox.PhasePaused, sandbox.CauseProvider, // resume refused: no event
			sandbox.PhaseResuming, sandbox.CauseUser,
			sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhasePausing, sandbox.CauseUser,
			sandbox.PhaseRunning, sandbox.CauseProvider, // pause refused: no event
		)
		// A field-only update of the timeout is "updated"; one of
		// bookkeeping is nothing.
		if _, err := db.Transition(ctx, "r1", "", "", func(r *Record) error { r.EndAt = r.EndAt.Add(time.Hour); return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Transition(ctx, "r1", "", "", func(r *Record) error { r.Diagnostic = "x"; return nil }); err != nil {
			t.Fatal(err)
		}
		moveAll(t, db, "r1", sandbox.PhaseStopping, sandbox.CauseTTL, sandbox.PhaseDeleted, sandbox.CauseReconciler)

		evs := eventTypes(t, db, EventFilter{OrgID: rec.OrgID, SandboxID: "r1"})
		want := []string{"created", "paused", "resumed", "updated", "killed"}
		if len(evs) != len(want) {
			t.Fatalf("events %v, want %v", typesOf(evs), want)
		}
		for i, e := range evs {
			if e.Type != "sandbox.lifecycle."+want[i] || e.SandboxID != "r1" || e.TemplateID != "base" || e.Metadata["purpose"] != "test" ||
				e.Data.SandboxMetadata["purpose"] != "test" || len(e.ID) != 36 || (i > 0 && e.Seq <= evs[i-1].Seq) {
				t.Errorf("event %d = %+v, want type %s", i, e, want[i])
			}
		}
		if evs[1].Data.Execution == nil || evs[1].Data.Execution.StartedAt.IsZero() || evs[1].Cause != sandbox.CauseReconciler {
			t.Errorf("paused carries the execution: %+v", evs[1])
		}
		if k := evs[4]; k.Cause != sandbox.CauseTTL || k.Data.Execution == nil || k.Data.KillReason != sandbox.KillTimeout {
			t.Errorf("killed carries the TTL cause, the kill reason and the execution: %+v %+v", k, k.Data.Execution)
		}
		if evs[3].Data.EndAt == nil {
			t.Errorf("updated carries the new end: %+v", evs[3].Data)
		}
		// Filters: type, cursor, other orgs.
		if got := eventTypes(t, db, EventFilter{OrgID: rec.OrgID, Types: []string{"sandbox.lifecycle.killed"}}); len(got) != 1 || got[0].ID != evs[4].ID {
			t.Errorf("type filter: %v", typesOf(got))
		}
		if got := eventTypes(t, db, EventFilter{OrgID: rec.OrgID, AfterSeq: evs[2].Seq, Limit: 1}); len(got) != 1 || got[0].ID != evs[3].ID {
			t.Errorf("cursor: %v", typesOf(got))
		}
		if got := eventTypes(t, db, EventFilter{OrgID: "another"}); len(got) != 0 {
			t.Errorf("another org sees %v", typesOf(got))
		}
		if _, err := db.EventSeq(ctx, "another", evs[0].ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("another org resolves an event id: %v", err)
		}
	})
}

// The outbox: a transition rolled back leaves no event, and a failed event
// write rolls the transition back.
func TestEventsShareTheTransitionsTransaction(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler)
		boom := errors.New("boom")
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := TransitionTx(ctx, tx, "r1", sandbox.PhaseRunning, sandbox.CauseReconciler, nil); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if evs := eventTypes(t, db, EventFilter{OrgID: rec.OrgID}); len(evs) != 0 {
			t.Fatalf("a rolled-back transition left events %v", typesOf(evs))
		}
		// A refused event insert must take the move down with it.
		refuseEvents(t, db)
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseRunning, sandbox.CauseReconciler, nil); err == nil {
			t.Fatal("the move succeeded although its event could not be written")
		}
		db.ForgetRecord("r1")
		if r, _ := db.GetRecord(ctx, "r1"); r.Phase != sandbox.PhaseCreating {
			t.Fatalf("the move was kept without its event: %s", r.Phase)
		}
	})
}

// refuseEvents makes every insert into events fail.
func refuseEvents(t *testing.T, db *DB) {
	t.Helper()
	stmts := []string{`CREATE TRIGGER events_refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'refused'); END`}
	if db.dialect == Postgres {
		stmts = []string{
			`CREATE FUNCTION events_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
			`CREATE TRIGGER events_refuse BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION events_refuse()`,
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEventRetention(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler)
		n, err := db.DeleteEventsBefore(ctx, time.Now().Add(-time.Hour))
		if err != nil || n != 0 {
			t.Fatalf("deleted %d recent events (%v)", n, err)
		}
		if n, err = db.DeleteEventsBefore(ctx, time.Now().Add(time.Second)); err != nil || n != 1 {
			t.Fatalf("deleted %d of 1 old event (%v)", n, err)
		}
		if evs := eventTypes(t, db, EventFilter{OrgID: rec.OrgID}); len(evs) != 0 {
			t.Fatalf("left %v", typesOf(evs))
		}
	})
}

func typesOf(evs []*Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// A kill for credits carries its cause; a task environment's record
// produces environment.lifecycle.* events naming its environment.
func TestCreditsKillAndEnvironmentEvents(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		rec := newRecord(t, db, "r1")
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhaseStopping, sandbox.CauseCredits, sandbox.PhaseDeleted, sandbox.CauseReconciler)
		env := &Record{ID: "t1", OrgID: rec.OrgID, Kind: sandbox.KindTask, Provider: "docker", Phase: sandbox.PhasePending,
			TemplateID: "task@1", EnvironmentID: "env-1"}
		if err := db.InsertRecord(ctx, env); err != nil {
			t.Fatal(err)
		}
		// A task record moves like any other: through creating, and its end
		// through stopping (the killed event names the cause that decided it).
		moveAll(t, db, "t1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhaseStopping, sandbox.CauseUser, sandbox.PhaseDeleted, sandbox.CauseReconciler)
		evs := eventTypes(t, db, EventFilter{OrgID: rec.OrgID})
		got := make([]string, len(evs))
		for i, e := range evs {
			got[i] = e.Type + "/" + string(e.Cause)
		}
		want := []string{"sandbox.lifecycle.created/reconciler", "sandbox.lifecycle.killed/credits",
			"environment.lifecycle.created/reconciler", "environment.lifecycle.killed/user"}
		if len(got) != len(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events %v, want %v", got, want)
			}
		}
		if evs[3].Data.EnvironmentID != "env-1" {
			t.Errorf("environment event without its environment: %+v", evs[3].Data)
		}
	})
}

// Paging by cursor both ways: oldest first the events after the cursor's
// seq, newest first those before it, on both databases.
func TestListEventsCursorBothWays(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		rec := newRecord(t, db, "r1")
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhasePausing, sandbox.CauseUser, sandbox.PhasePaused, sandbox.CauseReconciler,
			sandbox.PhaseStopping, sandbox.CauseUser, sandbox.PhaseDeleted, sandbox.CauseReconciler)
		all := eventTypes(t, db, EventFilter{OrgID: rec.OrgID})
		if len(all) != 3 {
			t.Fatalf("%d events, want 3", len(all))
		}
		mid := all[1].Seq
		for _, c := range []struct {
			f    EventFilter
			want []string
		}{
			{EventFilter{OrgID: rec.OrgID, AfterSeq: mid}, []string{"sandbox.lifecycle.killed"}},
			{EventFilter{OrgID: rec.OrgID, AfterSeq: mid, Desc: true}, []string{"sandbox.lifecycle.created"}},
			{EventFilter{OrgID: rec.OrgID, Desc: true, Limit: 2}, []string{"sandbox.lifecycle.killed", "sandbox.lifecycle.paused"}},
		} {
			if got := typesOf(eventTypes(t, db, c.f)); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%+v: %v, want %v", c.f, got, c.want)
			}
		}
	})
}

// E2B's paging: newest first, offset and limit, on both databases.
func TestListEventsNewestFirstWithOffset(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		rec := newRecord(t, db, "r1")
		moveAll(t, db, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, sandbox.PhaseRunning, sandbox.CauseReconciler,
			sandbox.PhasePausing, sandbox.CauseUser, sandbox.PhasePaused, sandbox.CauseReconciler,
			sandbox.PhaseStopping, sandbox.CauseUser, sandbox.PhaseDeleted, sandbox.CauseReconciler)
		for _, c := range []struct {
			f    EventFilter
			want []string
		}{
			{EventFilter{OrgID: rec.OrgID}, []string{"sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.killed"}},
			{EventFilter{OrgID: rec.OrgID, Desc: true}, []string{"sandbox.lifecycle.killed", "sandbox.lifecycle.paused", "sandbox.lifecycle.created"}},
			{EventFilter{OrgID: rec.OrgID, Desc: true, Limit: 1, Offset: 1}, []string{"sandbox.lifecycle.paused"}},
			{EventFilter{OrgID: rec.OrgID, Limit: 2, Offset: 1}, []string{"sandbox.lifecycle.paused", "sandbox.lifecycle.killed"}},
			{EventFilter{OrgID: rec.OrgID, Limit: 5, Offset: 3}, []string{}},
		} {
			if got := typesOf(eventTypes(t, db, c.f)); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("%+v: %v, want %v", c.f, got, c.want)
			}
		}
	})
}
