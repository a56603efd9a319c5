package reconciler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/computetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// Two replicas on one database (SQLite and PostgreSQL) and one compute: A
// stalls in a create past its lease (a frozen replica), B takes the record
// over. The tests step the drivers directly, through the worker's entry
// (stepLeased), so each replica's order of events is the test's.

// gated is a provider whose Creates wait until the test opens the gate:
// the one replica the test freezes.
type gated struct {
	*computetest.Fake
	entered chan string
	open    chan struct{}
}

func (g *gated) Create(ctx context.Context, spec compute.Spec) (compute.Instance, error) {
	select {
	case g.entered <- spec.RecordID:
	default: // nobody watches (the gate is open)
	}
	select {
	case <-g.open:
	case <-ctx.Done():
		return compute.Instance{}, ctx.Err()
	}
	return g.Fake.Create(ctx, spec)
}

type replicas struct {
	db   *store.DB // replica B's (each replica has its own store, and so its own cache)
	dbA  *store.DB
	fake *computetest.Fake
	gate *gated
	a, b *Reconciler
	org  string
}

// aTTL is the frozen replica's lease: short, so the take-over comes soon.
const aTTL = 400 * time.Millisecond

func newReplicas(t *testing.T, url string) *replicas {
	t.Helper()
	ctx := context.Background()
	open := func() *store.DB {
		db, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db, dbA := open(), open()
	org, _, err := db.EnsureOrg(ctx, "o1", 0)
	if err != nil {
		t.Fatal(err)
	}
	fake := computetest.New()
	gate := &gated{Fake: fake, entered: make(chan string, 16), open: make(chan struct{})}
	clock := NewFakeClock(time.Now())
	cfg := func(db *store.DB, p compute.Provider, id string, ttl time.Duration) Config {
		return Config{DB: db, Provider: p, Clock: clock, ReplicaID: id, LeaseTTL: ttl, Interval: 20 * time.Millisecond}
	}
	return &replicas{db: db, dbA: dbA, fake: fake, gate: gate, org: org.ID,
		a: New(cfg(dbA, gate, "replica-a", aTTL)), b: New(cfg(db, fake, "replica-b", 10*time.Second))}
}

func (g *replicas) insert(t *testing.T, id string) {
	t.Helper()
	now := time.Now()
	r := &store.Record{ID: id, OrgID: g.org, Kind: sandbox.KindRuntime, Provider: "fake", Phase: sandbox.PhasePending,
		TemplateID: "base", TimeoutSec: 3600, CreatedAt: now, EndAt: now.Add(time.Hour)}
	if err := g.db.InsertRecord(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func (g *replicas) get(t *testing.T, id string) *store.Record {
	t.Helper()
	r, err := g.db.FreshRecord(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// stallA starts replica A's step of id and returns when its create is held
// in the provider; the channel reports the step's end.
func (g *replicas) stallA(t *testing.T, id string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- g.a.stepLeased(context.Background(), g.a.sb, id, LaneCreate) }()
	select {
	case <-g.gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("replica A's create never reached the provider")
	}
	return done
}

// takeOver steps id on replica B until B has claimed it (A's lease lapsed)
// and driven it to a stable phase.
func (g *replicas) takeOver(t *testing.T, id string) *store.Record {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := g.b.stepLeased(context.Background(), g.b.sb, id, LaneCreate); err != nil {
			t.Fatalf("replica B's step: %v", err)
		}
		if r := g.get(t, id); !r.Phase.Transitional() {
			return r
		}
	}
	t.Fatalf("replica B never took %s over", id)
	return nil
}

func finish(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the stale replica's step: %v (a lost lease ends it quietly)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stale replica's step never ended")
	}
}

func TestLeaseStalledCreateIsTakenOverAndTheLateResultChangesNothing(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		g.insert(t, "sb1")
		done := g.stallA(t, "sb1")
		if err := g.b.stepLeased(context.Background(), g.b.sb, "sb1", LaneCreate); err != nil {
			t.Fatal(err)
		}
		if r := g.get(t, "sb1"); r.Phase != sandbox.PhaseCreating {
			t.Fatalf("replica B drove a record A holds: %s", r.Phase)
		}

		r := g.takeOver(t, "sb1")
		insts := g.fake.Instances()
		if r.Phase != sandbox.PhaseRunning || len(insts) != 1 || r.ProviderID != insts[0].Ref.ID {
			t.Fatalf("after the take-over: phase %s, provider id %q, instances %v", r.Phase, r.ProviderID, insts)
		}
		if owner, epoch, _, _ := g.db.LeaseOf(context.Background(), "sb1"); owner != "" || epoch != 2 {
			t.Fatalf("lease after B's step: owner %q epoch %d; want released at epoch 2", owner, epoch)
		}

		close(g.gate.open) // A wakes up and finishes its create
		finish(t, done)
		after := g.get(t, "sb1")
		if after.Version != r.Version || after.Phase != sandbox.PhaseRunning || after.ProviderID != r.ProviderID {
			t.Fatalf("the stale replica changed the record: version %d→%d, phase %s, provider id %q",
				r.Version, after.Version, after.Phase, after.ProviderID)
		}
		if n := g.fake.Calls("delete"); n != 0 {
			t.Fatalf("%d deletes: the stale replica removed what was made", n)
		}
		if insts := g.fake.Instances(); len(insts) != 1 || insts[0].Ref.ID != r.ProviderID {
			t.Fatalf("instances %v, want only %s", insts, r.ProviderID)
		}

		// Without names to make the two creates one (E2B), A's late create
		// is a second instance: the sweep removes it and keeps the record's.
		dup := g.fake.Put("sb1", compute.StatusRunning)
		if err := g.b.Observe(context.Background()); err != nil {
			t.Fatal(err)
		}
		insts = g.fake.Instances()
		if len(insts) != 1 || insts[0].Ref.ID != r.ProviderID {
			t.Fatalf("after the sweep: instances %v, want only the record's %s (not the duplicate %s)", insts, r.ProviderID, dup.ID)
		}
		if got := g.get(t, "sb1"); got.Phase != sandbox.PhaseRunning || got.Version != r.Version {
			t.Fatalf("removing the duplicate moved the record: %s v%d", got.Phase, got.Version)
		}
	})
}

func TestLeaseStaleReplicaDoesNotResurrectADeletedRecord(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		g.insert(t, "sb1")
		done := g.stallA(t, "sb1")
		g.takeOver(t, "sb1")
		ctx := context.Background()
		if _, err := g.db.Transition(ctx, "sb1", sandbox.PhaseStopping, sandbox.CauseUser, func(r *store.Record) error {
			r.StopAt(time.Now())
			r.KillReason = sandbox.KillDeleted
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		deleted := g.takeOver(t, "sb1")
		if deleted.Phase != sandbox.PhaseDeleted || len(g.fake.Instances()) != 0 {
			t.Fatalf("the delete: phase %s, instances %v", deleted.Phase, g.fake.Instances())
		}

		close(g.gate.open) // A's create now makes a new instance for a deleted record
		finish(t, done)
		after := g.get(t, "sb1")
		if after.Phase != sandbox.PhaseDeleted || after.Version != deleted.Version || after.ProviderID != deleted.ProviderID {
			t.Fatalf("the stale replica touched the deleted record: %s v%d→v%d provider id %q→%q",
				after.Phase, deleted.Version, after.Version, deleted.ProviderID, after.ProviderID)
		}
		// What its late create left is an orphan of an ended record: removed.
		if err := g.b.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		if insts := g.fake.Instances(); len(insts) != 0 {
			t.Fatalf("instances left after the sweep: %v", insts)
		}
	})
}

// A lease stops being trusted locally once its renewal is overdue, before
// the database lets another replica take it: no provider call then.
func TestLeaseOverdueRenewalForbidsProviderCalls(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		g.insert(t, "sb1")
		ctx := context.Background()
		f, release, ok, err := g.a.leases.acquire(ctx, "sb1")
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		defer release()
		fctx := store.WithFence(ctx, f)
		if err := g.a.MayAct(fctx); err != nil {
			t.Fatalf("fresh lease: %v", err)
		}
		for end := time.Now().Add(5 * time.Second); g.a.MayAct(fctx) == nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("an unrenewed lease stayed trusted")
			}
		}
		// Trust ends before the database's expiry: nobody could claim it yet.
		if _, ok, _ := g.db.ClaimLease(ctx, "sb1", "replica-b", time.Second); ok {
			t.Fatal("the lease was free in the database while replica A still trusted it")
		}
		if _, err := g.a.drive(fctx, "sb1"); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("driving under the lapsed lease: %v, want ErrLeaseLost", err)
		}
		// Through the public entry, a lapsed lease is the other replica's
		// business: no error, and the record as it is.
		if r, err := g.a.Drive(fctx, "sb1"); err != nil || r.Phase != sandbox.PhasePending {
			t.Fatalf("Drive under the lapsed lease: %v, %v; want the pending record, no error", r, err)
		}
		if n := g.fake.Calls("create"); n != 0 {
			t.Fatalf("%d creates under a lapsed lease", n)
		}
	})
}

// A running replica renews what it holds: a create longer than the lease
// stays its own, and the other replica never steps in.
func TestLeaseRenewalKeepsALongCreate(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go g.a.leases.renewLoop(ctx)
		g.insert(t, "sb1")
		done := g.stallA(t, "sb1")
		for end := time.Now().Add(3 * aTTL); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if err := g.b.stepLeased(context.Background(), g.b.sb, "sb1", LaneCreate); err != nil {
				t.Fatal(err)
			}
		}
		if n := g.fake.Calls("create"); n != 0 {
			t.Fatalf("replica B created %d instance(s) of a record A holds and renews", n)
		}
		close(g.gate.open)
		finish(t, done)
		if r := g.get(t, "sb1"); r.Phase != sandbox.PhaseRunning {
			t.Fatalf("A's create ended %s, want running", r.Phase)
		}
	})
}

// Two running replicas share a burst of creates: each record is created
// once, by whichever claimed it.
func TestLeaseTwoReplicasShareTheWork(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		close(g.gate.open)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const n = 30
		for i := range n {
			g.insert(t, fmt.Sprintf("sb%02d", i))
		}
		errs := make(chan error, 2)
		go func() { errs <- g.a.Run(ctx) }()
		go func() { errs <- g.b.Run(ctx) }()
		for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			running := 0
			for i := range n {
				if g.get(t, fmt.Sprintf("sb%02d", i)).Phase == sandbox.PhaseRunning {
					running++
				}
			}
			if running == n {
				break
			}
			if time.Now().After(end) {
				for i := range n {
					id := fmt.Sprintf("sb%02d", i)
					owner, epoch, exp, _ := g.db.LeaseOf(context.Background(), id)
					t.Logf("%s: %s lease %q/%d until %s", id, g.get(t, id).Phase, owner, epoch, exp)
				}
				t.Fatalf("%d of %d records running", running, n)
			}
		}
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if c, insts := g.fake.Calls("create"), len(g.fake.Instances()); c != n || insts != n {
			t.Fatalf("%d creates and %d instances for %d records: a record was driven twice", c, insts, n)
		}
	})
}

// An API request's Drive of a record another replica holds waits for it
// instead of driving it too, and drives it once the lease is given back.
func TestLeaseDriveWaitsForTheHolder(t *testing.T) {
	pgtest.EachDatabase(t, func(t *testing.T, url string) {
		g := newReplicas(t, url)
		g.insert(t, "sb1")
		ctx := context.Background()
		f, ok, err := g.db.ClaimLease(ctx, "sb1", "replica-a", time.Minute)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		r, err := g.b.Drive(short, "sb1")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || r == nil || r.Phase != sandbox.PhasePending || g.fake.Calls("create") != 0 {
			t.Fatalf("Drive of a held record: %v, %v, %d creates; want it waiting, the record untouched", r, err, g.fake.Calls("create"))
		}
		done := make(chan *store.Record, 1)
		go func() {
			r, err := g.b.Drive(ctx, "sb1")
			if err != nil {
				t.Errorf("Drive: %v", err)
			}
			done <- r
		}()
		if err := g.db.ReleaseLease(ctx, f); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r == nil || r.Phase != sandbox.PhaseRunning {
				t.Fatalf("after the holder let go, Drive returned %+v", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Drive never took the released record")
		}
	})
}

// A replica decides from the record as stored, not from its cache: B's
// cache still says creating when A has made the record running, and B's
// step then creates nothing. Only SQLite can hold the stale copy this needs:
// on PostgreSQL the listener refreshes B's cache and the read barrier makes
// B's read wait for it (store's listen tests); FreshRecord serves both.
func TestLeaseHolderReadsPastItsCache(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		url := filepath.Join(t.TempDir(), "db")
		g := newReplicas(t, url)
		close(g.gate.open)
		g.insert(t, "sb1")
		ctx := context.Background()
		if _, err := g.db.Transition(ctx, "sb1", sandbox.PhaseCreating, sandbox.CauseReconciler, func(r *store.Record) error {
			r.PhaseDeadline = time.Now().Add(time.Minute)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := g.a.stepLeased(ctx, g.a.sb, "sb1", LaneCreate); err != nil {
			t.Fatal(err)
		}
		if cached, _ := g.db.GetRecord(ctx, "sb1"); cached.Phase != sandbox.PhaseCreating {
			t.Fatalf("B's cache already says %s; the test needs it stale", cached.Phase)
		}
		if err := g.b.stepLeased(ctx, g.b.sb, "sb1", LaneCreate); err != nil {
			t.Fatal(err)
		}
		if n := g.fake.Calls("create"); n != 1 {
			t.Fatalf("%d creates: replica B acted on its stale cached copy", n)
		}
		if r := g.get(t, "sb1"); r.Phase != sandbox.PhaseRunning {
			t.Fatalf("record %s, want running", r.Phase)
		}
	})
}
