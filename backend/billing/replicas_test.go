package billing

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Issue 11, test 3: 200 sandboxes settle through three billing services
// (each with its own connection pool and record cache on one database, as
// three replicas have) against a balance that runs out part-way, while the
// clock moves on. Readers poll consistent snapshots meanwhile: the balance
// is never below zero and balance + billed is constant. At the end every
// credit that left the balance is on exactly one record, no record was
// charged more than its running time costs (no time billed twice), and each
// record was killed once, for lack of credits.
func TestThreeSettlersOneBalance(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		const n, replicas = 200, 3
		// 200 records × 1 micro-credit per ms (milliRate, 1 CPU) drain it
		// after ~6.2 s of running time: part-way through the 10 s below.
		const initial = 1_234_567
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		ctx := context.Background()

		var dbs []*store.DB
		var svcs []*Service
		var killsMu sync.Mutex
		kills := map[string]int{} // record -> kills reported by any service
		for range replicas {
			db := openDB(t, url)
			defer db.Close()
			s, err := New(ctx, Config{DB: db, Logger: quiet, Now: c.Now, Rates: &milliRate, ChunkSize: 64,
				Killed: func(r *store.Record) { killsMu.Lock(); kills[r.ID]++; killsMu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			dbs, svcs = append(dbs, db), append(svcs, s)
		}
		db := dbs[0]
		org := ensureOrg(t, db, "shared", initial)
		for i := range n {
			// Known start times, staggered by a millisecond each.
			insertRunning(t, db, org, fmt.Sprintf("r%03d", i), t0.Add(time.Duration(i)*time.Millisecond), sandbox.KindRuntime)
		}

		// Readers: every snapshot keeps balance ≥ 0 and balance + billed = initial.
		stop := make(chan struct{})
		var bg sync.WaitGroup
		var snapshots atomic.Int64
		var bad atomic.Value
		for r := range replicas {
			bg.Add(1)
			go func() {
				defer bg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := checkSnapshot(ctx, dbs[r], org, initial); err != nil {
						bad.Store(err)
						return
					}
					snapshots.Add(1)
				}
			}()
		}
		// Settlers: each replica runs full passes, and settles single
		// records as its OnChange path does, all at the same time.
		errs := make(chan error, 64)
		for r, s := range svcs {
			bg.Add(1)
			go func() {
				defer bg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.SettleAll(ctx); err != nil {
						errs <- fmt.Errorf("replica %d pass: %w", r, err)
						return
					}
					if err := s.Settle(ctx, fmt.Sprintf("r%03d", (i*37+r*71)%n)); err != nil {
						errs <- fmt.Errorf("replica %d settle: %w", r, err)
						return
					}
				}
			}()
		}
		// The clock: 10 s in steps of 250 ms, each step after some passes.
		for range 40 {
			before := snapshots.Load()
			pollUntil(t, 30*time.Second, func() bool { return snapshots.Load() >= before+3 })
			c.Advance(250 * time.Millisecond)
		}
		// Every record ends stopping (killed at the moment the balance ran out).
		pollUntil(t, 60*time.Second, func() bool {
			recs, err := db.ListRecords(ctx, store.RecordFilter{OrgID: org, Phases: []sandbox.Phase{sandbox.PhaseStopping}, Limit: n + 1})
			return err == nil && len(recs) == n
		})
		close(stop)
		bg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if err, _ := bad.Load().(error); err != nil {
			t.Fatal(err)
		}
		// One more pass on each replica moves nothing.
		for _, s := range svcs {
			if res, err := s.SettleAll(ctx); err != nil || res.Micro != 0 || res.Killed != 0 {
				t.Fatalf("a pass after the end: %+v %v", res, err)
			}
		}

		if bal := balance(t, db, org); bal != 0 {
			t.Fatalf("balance %d, want 0 (it ran out)", bal)
		}
		recs, err := db.ListRecords(ctx, store.RecordFilter{OrgID: org, Limit: n + 1})
		if err != nil || len(recs) != n {
			t.Fatalf("records: %d %v", len(recs), err)
		}
		// Billed figures as the database holds them: another replica's
		// charge leaves this one's cached copies alone (the views read them
		// the same way).
		if recs, err = db.WithBilled(ctx, recs...); err != nil {
			t.Fatal(err)
		}
		var sum int64
		var killedAt time.Time
		for _, r := range recs {
			sum += r.BilledMicro
			// 1 micro-credit per ms: the credits on a record never exceed
			// what its billed running time costs (time billed twice would).
			if r.BilledMicro > r.BilledNs/int64(time.Millisecond) {
				t.Fatalf("record %s: %d micro-credits for %v of running time", r.ID, r.BilledMicro, time.Duration(r.BilledNs))
			}
			if r.RuntimeNs != r.BilledNs || r.BilledNs > int64(10*time.Second) {
				t.Fatalf("record %s: runtime %v, billed %v (the stop closes its period)", r.ID, time.Duration(r.RuntimeNs), time.Duration(r.BilledNs))
			}
			if r.Phase != sandbox.PhaseStopping || r.KillReason != sandbox.KillInsufficientCredits {
				t.Fatalf("record %s: %s %q, want stopping for lack of credits", r.ID, r.Phase, r.KillReason)
			}
			stops := 0
			for _, e := range r.Timeline {
				if e.Phase == string(sandbox.PhaseStopping) {
					stops++
					if e.Cause != sandbox.CauseCredits {
						t.Fatalf("record %s stopped with cause %q", r.ID, e.Cause)
					}
				}
			}
			if stops != 1 || kills[r.ID] != 1 {
				t.Fatalf("record %s: %d stops in its timeline, %d kills reported; want one", r.ID, stops, kills[r.ID])
			}
			if killedAt.IsZero() {
				killedAt = r.KilledAt
			}
			if !r.KilledAt.Equal(killedAt) {
				t.Fatalf("record %s killed at %v, another at %v: one kill of the org", r.ID, r.KilledAt, killedAt)
			}
		}
		if sum != initial {
			t.Fatalf("billed %d in all, the balance dropped by %d", sum, initial)
		}
		if snapshots.Load() == 0 {
			t.Fatal("no snapshot was read")
		}
	})
}

// checkSnapshot reads an org's balance and the sum billed to its records
// in one consistent read: the balance is never below zero and balance +
// billed is what was granted.
func checkSnapshot(ctx context.Context, db *store.DB, org string, granted int64) error {
	tx, err := db.Reader().BeginTx(ctx, snapshotTx(db))
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var bal, sum int64
	if err := tx.QueryRow(`SELECT credits_micro FROM orgs WHERE id = ?`, org).Scan(&bal); err != nil {
		return err
	}
	if err := tx.QueryRow(`SELECT CAST(COALESCE(SUM(billed_micro), 0) AS BIGINT) FROM accruals WHERE org_id = ?`, org).Scan(&sum); err != nil {
		return err
	}
	switch {
	case bal < 0:
		return fmt.Errorf("balance went below zero: %d", bal)
	case bal+sum != granted:
		return fmt.Errorf("snapshot not atomic: balance %d + billed %d != %d", bal, sum, granted)
	}
	return nil
}

// pollUntil polls cond until it holds or timeout passes.
func pollUntil(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", timeout)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, bounded by the deadline
	}
}
