package billing

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// fill inserts n records of org (every mod-th running, the others spread
// over paused, killed and starting), in large transactions.
func fill(b testing.TB, db *store.DB, org string, n int, t0 time.Time, runningEvery int) {
	b.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 5000 {
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			for i := start; i < min(start+5000, n); i++ {
				r := &store.Record{ID: fmt.Sprintf("%s-%06d", org, i), OrgID: org, Kind: []string{sandbox.KindRuntime, sandbox.KindTask, sandbox.KindWorld}[i%3],
					Provider: "docker", ProviderID: fmt.Sprintf("c%06d", i), TemplateID: "base", CPUCount: 1 + i%4, MemoryMB: 512,
					CreatedAt: t0, Metadata: map[string]string{"purpose": "bench"}}
				switch {
				case i%runningEvery == 0:
					r.Phase = sandbox.PhaseRunning
					r.MarkRunning(t0)
					r.EndAt = t0.Add(24 * time.Hour)
				case i%3 == 1:
					r.Phase = sandbox.PhasePaused
					r.MarkRunning(t0)
					r.MarkStopped(t0.Add(time.Minute))
					r.BilledNs = r.RuntimeNs
				case i%3 == 2:
					r.Phase = sandbox.PhaseDeleted
					r.MarkRunning(t0)
					r.MarkKilled(t0.Add(time.Minute), sandbox.KillDeleted)
					r.BilledNs = r.RuntimeNs
				default:
					r.Phase = sandbox.PhasePending
				}
				if err := storetest.InsertFixtureTx(ctx, tx, r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSettlePass10k is one settle pass over 10k running records (each
// with 10 s to bill), the work the settle loop does every interval, on
// SQLite and on PostgreSQL: with the fast path (the default), and row by
// row (Config.RowByRow, every record read, charged in Go and written
// conditionally), the baseline its ratio is taken against.
func BenchmarkSettlePass10k(b *testing.B) {
	for _, mode := range []struct {
		name     string
		rowByRow bool
	}{{"fast", false}, {"rowbyrow", true}} {
		b.Run("sqlite/"+mode.name, func(b *testing.B) { benchSettlePass(b, filepath.Join(b.TempDir(), "db"), mode.rowByRow) })
		b.Run("postgres/"+mode.name, func(b *testing.B) { benchSettlePass(b, pgtest.Database(b), mode.rowByRow) })
	}
}

func benchSettlePass(b *testing.B, url string, rowByRow bool) {
	db := openDB(b, url)
	defer db.Close()
	t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
	c := newClock(t0)
	s, err := New(context.Background(), Config{DB: db, Logger: quiet, Now: c.Now, Rates: &DefaultRates, RowByRow: rowByRow})
	if err != nil {
		b.Fatal(err)
	}
	org := ensureOrg(b, db, "bench", MaxBalanceMicro)
	const n = 10_000
	fill(b, db, org, n, t0, 1) // all running
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.Advance(10 * time.Second)
		res, err := s.SettleAll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.Records != n {
			b.Fatalf("settled %d records, want %d", res.Records, n)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}

// BenchmarkLedgerListP99 lists pages of 50 (HTTP handler, JSON included)
// from a store of 100k records, at random cursors and with the state and
// kind filters, and reports the 99th percentile latency.
func BenchmarkLedgerListP99(b *testing.B) {
	db := openDB(b, filepath.Join(b.TempDir(), "db"))
	defer db.Close()
	t0 := time.Now().Add(-time.Hour).UTC()
	s := newTestService(b, db, newClock(time.Now()), DefaultRates)
	org := ensureOrg(b, db, "bench", 1_000_000)
	const n = 100_000
	fill(b, db, org, n, t0, 50) // 2% running
	r := mux.NewRouter()
	s.Register(r)
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.ServeHTTP(w, req.WithContext(httpx.WithOrg(req.Context(), org)))
	})
	queries := []string{"", "state=running", "state=running,paused", "kind=task", "state=killed&kind=world"}
	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q := queries[i%len(queries)]
		url := "/api/v1/org/bench/sandboxes?limit=50"
		if q != "" {
			url += "&" + q
		}
		if i%2 == 1 { // half the requests resume from a random position
			url += "&cursor=" + httpx.EncodeCursor("s", rng.Int64N(n))
		}
		req := httptest.NewRequest(http.MethodGet, url, nil)
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, req)
		lat = append(lat, time.Since(start))
		if w.Code != 200 {
			b.Fatalf("%s: %d %s", url, w.Code, w.Body)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6 }
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}
