package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

func openTest(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newRecord(t *testing.T, db *DB, id string) *Record {
	t.Helper()
	ctx := context.Background()
	org, _, err := db.EnsureOrg(ctx, "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: id, OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhasePending, TemplateID: "base",
		Metadata: map[string]string{"purpose": "test"}, EndAt: time.Now().Add(time.Minute)}
	if err := db.InsertRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecordRoundTripAndTransition(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		newRecord(t, db, "r1")
		got, err := db.GetRecord(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Phase != sandbox.PhasePending || got.Metadata["purpose"] != "test" || len(got.Timeline) != 1 {
			t.Fatalf("round trip lost fields: %+v", got)
		}
		if _, err := db.GetOrgRecord(ctx, "other", "r1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("other org must not see the record, got %v", err)
		}
		now := time.Now().UTC()
		// Every kind runs through creating and ends through stopping
		// (sandbox.AllowedTransitions).
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, nil); err != nil {
			t.Fatal(err)
		}
		r, err := db.Transition(ctx, "r1", sandbox.PhaseRunning, sandbox.CauseReconciler, func(r *Record) error { r.MarkRunning(now); return nil })
		if err != nil || r.Phase != sandbox.PhaseRunning || len(r.Timeline) != 3 || r.Sessions != 1 {
			t.Fatalf("transition: %v %+v", err, r)
		}
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, Expect(sandbox.PhasePending, nil)); !errors.Is(err, ErrConflict) {
			t.Fatalf("transition from a stale phase must conflict, got %v", err)
		}
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseStopping, sandbox.CauseUser, nil); err != nil {
			t.Fatal(err)
		}
		r, err = db.Transition(ctx, "r1", sandbox.PhaseDeleted, sandbox.CauseUser, func(r *Record) error { r.MarkKilled(now.Add(2*time.Second), sandbox.KillDeleted); return nil })
		if err != nil || r.RuntimeNs != int64(2*time.Second) || r.KillReason != sandbox.KillDeleted || !r.RunningSince.IsZero() {
			t.Fatalf("kill: %v %+v", err, r)
		}
	})
}

// Racing transitions from the same phase: exactly one wins.
func TestTransitionRace(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		newRecord(t, db, "r1")
		var wg sync.WaitGroup
		wins := make(chan sandbox.Phase, 2)
		for _, to := range []sandbox.Phase{sandbox.PhaseStopping, sandbox.PhaseCreating} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := db.Transition(ctx, "r1", to, sandbox.CauseUser, Expect(sandbox.PhasePending, nil)); err == nil {
					wins <- to
				}
			}()
		}
		wg.Wait()
		close(wins)
		if n := len(wins); n != 1 {
			t.Fatalf("want exactly one winner, got %d", n)
		}
	})
}

func TestListFiltersAndCursor(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c"} {
			newRecord(t, db, id)
		}
		org, _ := db.OrgByName(ctx, "o1")
		page, err := db.ListRecords(ctx, RecordFilter{OrgID: org.ID, Limit: 2, Metadata: map[string]string{"purpose": "test"}})
		if err != nil || len(page) != 2 {
			t.Fatalf("page 1: %v %d", err, len(page))
		}
		rest, err := db.ListRecords(ctx, RecordFilter{OrgID: org.ID, AfterSeq: page[1].Seq})
		if err != nil || len(rest) != 1 || rest[0].ID != "c" {
			t.Fatalf("page 2: %v %+v", err, rest)
		}
		none, _ := db.ListRecords(ctx, RecordFilter{OrgID: org.ID, Metadata: map[string]string{"purpose": "x"}})
		if len(none) != 0 {
			t.Fatalf("metadata filter ignored")
		}
		due, err := db.DueRecords(ctx, time.Now())
		if err != nil || len(due) != 3 {
			t.Fatalf("pending records are due: %v %v", err, due)
		}
	})
}

// The record cache shows committed writes at once and never rolled-back ones.
func TestCacheFollowsCommits(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		newRecord(t, db, "r1")
		if _, err := db.GetRecord(ctx, "r1"); err != nil { // warm the cache
			t.Fatal(err)
		}
		boom := errors.New("boom")
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			if _, err := TransitionTx(ctx, tx, "r1", sandbox.PhaseStopping, sandbox.CauseReconciler, nil); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
		if r, _ := db.GetRecord(ctx, "r1"); r.Phase != sandbox.PhasePending {
			t.Fatalf("a rolled-back transition is visible: %s", r.Phase)
		}
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, nil); err != nil {
			t.Fatal(err)
		}
		if r, _ := db.GetRecord(ctx, "r1"); r.Phase != sandbox.PhaseCreating {
			t.Fatalf("a committed transition is not visible: %s", r.Phase)
		}
		// A stale copy cannot replace a newer one.
		old, _ := scanRecord(db.r.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE s.id = ?`, "r1"))
		old.Version--
		old.Phase = sandbox.PhasePending
		db.cache.put(old)
		if r, _ := db.GetRecord(ctx, "r1"); r.Phase != sandbox.PhaseCreating {
			t.Fatalf("a stale copy replaced the cached record")
		}
	})
}
