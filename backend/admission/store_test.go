package admission

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// One PostgreSQL cluster for the package; each test gets its own database.
func TestMain(m *testing.M) { pgtest.Main(m) }

func openStore(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newAdmitter(db *store.DB, c map[string]Capacity, maxQueue int) *Admitter {
	return New(Config{DB: db, Capacity: c, MaxQueue: maxQueue, Logger: quiet, Interval: time.Hour})
}

func ensureOrg(t *testing.T, db *store.DB, name string) string {
	t.Helper()
	o, _, err := db.EnsureOrg(context.Background(), name, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func intp(n int) *int { return &n }

// create is the create transaction of lifecycle: place, then insert.
func create(ctx context.Context, db *store.DB, a *Admitter, org, provider, id string) (*store.Record, error) {
	r := &store.Record{ID: id, OrgID: org, Kind: sandbox.KindRuntime, Provider: provider, TemplateID: "base",
		CPUCount: 1, MemoryMB: 512, CreatedAt: time.Now()}
	err := db.Tx(ctx, func(tx *sql.Tx) error {
		if err := a.Place(ctx, tx, r); err != nil {
			return err
		}
		return store.InsertRecordTx(ctx, tx, r)
	})
	return r, err
}

// end takes a record out of the holding phases (stopping, then deleted).
func end(t *testing.T, db *store.DB, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.Transition(ctx, id, sandbox.PhaseStopping, sandbox.CauseUser, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Transition(ctx, id, sandbox.PhaseDeleted, sandbox.CauseReconciler, nil); err != nil {
		t.Fatal(err)
	}
}

func phaseCounts(t *testing.T, db *store.DB, org string) map[sandbox.Phase]int {
	t.Helper()
	n, err := db.PhaseCounts(context.Background(), org)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Placement, positions, reports, metrics' queries and a pass, on each
// database: a quota of 2 running starts two, queues the third, and the
// pass admits it once one ends.
func TestPlaceQueueAndPass(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		db := openStore(t, url)
		a := newAdmitter(db, map[string]Capacity{"docker": {CPU: 8}}, 10)
		org := ensureOrg(t, db, "o")
		if err := SetQuotas(ctx, db, "o", Quotas{MaxRunning: intp(2)}); err != nil {
			t.Fatal(err)
		}
		var recs []*store.Record
		for i := range 3 {
			r, err := create(ctx, db, a, org, "docker", fmt.Sprintf("s%d", i))
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if recs[0].Phase != sandbox.PhasePending || recs[1].Phase != sandbox.PhasePending || recs[2].Phase != sandbox.PhaseQueued {
			t.Fatalf("phases %s %s %s; want pending pending queued", recs[0].Phase, recs[1].Phase, recs[2].Phase)
		}
		if pos, err := Position(ctx, db.Reader(), recs[2]); err != nil || pos != 1 {
			t.Fatalf("position %d %v, want 1", pos, err)
		}
		rep, err := a.ReportOf(ctx, org)
		if err != nil || rep.Queued != 1 || rep.Use.Sandboxes != 2 || rep.Use.CPU != 2 || rep.Use.MemoryMB != 1024 ||
			rep.Quotas.MaxRunning == nil || *rep.Quotas.MaxRunning != 2 {
			t.Fatalf("report %+v %v", rep, err)
		}
		use, err := usageOf(ctx, db.Reader())
		if err != nil || use[usageKey{org: org}].Sandboxes != 2 || use[usageKey{provider: "docker"}].MemoryMB != 1024 {
			t.Fatalf("usage %+v %v", use, err)
		}
		if n, err := a.Pass(ctx); err != nil || n != 0 {
			t.Fatalf("pass with the quota full admitted %d (%v)", n, err)
		}
		end(t, db, recs[0].ID)
		if n, err := a.Pass(ctx); err != nil || n != 1 {
			t.Fatalf("pass after a slot freed admitted %d (%v), want 1", n, err)
		}
		r, err := db.GetRecord(ctx, recs[2].ID)
		if err != nil || r.Phase != sandbox.PhasePending {
			t.Fatalf("queued record after the pass: %v %v", r, err)
		}
	})
}

// Creates racing on one org (and, on PostgreSQL, through two stores, as two
// replicas would) never overrun its quota nor its queue bound: exactly
// max_running start, exactly MaxQueue wait, the rest are refused with 429.
func TestConcurrentPlacesKeepQuotaAndQueueBound(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		dbs := []*store.DB{openStore(t, url), openStore(t, url)}
		const running, queue, n = 3, 5, 40
		admitters := []*Admitter{newAdmitter(dbs[0], nil, queue), newAdmitter(dbs[1], nil, queue)}
		org := ensureOrg(t, dbs[0], "o")
		if err := SetQuotas(ctx, dbs[0], "o", Quotas{MaxRunning: intp(running)}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := create(ctx, dbs[i%2], admitters[i%2], org, "docker", fmt.Sprintf("c%02d", i))
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		full := 0
		for err := range errs {
			var qf *domain.QueueFullError
			switch {
			case errors.As(err, &qf):
				full++
			case err != nil:
				t.Fatal(err)
			}
		}
		got := phaseCounts(t, dbs[0], org)
		if got[sandbox.PhasePending] != running || got[sandbox.PhaseQueued] != queue || full != n-running-queue {
			t.Fatalf("pending %d (want %d), queued %d (want %d), refused %d (want %d)",
				got[sandbox.PhasePending], running, got[sandbox.PhaseQueued], queue, full, n-running-queue)
		}
	})
}

// Passes of four replicas racing after slots free up admit exactly as many
// as fit: a provider's capacity is never overrun.
func TestConcurrentPassesKeepCapacity(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		ctx := context.Background()
		const replicas = 4
		capacity := map[string]Capacity{"e2b": {Sandboxes: 4}}
		var dbs []*store.DB
		var admitters []*Admitter
		for range replicas {
			dbs = append(dbs, openStore(t, url))
			admitters = append(admitters, newAdmitter(dbs[len(dbs)-1], capacity, 100))
		}
		var ids []string
		for i := range 3 { // three orgs, so that every pass takes several locks
			org := ensureOrg(t, dbs[0], fmt.Sprintf("o%d", i))
			for j := range 6 {
				r, err := create(ctx, dbs[0], admitters[0], org, "e2b", fmt.Sprintf("o%d-%d", i, j))
				if err != nil {
					t.Fatal(err)
				}
				if r.Phase == sandbox.PhasePending {
					ids = append(ids, r.ID)
				}
			}
		}
		if len(ids) != 4 {
			t.Fatalf("%d started at once, want the capacity (4)", len(ids))
		}
		for _, id := range ids[:3] {
			end(t, dbs[0], id)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := admitters[i%replicas].Pass(ctx)
				errs <- err
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		use, err := usageOf(ctx, dbs[0].Reader())
		if err != nil {
			t.Fatal(err)
		}
		if u := use[usageKey{provider: "e2b"}]; u.Sandboxes != 4 {
			t.Fatalf("e2b holds %d sandboxes after racing passes, want its capacity 4", u.Sandboxes)
		}
	})
}
