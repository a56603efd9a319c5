package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
)

func insertLeaseRecord(t *testing.T, db *DB, id string) {
	t.Helper()
	ctx := context.Background()
	org, _, err := db.EnsureOrg(ctx, "o-"+id, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Record{ID: id, OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "fake", Phase: sandbox.PhasePending, TemplateID: "base"}
	if err := db.InsertRecord(ctx, r); err != nil {
		t.Fatal(err)
	}
}

func claim(t *testing.T, db *DB, id, owner string, ttl time.Duration) (Fence, bool) {
	t.Helper()
	f, ok, err := db.ClaimLease(context.Background(), id, owner, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return f, ok
}

// claimWhenExpired polls until record id's lease has expired on the clock that
// judges it (another owner's claim succeeds), then returns that claim.
func claimWhenExpired(t *testing.T, db *DB, id, owner string, ttl time.Duration) Fence {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if f, ok := claim(t, db, id, owner, ttl); ok {
			return f
		}
	}
	t.Fatalf("%s never got the expired lease on %s", owner, id)
	return Fence{}
}

func TestLeaseClaimRenewRelease(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		insertLeaseRecord(t, db, "r1")
		a, ok := claim(t, db, "r1", "A", time.Minute)
		if !ok || a.Epoch != 1 || a.Owner != "A" || a.ID != "r1" {
			t.Fatalf("first claim = %+v, %v; want A at epoch 1", a, ok)
		}
		if _, ok := claim(t, db, "r1", "B", time.Minute); ok {
			t.Fatal("B claimed a lease A holds")
		}
		// Re-entrant: the holder's claim keeps the epoch (nobody acted between).
		if again, ok := claim(t, db, "r1", "A", time.Minute); !ok || again != a {
			t.Fatalf("A's second claim = %+v, %v; want %+v", again, ok, a)
		}
		// A claim does not touch the record's version (no spurious conflicts).
		if r, err := db.GetRecord(ctx, "r1"); err != nil || r.Version != 1 {
			t.Fatalf("record after claims: version %v (%v), want 1", r.Version, err)
		}
		if _, ok := claim(t, db, "missing", "A", time.Minute); ok {
			t.Fatal("claimed a record that does not exist")
		}

		before := leaseExpiry(t, db, "r1")
		if n, err := db.RenewLeases(ctx, "A", []string{"r1", "missing"}, 2*time.Minute); err != nil || n != 1 {
			t.Fatalf("renew = %d, %v; want 1", n, err)
		}
		if after := leaseExpiry(t, db, "r1"); !after.After(before) {
			t.Fatalf("renewal did not move the expiry: %v then %v", before, after)
		}
		if n, _ := db.RenewLeases(ctx, "B", []string{"r1"}, time.Minute); n != 0 {
			t.Fatalf("B renewed %d leases it does not hold", n)
		}

		// A stale release (wrong epoch) does nothing; the right one frees it.
		if err := db.ReleaseLease(ctx, Fence{ID: "r1", Owner: "A", Epoch: 7}); err != nil {
			t.Fatal(err)
		}
		if _, ok := claim(t, db, "r1", "B", time.Minute); ok {
			t.Fatal("a release with another epoch freed the lease")
		}
		if err := db.ReleaseLease(ctx, a); err != nil {
			t.Fatal(err)
		}
		if owner, epoch, _, _ := db.LeaseOf(ctx, "r1"); owner != "" || epoch != 1 {
			t.Fatalf("after release: owner %q epoch %d; want none, epoch kept at 1", owner, epoch)
		}
		b, ok := claim(t, db, "r1", "B", time.Minute)
		if !ok || b.Epoch != 2 {
			t.Fatalf("B's claim after release = %+v, %v; want epoch 2", b, ok)
		}
	})
}

func TestLeaseExpiresAndIsTakenOver(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		insertLeaseRecord(t, db, "r1")
		const ttl = 200 * time.Millisecond
		a, _ := claim(t, db, "r1", "A", ttl)
		b := claimWhenExpired(t, db, "r1", "B", time.Minute)
		if b.Epoch != a.Epoch+1 {
			t.Fatalf("take-over epoch %d, want %d", b.Epoch, a.Epoch+1)
		}
		// The old holder renews nothing and cannot claim it back.
		if n, _ := db.RenewLeases(ctx, "A", []string{"r1"}, time.Minute); n != 0 {
			t.Fatalf("A renewed %d leases after losing them", n)
		}
		if _, ok := claim(t, db, "r1", "A", time.Minute); ok {
			t.Fatal("A claimed back a lease B holds")
		}
		// An expired lease is not renewed even by its owner: it must claim
		// again, as a new epoch.
		insertLeaseRecord(t, db, "r2")
		c, _ := claim(t, db, "r2", "A", ttl)
		for end := time.Now().Add(10 * time.Second); !time.Now().After(leaseExpiry(t, db, "r2").Add(20 * time.Millisecond)); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("A's lease on r2 never expired")
			}
		}
		if n, err := db.RenewLeases(ctx, "A", []string{"r2"}, time.Minute); err != nil || n != 0 {
			t.Fatalf("A renewed %d expired leases (%v), want 0", n, err)
		}
		if again, ok := claim(t, db, "r2", "A", time.Minute); !ok || again.Epoch != c.Epoch+1 {
			t.Fatalf("A's claim after its own lease expired = %+v, %v; want epoch %d", again, ok, c.Epoch+1)
		}
	})
}

func TestFencedTransitionAfterTakeOver(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		insertLeaseRecord(t, db, "r1")
		a, _ := claim(t, db, "r1", "A", 150*time.Millisecond)
		actx := WithFence(ctx, a)
		if _, err := db.Transition(actx, "r1", sandbox.PhaseCreating, sandbox.CauseReconciler, nil); err != nil {
			t.Fatalf("A's fenced transition while holding the lease: %v", err)
		}
		b := claimWhenExpired(t, db, "r1", "B", time.Minute)

		before, _ := db.GetRecord(ctx, "r1")
		_, err := db.Transition(actx, "r1", sandbox.PhaseRunning, sandbox.CauseReconciler, func(r *Record) error {
			r.ProviderID = "stale"
			return nil
		})
		if !errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrConflict) {
			t.Fatalf("A's transition after the take-over: %v; want ErrLeaseLost, not a conflict", err)
		}
		after, _ := db.GetRecord(ctx, "r1")
		if after.Version != before.Version || after.Phase != sandbox.PhaseCreating || after.ProviderID != "" {
			t.Fatalf("the stale write changed the record: %+v", after)
		}
		// A field-only update is fenced the same way.
		if _, err := db.Transition(actx, "r1", "", "", func(r *Record) error { r.ProviderID = "stale"; return nil }); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("A's field update after the take-over: %v; want ErrLeaseLost", err)
		}
		// The new holder's writes go through; a version conflict under a
		// valid fence is still a conflict, not a lost lease.
		bctx := WithFence(ctx, b)
		if _, err := db.Transition(bctx, "r1", sandbox.PhaseRunning, sandbox.CauseReconciler, nil); err != nil {
			t.Fatalf("B's fenced transition: %v", err)
		}
		if _, err := db.Transition(bctx, "r1", "", "", Expect(sandbox.PhasePaused, nil)); !errors.Is(err, ErrConflict) || errors.Is(err, ErrLeaseLost) {
			t.Fatalf("B's expectation failing: %v; want ErrConflict", err)
		}
		// A fence for another record does not apply; no fence, no check.
		if _, err := db.Transition(WithFence(ctx, Fence{ID: "other", Owner: "A", Epoch: 1}), "r1", "", "", nil); err != nil {
			t.Fatalf("a fence of another record blocked the write: %v", err)
		}
		if _, err := db.Transition(ctx, "r1", sandbox.PhaseStopping, sandbox.CauseUser, nil); err != nil {
			t.Fatalf("an unfenced (API) transition: %v", err)
		}
	})
}

func leaseExpiry(t *testing.T, db *DB, id string) time.Time {
	t.Helper()
	_, _, exp, err := db.LeaseOf(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// A replica frozen inside a transaction that locked a record's row (as the
// gate does) does not hold the record forever: the server ends its idle
// session (idleInTxTimeout) and another replica's claim of the expired
// lease goes through.
func TestFrozenTransactionDoesNotBlockTakeOver(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	newRecord(t, a, "r1")
	if _, ok, err := a.ClaimLease(ctx, "r1", "replica-a", 50*time.Millisecond); err != nil || !ok {
		t.Fatalf("A's claim: %v %v", ok, err)
	}
	tx, err := a.w.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT id FROM sandboxes WHERE id = $1 FOR UPDATE`, "r1"); err != nil {
		t.Fatal(err)
	}
	// A sends nothing more, as if frozen; its lease runs out.
	time.Sleep(100 * time.Millisecond) // past A's 50ms lease
	t0 := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	f, ok, err := b.ClaimLease(cctx, "r1", "replica-b", time.Minute)
	if err != nil || !ok {
		t.Fatalf("B's claim of the lease A let run out, behind A's open transaction: %v %v (after %s)", ok, err, time.Since(t0))
	}
	if waited, limit := time.Since(t0), 15*time.Second; waited > limit {
		t.Fatalf("B's claim waited %s behind a frozen transaction, want at most %s", waited, limit)
	}
	if f.Epoch != 2 {
		t.Fatalf("B claimed epoch %d, want 2", f.Epoch)
	}
	if err := tx.Commit(); err == nil {
		t.Fatal("A's transaction, idle past the timeout, still committed")
	}
}
