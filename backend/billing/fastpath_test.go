package billing

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// billedByRecord renders what each record of org was billed (from the
// database, in seq order).
func billedByRecord(t *testing.T, db *store.DB, org string) string {
	t.Helper()
	var b strings.Builder
	rows, err := db.Reader().Query(`SELECT a.seq, a.billed_micro, a.billed_ns, s.phase FROM accruals a JOIN sandboxes s ON s.seq = a.seq
		WHERE a.org_id = ? ORDER BY a.seq`, org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq, micro, ns int64
		var phase string
		if err := rows.Scan(&seq, &micro, &ns, &phase); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%d %d %d %s\n", seq, micro, ns, phase)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The fast path computes charges in SQL; the row path in Go. On the same
// records, clock and balances, settle passes through either leave exactly
// the same billed figures, balances and kills. The records cover what the
// fast path must leave to the row path: stopped records to close out,
// records past their end, sums whose product would overflow a BIGINT, an
// org whose balance runs out (on PostgreSQL the optimistic pass is rolled
// back and redone), an org without credits, and sizes of zero (defaults).
func TestFastPathMatchesRowPath(t *testing.T) {
	// The default rates, and one where every term counts, with odd values.
	odd := Rates{CPUSecond: 7_777, GiBSecond: 3_333, SandboxSecond: 1_234}
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		for name, rates := range map[string]Rates{"default-rates": DefaultRates, "odd-rates": odd} {
			t.Run(name, func(t *testing.T) {
				newDB := func(t *testing.T) *store.DB {
					u := filepath.Join(t.TempDir(), "db")
					if strings.HasPrefix(url, "postgres") {
						u = pgtest.Database(t)
					}
					db := openDB(t, u)
					t.Cleanup(func() { db.Close() })
					return db
				}
				fastMatchesRows(t, newDB, rates)
			})
		}
	})
}

// fastMatchesRows is TestFastPathMatchesRowPath at one rate table.
func fastMatchesRows(t *testing.T, newDB func(t *testing.T) *store.DB, rates Rates) {
	t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	type world struct {
		db *store.DB
		s  *Service
		c  *clock
	}
	build := func(rowByRow bool) world {
		db := newDB(t)
		c := newClock(t0)
		s, err := New(context.Background(), Config{DB: db, Logger: quiet, Now: c.Now, Rates: &rates, RowByRow: rowByRow})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 11))
		for _, o := range []struct {
			name    string
			balance int64
		}{{"rich", MaxBalanceMicro}, {"poor", 3_000_000}, {"broke", 0}} {
			org := ensureOrg(t, db, o.name, o.balance)
			for i := range 60 {
				r := &store.Record{ID: fmt.Sprintf("%s-%02d", o.name, i), OrgID: org, Kind: sandbox.KindRuntime,
					Provider: "docker", TemplateID: "base", CPUCount: rng.IntN(5), MemoryMB: 256 * rng.IntN(9), CreatedAt: t0}
				since := t0.Add(-time.Duration(rng.IntN(3600)) * time.Second)
				r.Phase = sandbox.PhaseRunning
				r.MarkRunning(since)
				r.EndAt = t0.Add(time.Duration(rng.IntN(120)) * time.Second) // some end during the test
				switch i % 6 {
				case 1: // paused with a remainder to close out
					r.Phase = sandbox.PhasePaused
					r.MarkStopped(t0)
				case 2: // billed part of its time already
					r.BilledNs = int64(t0.Sub(since)) / 2
					r.BilledMicro = cost(r.BilledNs, rates.For(r.CPUCount, r.MemoryMB))
				case 3: // running for a century: too long for the SQL arithmetic
					r.RunningSince = t0.AddDate(-100, 0, 0)
					r.EndAt = time.Time{}
				}
				if err := storetest.InsertFixture(context.Background(), db, r); err != nil {
					t.Fatal(err)
				}
			}
		}
		// thin's records all run steadily from t0, and its balance
		// runs out after a few passes: on PostgreSQL the optimistic
		// fast pass charges it past its balance and is redone.
		thin := ensureOrg(t, db, "thin", 12_000)
		for i := range 10 {
			r := &store.Record{ID: fmt.Sprintf("thin-%02d", i), OrgID: thin, Kind: sandbox.KindRuntime, Provider: "docker",
				TemplateID: "base", CPUCount: 1 + i%3, MemoryMB: 512, CreatedAt: t0, Phase: sandbox.PhaseRunning}
			r.MarkRunning(t0)
			if err := storetest.InsertFixture(context.Background(), db, r); err != nil {
				t.Fatal(err)
			}
		}
		return world{db, s, c}
	}
	fast, rows := build(false), build(true)
	orgs := []string{"rich", "poor", "broke", "thin"}
	for i, name := range orgs {
		orgs[i] = ensureOrg(t, fast.db, name, 0)
		if id := ensureOrg(t, rows.db, name, 0); id != orgs[i] {
			t.Fatalf("org %s has ids %s and %s", name, orgs[i], id)
		}
	}
	ctx := context.Background()
	for pass := range 12 {
		var got [2]SettleResult
		for i, w := range []world{fast, rows} {
			w.c.Advance(time.Duration(1+pass%4) * 7 * time.Second)
			res, err := w.s.SettleAll(ctx)
			if err != nil {
				t.Fatalf("pass %d: %v", pass, err)
			}
			got[i] = res
		}
		if got[0] != got[1] {
			t.Fatalf("pass %d: fast path %+v, row path %+v", pass, got[0], got[1])
		}
		for _, org := range orgs {
			a, b := billedByRecord(t, fast.db, org), billedByRecord(t, rows.db, org)
			if a != b {
				t.Fatalf("pass %d, org %s: fast path billed\n%s\nrow path billed\n%s", pass, org, a, b)
			}
			if ba, bb := balance(t, fast.db, org), balance(t, rows.db, org); ba != bb {
				t.Fatalf("pass %d, org %s: balance %d by the fast path, %d by the row path", pass, org, ba, bb)
			}
		}
	}
}
