package billing

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// clock is a settable time source shared by a test and its Service.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openDB(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newTestService(t testing.TB, db *store.DB, c *clock, rates Rates) *Service {
	t.Helper()
	s, err := New(context.Background(), Config{DB: db, Logger: quiet, Now: c.Now, Rates: &rates})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// milliRate bills 0.001 credits per CPU-second: 10 s of one CPU cost 0.01
// credits (10000 micro-credits).
var milliRate = Rates{CPUSecond: 1_000_000}

// billedRecord reads record id with the billed figures the database holds
// (a charge by the fast path leaves cached copies as they were).
func billedRecord(t testing.TB, db *store.DB, id string) *store.Record {
	t.Helper()
	r, err := db.GetRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := db.WithBilled(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return fresh[0]
}

func ensureOrg(t testing.TB, db *store.DB, name string, micro int64) string {
	t.Helper()
	o, _, err := db.EnsureOrg(context.Background(), name, micro)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// insertRunning stores a record that has been running since since.
func insertRunning(t testing.TB, db *store.DB, org, id string, since time.Time, kind string) *store.Record {
	t.Helper()
	r := &store.Record{ID: id, OrgID: org, Kind: kind, Provider: "docker", Phase: sandbox.PhaseRunning, TemplateID: "base",
		CPUCount: 1, MemoryMB: 512, CreatedAt: since, EndAt: since.Add(time.Hour)}
	r.MarkRunning(since)
	if err := storetest.InsertFixture(context.Background(), db, r); err != nil {
		t.Fatal(err)
	}
	return r
}

func balance(t testing.TB, db *store.DB, org string) int64 {
	t.Helper()
	b, err := db.OrgCredits(context.Background(), org)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshotTx are the options of a read-only transaction whose statements
// all see one snapshot: SQLite's read transactions do; PostgreSQL's READ
// COMMITTED gives each statement its own, so ask for REPEATABLE READ.
func snapshotTx(db *store.DB) *sql.TxOptions {
	opts := &sql.TxOptions{ReadOnly: true}
	if db.Dialect() == store.Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	return opts
}

func billedSum(t testing.TB, db *store.DB, org string) int64 {
	t.Helper()
	var n int64
	if err := db.Reader().QueryRow(`SELECT COALESCE(SUM(billed_micro), 0) FROM accruals WHERE org_id = ?`, org).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSettleBillsRunningTimeAndCarriesRemainder(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		// 1 CPU at 0.000014/s plus 0.5 GiB at 0.0000045/s = 16.25 micro-credits per second.
		s := newTestService(t, db, c, DefaultRates)
		org := ensureOrg(t, db, "o", 1_000_000)
		insertRunning(t, db, org, "r1", t0, sandbox.KindRuntime)
		ctx := context.Background()

		var billed int64
		for range 7 { // 7 settlements of 1 s: the quarter micro-credits carry over
			c.Advance(time.Second)
			if err := s.Settle(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
		}
		r, _ := db.GetRecord(ctx, "r1")
		billed = r.BilledMicro
		// 7 s × 16.25 = 113.75 → 113 billed, the 0.75 still running.
		if billed != 113 || balance(t, db, org) != 1_000_000-113 {
			t.Fatalf("billed %d, balance %d; want 113 and %d", billed, balance(t, db, org), 1_000_000-113)
		}
		if got := s.RunningCredits(r); got != 0 {
			t.Fatalf("running credits after settling: %d", got)
		}
		c.Advance(time.Second) // 8 s × 16.25 = 130 exactly
		if err := s.Settle(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
		r, _ = db.GetRecord(ctx, "r1")
		if r.BilledMicro != 130 {
			t.Fatalf("billed after 8 s = %d, want 130 (remainders carried)", r.BilledMicro)
		}
		v := s.View(r)
		if v.BilledCredits != 130 || v.EstimatedTotalCredits != v.BilledCredits+v.RunningCredits || v.State != "running" {
			t.Fatalf("view: %+v", v)
		}

		// Paused: no accrual. Pausing folds runtime; the settle closes it out.
		c.Advance(500 * time.Millisecond)
		now := c.Now()
		if _, err := pauseRecord(ctx, db, "r1", func(r *store.Record) error { r.MarkStopped(now); return nil }); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Hour)
		if _, err := s.SettleAll(ctx); err != nil {
			t.Fatal(err)
		}
		r, _ = db.GetRecord(ctx, "r1")
		if r.BilledMicro != 138 || r.BilledNs != r.RuntimeNs || s.RunningCredits(r) != 0 { // 8.5 s × 16.25 = 138.125
			t.Fatalf("paused record: billed %d (want 138), billed_ns %d runtime_ns %d", r.BilledMicro, r.BilledNs, r.RuntimeNs)
		}
		if n, _ := db.UnsettledRecords(ctx, ""); len(n) != 0 {
			t.Fatalf("a closed-out record must leave the unsettled set: %+v", n)
		}
		if billedSum(t, db, org)+balance(t, db, org) != 1_000_000 {
			t.Fatalf("billed + balance != granted")
		}
	})
}

// 200 records of one org settle concurrently against a balance that runs
// out mid-way. Concurrent readers check, on consistent snapshots, that the
// balance never goes below zero and that balance + billed is constant.
func TestConcurrentSettlementNeverOverdraws(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		s := newTestService(t, db, c, milliRate)
		const initial = 1_234_567 // enough for ~123 of the 200 records' 10000 each
		org := ensureOrg(t, db, "broke", initial)
		other := ensureOrg(t, db, "rich", 10_000_000)
		ctx := context.Background()
		const n = 200
		for i := range n {
			kind := sandbox.KindRuntime
			if i%10 == 0 {
				kind = sandbox.KindTask // task records are billed and killed the same way
			}
			insertRunning(t, db, org, fmt.Sprintf("b%03d", i), t0, kind)
		}
		// A paused and a pending record are killed too; another org is untouched.
		paused := insertRunning(t, db, org, "paused", t0, sandbox.KindRuntime)
		if _, err := pauseRecord(ctx, db, paused.ID, func(r *store.Record) error { r.MarkStopped(t0); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db.InsertRecord(ctx, &store.Record{ID: "pending", OrgID: org, Kind: sandbox.KindRuntime, Provider: "docker",
			Phase: sandbox.PhasePending, TemplateID: "base"}); err != nil {
			t.Fatal(err)
		}
		insertRunning(t, db, other, "rich1", t0, sandbox.KindRuntime)
		c.Advance(10 * time.Second)

		stop := make(chan struct{})
		var readers sync.WaitGroup
		var snapshots atomic.Int64
		var readErr atomic.Value
		for range 4 {
			readers.Add(1)
			go func() {
				defer readers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if err := checkSnapshot(ctx, db, org, initial); err != nil {
						readErr.Store(err)
						return
					}
					snapshots.Add(1)
				}
			}()
		}

		var wg sync.WaitGroup
		errs := make(chan error, n+1)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs <- s.Settle(ctx, fmt.Sprintf("b%03d", i))
			}()
		}
		wg.Add(1)
		go func() { // and a full pass racing them
			defer wg.Done()
			<-start
			_, err := s.SettleAll(ctx)
			errs <- err
		}()
		close(start)
		wg.Wait()
		close(stop)
		readers.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err, _ := readErr.Load().(error); err != nil {
			t.Fatal(err)
		}
		if snapshots.Load() == 0 {
			t.Fatal("the readers took no snapshot")
		}
		if b := balance(t, db, org); b != 0 {
			t.Fatalf("balance = %d, want 0", b)
		}
		if sum := billedSum(t, db, org); sum != initial {
			t.Fatalf("sum of billed credits %d != what left the balance %d", sum, initial)
		}
		recs, err := db.ListRecords(ctx, store.RecordFilter{OrgID: org})
		if err != nil {
			t.Fatal(err)
		}
		full := 0
		for _, r := range recs {
			if r.Phase != sandbox.PhaseStopping || r.KillReason != sandbox.KillInsufficientCredits {
				t.Fatalf("record %s: phase %s kill_reason %q; want stopping/insufficient_credits", r.ID, r.Phase, r.KillReason)
			}
			if r.BilledMicro == 10_000 {
				full++
			}
			if r.BilledMicro > 10_000 || r.BilledNs > int64(10*time.Second) {
				t.Fatalf("record %s overbilled: %d micro for %d ns", r.ID, r.BilledMicro, r.BilledNs)
			}
		}
		if full != initial/10_000 {
			t.Fatalf("%d records fully billed, want %d", full, initial/10_000)
		}
		// Settling again moves nothing; the other org was billed normally.
		if _, err := s.SettleAll(ctx); err != nil {
			t.Fatal(err)
		}
		if b, sum := balance(t, db, org), billedSum(t, db, org); b != 0 || sum != initial {
			t.Fatalf("second pass moved credits: balance %d billed %d", b, sum)
		}
		rich := billedRecord(t, db, "rich1")
		if rich.Phase != sandbox.PhaseRunning || rich.BilledMicro != 10_000 || balance(t, db, other) != 10_000_000-10_000 {
			t.Fatalf("other org: %+v balance %d", rich, balance(t, db, other))
		}
		// Credits gone: new compute is refused with 402.
		if err := s.Admit(ctx, org); err == nil || err.Error() == "" {
			t.Fatalf("admit with zero balance: %v", err)
		}
		if err := s.Admit(ctx, other); err != nil {
			t.Fatalf("admit with credits: %v", err)
		}
	})
}

// The settle loop alone (many passes racing) also never overdraws.
func TestSettlePassesRacing(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		s := newTestService(t, db, c, milliRate)
		s.cfg.ChunkSize = 7
		const initial = 555_555
		org := ensureOrg(t, db, "o", initial)
		for i := range 100 {
			insertRunning(t, db, org, fmt.Sprintf("r%03d", i), t0, sandbox.KindRuntime)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					c.Advance(time.Second)
					if _, err := s.SettleAll(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		if b, sum := balance(t, db, org), billedSum(t, db, org); b < 0 || b+sum != initial {
			t.Fatalf("balance %d + billed %d != %d", b, sum, initial)
		}
	})
}

// A balance at zero with no charge due (a fresh pending record of a broke
// org) is still enforced by the pass.
func TestBrokeOrgRecordsKilledWithoutCharge(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		c := newClock(time.Now())
		s := newTestService(t, db, c, milliRate)
		org := ensureOrg(t, db, "zero", 0)
		ctx := context.Background()
		if err := db.InsertRecord(ctx, &store.Record{ID: "p", OrgID: org, Kind: sandbox.KindWorld, Provider: "docker",
			Phase: sandbox.PhasePending, TemplateID: "base"}); err != nil {
			t.Fatal(err)
		}
		res, err := s.SettleAll(ctx)
		if err != nil || res.Killed != 1 {
			t.Fatalf("pass: %+v %v", res, err)
		}
		r, _ := db.GetRecord(ctx, "p")
		if r.Phase != sandbox.PhaseStopping || r.KillReason != sandbox.KillInsufficientCredits {
			t.Fatalf("record: %s %s", r.Phase, r.KillReason)
		}
	})
}

// A restart loses no accrued time: what ran while no backend was up is
// settled from the persisted timestamps after reopening the database.
func TestRestartSettlesDowntime(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		path := url
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		ctx := context.Background()

		db := openDB(t, path)
		s := newTestService(t, db, c, milliRate)
		org := ensureOrg(t, db, "o", 100_000_000)
		insertRunning(t, db, org, "run", t0, sandbox.KindRuntime)
		p := insertRunning(t, db, org, "paused", t0, sandbox.KindRuntime)
		// "run" legitimately runs through the downtime: its TTL outlasts it
		// (running time past endAt is never billed).
		if _, err := db.Transition(ctx, "run", "", "", func(r *store.Record) error { r.EndAt = t0.Add(3 * time.Hour); return nil }); err != nil {
			t.Fatal(err)
		}
		c.Advance(30 * time.Second)
		if err := s.Settle(ctx, "run"); err != nil { // 30 s billed before the "crash"
			t.Fatal(err)
		}
		now := c.Now()
		if _, err := pauseRecord(ctx, db, p.ID, func(r *store.Record) error { r.MarkStopped(now); return nil }); err != nil {
			t.Fatal(err)
		}
		db.Close() // the backend dies without settling "paused"

		c.Advance(2 * time.Hour) // downtime
		db = openDB(t, path)
		defer db.Close()
		s = newTestService(t, db, c, milliRate)
		if _, err := s.SettleAll(ctx); err != nil {
			t.Fatal(err)
		}
		run, _ := db.GetRecord(ctx, "run")
		paused, _ := db.GetRecord(ctx, "paused")
		wantRun := int64((2*time.Hour + 30*time.Second) / time.Millisecond) // 0.001 credits/s = 1 micro/ms
		if run.BilledMicro != wantRun || run.BilledNs != int64(2*time.Hour+30*time.Second) {
			t.Fatalf("running record after restart: billed %d (want %d), billed_ns %d", run.BilledMicro, wantRun, run.BilledNs)
		}
		if paused.BilledMicro != 30_000 { // 30 s running, then paused: no accrual while paused
			t.Fatalf("paused record after restart: billed %d, want 30000", paused.BilledMicro)
		}
		if b := balance(t, db, org); b != 100_000_000-wantRun-30_000 {
			t.Fatalf("balance %d", b)
		}
	})
}

func TestGrantAndCap(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		s := newTestService(t, db, newClock(time.Now()), DefaultRates)
		ensureOrg(t, db, "o", 0)
		ctx := context.Background()
		bal, err := s.Grant(ctx, "o", 1_500_000)
		if err != nil || bal != 1_500_000 {
			t.Fatalf("grant: %d %v", bal, err)
		}
		if _, err := s.Grant(ctx, "nope", 1); err == nil {
			t.Fatal("grant to an unknown org must fail")
		}
		if _, err := s.Grant(ctx, "o", MaxBalanceMicro); err == nil {
			t.Fatal("grant over the cap must fail")
		}
	})
}

// A pass works from rows read before its transaction: a record that changed
// meanwhile (here: paused) is re-read and billed from its fresh state.
func TestSettleStaleRowIsReRead(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		db := openDB(t, url)
		defer db.Close()
		t0 := time.Date(2025, 3, 10, 12, 0, 0, 0, time.UTC)
		c := newClock(t0)
		s := newTestService(t, db, c, milliRate)
		org := ensureOrg(t, db, "o", 1_000_000)
		insertRunning(t, db, org, "r", t0, sandbox.KindRuntime)
		ctx := context.Background()
		c.Advance(10 * time.Second)
		rows, err := db.UnsettledRecords(ctx, "")
		if err != nil || len(rows) != 1 {
			t.Fatal(rows, err)
		}
		pausedAt := t0.Add(4 * time.Second)
		if _, err := pauseRecord(ctx, db, "r", func(r *store.Record) error { r.MarkStopped(pausedAt); return nil }); err != nil {
			t.Fatal(err)
		}
		res, err := s.settleRows(ctx, rows)
		if err != nil || res.Records != 1 || res.Micro != 4_000 {
			t.Fatalf("settle of a stale row: %+v %v (want 4 s billed, the paused state)", res, err)
		}
		r, _ := db.GetRecord(ctx, "r") // the cache was brought up to date too
		if r.BilledMicro != 4_000 || r.BilledNs != int64(4*time.Second) || r.Phase != sandbox.PhasePaused {
			t.Fatalf("record: billed %d ns %d phase %s", r.BilledMicro, r.BilledNs, r.Phase)
		}
	})
}

// pauseRecord pauses a running record the only way the transitions table
// allows: running → pausing (the user's request) → paused (the reconciler,
// once the provider has paused it), applying mutate on the last step.
func pauseRecord(ctx context.Context, db *store.DB, id string, mutate func(*store.Record) error) (*store.Record, error) {
	if _, err := db.Transition(ctx, id, sandbox.PhasePausing, sandbox.CauseUser, nil); err != nil {
		return nil, err
	}
	return db.Transition(ctx, id, sandbox.PhasePaused, sandbox.CauseReconciler, mutate)
}
