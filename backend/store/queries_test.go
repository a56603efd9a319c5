package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// The store's other queries (orgs, keys, idempotency, logs, meta, billing,
// counts) give the same answers on both databases.
func TestStoreQueriesOnEachDialect(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		org, created, err := db.EnsureOrg(ctx, "acme", 5_000_000)
		if err != nil || !created || org.CreditsMicro != 5_000_000 {
			t.Fatalf("EnsureOrg: %+v %v %v", org, created, err)
		}
		if again, created, err := db.EnsureOrg(ctx, "acme", 1); err != nil || created || again.CreditsMicro != 5_000_000 {
			t.Fatalf("EnsureOrg again: %+v %v %v", again, created, err)
		}
		if err := db.EnsureAPIKey(ctx, org.ID, "k1"); err != nil {
			t.Fatal(err)
		}
		if err := db.EnsureAPIKey(ctx, org.ID, "k1"); err != nil {
			t.Fatal(err)
		}
		if id, err := db.OrgForKey(ctx, "k1"); err != nil || id != org.ID {
			t.Fatalf("OrgForKey: %q %v", id, err)
		}
		if _, err := db.OrgForKey(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown key: %v", err)
		}

		id1, err := db.DeploymentID(ctx)
		if err != nil || id1 == "" {
			t.Fatal(err)
		}
		if id2, _ := db.DeploymentID(ctx); id2 != id1 {
			t.Fatalf("deployment id changed: %s then %s", id1, id2)
		}
		seed, err := db.EnvdTokenSeed(ctx)
		if err != nil || len(seed) != 64 || seed == id1 {
			t.Fatalf("EnvdTokenSeed: %d chars, %v", len(seed), err)
		}
		if again, _ := db.EnvdTokenSeed(ctx); again != seed {
			t.Fatal("the envd token seed changed between calls")
		}
		agentSeed, err := db.AgentTokenSeed(ctx)
		if err != nil || len(agentSeed) != 64 || agentSeed == seed {
			t.Fatalf("AgentTokenSeed: %d chars, %v (another seed than envd's)", len(agentSeed), err)
		}
		if again, _ := db.AgentTokenSeed(ctx); again != agentSeed {
			t.Fatal("the agent token seed changed between calls")
		}

		if err := db.SaveLogs(ctx, "sb", "one"); err != nil {
			t.Fatal(err)
		}
		if err := db.SaveLogs(ctx, "sb", "two"); err != nil {
			t.Fatal(err)
		}
		if l, err := db.SavedLogs(ctx, "sb"); err != nil || l != "two" {
			t.Fatalf("SavedLogs: %q %v", l, err)
		}
		if _, err := db.SavedLogs(ctx, "none"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("SavedLogs of none: %v", err)
		}

		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			if id, err := LookupIdempotencyTx(ctx, tx, org.ID, "create", "idem"); err != nil || id != "" {
				t.Fatalf("fresh key: %q %v", id, err)
			}
			if err := SaveIdempotencyTx(ctx, tx, org.ID, "create", "idem", "a"); err != nil {
				return err
			}
			return SaveIdempotencyTx(ctx, tx, org.ID, "create", "idem", "b")
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			id, err := LookupIdempotencyTx(ctx, tx, org.ID, "create", "idem")
			if err == nil && id != "b" {
				t.Fatalf("idempotency key: %q", id)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}

		// Records, counts, billing.
		now := time.Now().UTC()
		r := &Record{ID: "sb1", OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhasePending, TemplateID: "base",
			CPUCount: 2, MemoryMB: 512, AutoPause: true, EndAt: now.Add(-time.Second)}
		if err := db.InsertRecord(ctx, r); err != nil || r.Seq == 0 {
			t.Fatalf("insert: seq %d %v", r.Seq, err)
		}
		r2 := &Record{ID: "sb2", OrgID: org.ID, Kind: sandbox.KindRuntime, Provider: "docker", Phase: sandbox.PhasePending, TemplateID: "base"}
		if err := db.InsertRecord(ctx, r2); err != nil || r2.Seq <= r.Seq {
			t.Fatalf("second insert: seq %d after %d, %v", r2.Seq, r.Seq, err)
		}
		if _, err := db.Transition(ctx, "sb1", sandbox.PhaseCreating, sandbox.CauseReconciler, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Transition(ctx, "sb1", sandbox.PhaseRunning, sandbox.CauseReconciler, func(r *Record) error {
			r.MarkRunning(now.Add(-3 * time.Second))
			r.MarkStopped(now.Add(-time.Second))
			r.MarkRunning(now.Add(-time.Second))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetRecord(ctx, "sb1")
		if err != nil || !got.AutoPause || got.AutoResume || got.CPUCount != 2 || got.Sessions != 2 {
			t.Fatalf("record fields: %+v %v", got, err)
		}
		counts, err := db.PhaseCounts(ctx, org.ID)
		if err != nil || counts[sandbox.PhaseRunning] != 1 || counts[sandbox.PhasePending] != 1 {
			t.Fatalf("PhaseCounts: %v %v", counts, err)
		}
		totals, err := db.PhaseTotals(ctx)
		if err != nil || totals[[2]string{sandbox.KindRuntime, string(sandbox.PhaseRunning)}] != 1 {
			t.Fatalf("PhaseTotals: %v %v", totals, err)
		}
		phases, err := db.RecordPhases(ctx, []string{"sb1", "sb2", "gone"})
		if err != nil || len(phases) != 2 || phases["sb1"] != sandbox.PhaseRunning {
			t.Fatalf("RecordPhases: %v %v", phases, err)
		}
		insts, err := db.RecordInstances(ctx, []string{"sb1", "gone"})
		if err != nil || len(insts) != 1 || insts["sb1"] != (RecordInstance{Phase: sandbox.PhaseRunning, ProviderID: got.ProviderID}) {
			t.Fatalf("RecordInstances: %v %v; want sb1 running on %q", insts, err, got.ProviderID)
		}
		live, err := db.LiveRecords(ctx)
		if err != nil || len(live) != 2 {
			t.Fatalf("LiveRecords: %d %v", len(live), err)
		}
		due, err := db.DueRecords(ctx, now)
		if err != nil || len(due) != 2 { // sb1 is past its TTL, sb2 is pending
			t.Fatalf("DueRecords: %v %v", due, err)
		}
		rt, sessions, err := db.UsageTotals(ctx, org.ID)
		if err != nil || rt != int64(2*time.Second) || sessions != 2 {
			t.Fatalf("UsageTotals: %d %d %v", rt, sessions, err)
		}
		spans, err := db.UsageSpans(ctx, org.ID, now.Add(-time.Hour))
		if err != nil || len(spans) != 1 || spans[0].RunningSince.IsZero() {
			t.Fatalf("UsageSpans: %+v %v", spans, err)
		}

		unsettled, err := db.UnsettledRecords(ctx, org.ID)
		if err != nil || len(unsettled) != 1 || unsettled[0].ID != "sb1" {
			t.Fatalf("UnsettledRecords: %+v %v", unsettled, err)
		}
		var charges []Charge
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			rows, err := BillingRowsTx(ctx, tx, []string{"sb1"})
			if err != nil {
				return err
			}
			order := []ChargeOrder{{Row: &rows[0], Micro: 1_000, BilledNs: int64(time.Second)}}
			applied, c, err := ApplyChargesTx(ctx, tx, order)
			if err != nil || !applied[0] || len(c) != 1 {
				return fmt.Errorf("a charge: %v %v %v", applied, c, err)
			}
			charges = append(charges, c...)
			if applied, _, err := ApplyChargesTx(ctx, tx, order); err != nil || applied[0] {
				t.Errorf("a charge from a stale row: applied %v, %v", applied, err)
			}
			bal, err := DebitOrgTx(ctx, tx, org.ID, 1_000)
			if err != nil || bal != 4_999_000 {
				t.Errorf("DebitOrgTx: %d %v", bal, err)
			}
			if _, err := DebitOrgTx(ctx, tx, org.ID, 10_000_000); !errors.Is(err, ErrInsufficientCredits) {
				t.Errorf("an overdraft: %v", err)
			}
			if c, err := OrgCreditsTx(ctx, tx, org.ID); err != nil || c != 4_999_000 {
				t.Errorf("OrgCreditsTx: %d %v", c, err)
			}
			ids, err := LiveRecordIDsTx(ctx, tx, org.ID)
			if err != nil || len(ids) != 2 {
				t.Errorf("LiveRecordIDsTx: %v %v", ids, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		db.PublishCharges(ctx, charges)
		if got, _ := db.GetRecord(ctx, "sb1"); got.BilledMicro != 1_000 || got.BilledNs != int64(time.Second) {
			t.Fatalf("published charge: %+v", got)
		}
		if broke, err := db.BrokeOrgs(ctx); err != nil || len(broke) != 0 {
			t.Fatalf("BrokeOrgs: %v %v", broke, err)
		}
		if bal, err := db.GrantCredits(ctx, "acme", -4_999_000); err != nil || bal != 0 {
			t.Fatalf("GrantCredits: %d %v", bal, err)
		}
		if broke, err := db.BrokeOrgs(ctx); err != nil || len(broke) != 1 {
			t.Fatalf("BrokeOrgs at zero: %v %v", broke, err)
		}
		if c, err := db.OrgCredits(ctx, org.ID); err != nil || c != 0 {
			t.Fatalf("OrgCredits: %d %v", c, err)
		}
		if _, err := db.GrantCredits(ctx, "nobody", 1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("grant to nobody: %v", err)
		}
	})
}

// Concurrent grants never pass the cap together (the cap is checked by the
// UPDATE, not by a read before it).
func TestGrantCreditsMaxConcurrent(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		if _, _, err := db.EnsureOrg(ctx, "acme", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GrantCreditsMax(ctx, "nobody", 1, 10); !errors.Is(err, ErrNotFound) {
			t.Fatalf("grant to nobody: %v", err)
		}
		if _, err := db.GrantCreditsMax(ctx, "acme", 11, 10); !errors.Is(err, ErrBalanceCap) {
			t.Fatalf("a grant over the cap: %v", err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.GrantCreditsMax(ctx, "acme", 1, 10)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, ErrBalanceCap):
					t.Errorf("grant: %v", err)
				}
			}()
		}
		wg.Wait()
		org, _ := db.OrgByName(ctx, "acme")
		if ok != 10 || org.CreditsMicro != 10 {
			t.Fatalf("%d grants succeeded, balance %d; want 10 and 10", ok, org.CreditsMicro)
		}
	})
}

// LockTx makes a second transaction naming the same key wait for the first
// to end (on SQLite, Tx's single writer already does).
func TestLockTxSerialises(t *testing.T) {
	eachDialect(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		locked := make(chan struct{})
		release := make(chan struct{})
		firstDone := make(chan error, 1)
		go func() {
			firstDone <- db.Tx(ctx, func(tx *sql.Tx) error {
				if err := LockTx(ctx, tx, "k", "1"); err != nil {
					return err
				}
				close(locked)
				<-release
				_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('order', 'first')`)
				return err
			})
		}()
		<-locked
		secondDone := make(chan error, 1)
		go func() {
			secondDone <- db.Tx(ctx, func(tx *sql.Tx) error {
				if err := LockTx(ctx, tx, "k", "1"); err != nil {
					return err
				}
				var v string
				if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'order'`).Scan(&v); err != nil {
					return err // no row: the first transaction had not committed
				}
				_, err := tx.ExecContext(ctx, `UPDATE meta SET value = 'second' WHERE key = 'order'`)
				return err
			})
		}()
		select {
		case err := <-secondDone:
			t.Fatalf("the second transaction did not wait for the lock: %v", err)
		case <-time.After(200 * time.Millisecond): // a bounded check that it is still waiting
		}
		close(release)
		if err := <-firstDone; err != nil {
			t.Fatal(err)
		}
		if err := <-secondDone; err != nil {
			t.Fatal(err)
		}
		var v string
		if err := db.Reader().QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'order'`).Scan(&v); err != nil || v != "second" {
			t.Fatalf("order: %q %v", v, err)
		}
	})
}

// Two stores on one PostgreSQL database (two replicas) racing the same
// transitions: the version condition lets exactly one of each pair win.
func TestTransitionRaceAcrossStores(t *testing.T) {
	url := pgtest.Database(t)
	ctx := context.Background()
	var dbs [2]*DB
	for i := range dbs {
		db, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	const n = 20
	for i := range n {
		newRecord(t, dbs[0], fmt.Sprintf("r%d", i))
	}
	var wg sync.WaitGroup
	wins := make(chan string, 2*n)
	for i := range n {
		for j, db := range dbs {
			to := []sandbox.Phase{sandbox.PhaseStopping, sandbox.PhaseCreating}[j]
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("r%d", i)
				_, err := db.Transition(ctx, id, to, sandbox.CauseUser, Expect(sandbox.PhasePending, nil))
				switch {
				case err == nil:
					wins <- id
				case !errors.Is(err, ErrConflict):
					t.Errorf("%s: %v", id, err)
				}
			}()
		}
	}
	wg.Wait()
	close(wins)
	seen := map[string]int{}
	for id := range wins {
		seen[id]++
	}
	for i := range n {
		if id := fmt.Sprintf("r%d", i); seen[id] != 1 {
			t.Errorf("%s: %d winners, want 1", id, seen[id])
		}
	}
}
