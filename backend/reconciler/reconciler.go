// Package reconciler drives sandbox records to the state their phase asks
// for. It is level-triggered: what happens next is decided by the record's
// phase and persisted deadlines in the database, never by an in-memory
// timer, so a restarted backend picks up exactly where a killed one stopped.
package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/keyed"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/notify"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Config tunes a Reconciler.
type Config struct {
	DB       *store.DB
	Provider compute.Provider
	Logger   *slog.Logger
	// Clock is where every decision reads time (RealClock when nil).
	Clock Clock
	// Interval is the sweep period for TTLs and transitional records.
	Interval time.Duration
	// ObserveEvery is how often instances are compared with the provider
	// (exits, disappearances, orphans) when no event arrives.
	ObserveEvery time.Duration
	// ImageGrace is how old an image the backend made (a fork's
	// checkpoint, a snapshot, a template build's) must be before the sweep
	// may take it for an orphan: between a commit and the record naming
	// it there is a moment no record does. Default 10 minutes.
	ImageGrace time.Duration
	// ImageSweepEvery is how often the orphan sweep lists images (at most
	// once an observation). Default a minute.
	ImageSweepEvery time.Duration
	// CreateDeadline bounds pending/creating; OpDeadline the other
	// transitional phases. Past them the record fails with a diagnostic.
	CreateDeadline time.Duration
	OpDeadline     time.Duration
	// Workers bounds concurrent provider operations started by the loop. They
	// are split into lanes (see lane) so that slow creates never hold up
	// deadline work: a quarter (at least 2) serve deadlines, CreateWorkers
	// creates, the rest pauses and resumes.
	Workers int
	// CreateWorkers bounds concurrent creates (default Workers/8, at least
	// 1). An engine serialises much of a create (Docker: names, networks),
	// so more of them at once only lengthen the queues inside it that every
	// other call, a removal included, then waits in.
	CreateWorkers int
	// RequeueDelay, when set, sends a create the provider refused for want of
	// room (compute.AtCapacity: E2B's 429) back to the admission queue to be
	// tried again after this delay instead of failing it. Zero fails it (no
	// admission queue to serve it).
	RequeueDelay time.Duration
	// OnChange is called after every committed transition (metrics, ledger).
	OnChange func(r *store.Record)
	// ReplicaID names this replica in the records' leases (lease.go); empty
	// is one id per process. Replicas of one database need distinct ids.
	ReplicaID string
	// LeaseTTL is how long a record's lease lasts unrenewed (DefaultLeaseTTL
	// when zero): the most a dead replica's records wait for another.
	LeaseTTL time.Duration
}

// Reconciler is the one loop that drives records of every kind, through a
// Driver per kind (see Register). It is itself the driver of compute-backed
// sandboxes (every kind but task) when Config.Provider is set.
type Reconciler struct {
	cfg      Config
	db       *store.DB
	prov     compute.Provider
	log      *slog.Logger
	locks    keyed.Mutex
	notes    notify.Hub
	runs     []*run
	sb       *run // the sandbox driver's
	sweepNow chan struct{}
	creating sync.Map    // id -> context.CancelFunc of its create in flight
	remote   chan string // kicks for other replicas' changes (remote.go)
	deadline inFlight    // deadline drives in flight: new creates wait for them
	leases   *leaseTable
	// imagesSwept is when the image sweep last ran (Unix nanoseconds).
	imagesSwept atomic.Int64
}

// New returns a Reconciler; call Run to start its loop.
func New(cfg Config) *Reconciler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.ImageGrace <= 0 {
		cfg.ImageGrace = 10 * time.Minute
	}
	if cfg.ImageSweepEvery <= 0 {
		cfg.ImageSweepEvery = time.Minute
	}
	if cfg.ObserveEvery <= 0 {
		cfg.ObserveEvery = 5 * time.Second
	}
	if cfg.CreateDeadline <= 0 {
		cfg.CreateDeadline = 2 * time.Minute
	}
	if cfg.OpDeadline <= 0 {
		cfg.OpDeadline = time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = processReplicaID()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	rc := &Reconciler{cfg: cfg, db: cfg.DB, prov: cfg.Provider, log: cfg.Logger, sweepNow: make(chan struct{}, 1),
		leases: newLeaseTable(cfg.DB, cfg.ReplicaID, cfg.LeaseTTL, cfg.Logger), remote: make(chan string, remoteKicks)}
	if cfg.Provider != nil {
		deadline := max(2, cfg.Workers/4)
		create := cfg.CreateWorkers
		if create <= 0 {
			create = max(1, cfg.Workers/8)
		}
		other := max(1, cfg.Workers-deadline-create)
		rc.Register(sandboxDriver{rc}, Lanes{Deadline: deadline, Create: create, Other: other, ObserveEvery: cfg.ObserveEvery})
		rc.sb = rc.runs[0]
	}
	return rc
}

func (rc *Reconciler) now() time.Time { return rc.cfg.Clock.Now().UTC() }

// Kick asks the loop to drive sandbox record id soon. It never blocks; a full queue is
// caught up by the next sweep.
func (rc *Reconciler) Kick(id string) {
	if rc.sb != nil {
		rc.sb.kick(id)
	}
}

// Subscribe returns a channel closed at id's next committed change, and a
// release to call when the caller stops waiting.
func (rc *Reconciler) Subscribe(id string) (<-chan struct{}, func()) { return rc.notes.Wait(id) }

// Changed reports a transition made outside the reconciler (API handlers,
// ledger) so waiters wake up.
func (rc *Reconciler) Changed(r *store.Record) {
	if r.Phase == sandbox.PhaseStopping || r.Phase.Terminal() {
		// A create still in flight is no longer wanted: stop waiting for the
		// engine so the stop can proceed (it removes whatever was made).
		if cancel, ok := rc.creating.Load(r.ID); ok {
			cancel.(context.CancelFunc)()
		}
	}
	rc.notes.Notify(r.ID)
	if rc.cfg.OnChange != nil {
		rc.cfg.OnChange(r)
	}
}

// Run recovers, then loops until ctx is done: every driver recovers what a
// killed process left, then the loop drives kicked records in their lanes,
// sweeps due ones every Interval (sooner when a TTL passes before it), and
// has each driver compare its runtime with its records every ObserveEvery
// (and on the runtime's events).
func (rc *Reconciler) Run(ctx context.Context) error {
	// The loop acts through version-checked transitions: its reads need not
	// wait for another replica's notifications to arrive (store.Relaxed).
	ctx = store.Relaxed(ctx)
	// The leases taken from recovery on are renewed for as long as the loop runs.
	renewCtx, stopRenewing := context.WithCancel(ctx)
	defer stopRenewing()
	go rc.leases.renewLoop(renewCtx)
	// Recovery only compares and repairs: the records a killed process left
	// in flight then go through the lanes, so a backlog of creates does not
	// hold up the deadlines that passed while no backend was up.
	for _, r := range rc.runs {
		if err := r.d.Recover(ctx); err != nil {
			return fmt.Errorf("start-up recovery of %s: %w", r.d.Name(), err)
		}
	}
	var wg sync.WaitGroup
	goes := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	for _, r := range rc.runs {
		for l, ln := range r.lanes {
			for range ln.workers {
				goes(func() { rc.work(ctx, r, Lane(l)) })
			}
		}
		// Observing lists every instance (slow under load): it runs beside
		// the sweep so due records are kicked on time whatever the runtime's pace.
		goes(func() { rc.observeLoop(ctx, r) })
		if w, ok := r.d.(Watching); ok {
			goes(func() { w.Watch(ctx) })
		}
	}
	goes(func() { rc.remoteKicker(ctx) })
	rc.sweepDue(ctx)
	sweep := time.NewTimer(rc.nextSweep(ctx))
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-sweep.C:
		case <-rc.sweepNow:
		}
		rc.sweepDue(ctx)
		sweep.Reset(rc.nextSweep(ctx))
	}
}

// maxYield bounds how long a create waits for deadline work, so a steady
// stream of deletes cannot starve creates.
const maxYield = 2 * time.Second

// yieldToDeadlines holds a new create back while deadline work is in flight
// (at most maxYield): the engine then serves removals without a queue of
// creates ahead of them.
func (rc *Reconciler) yieldToDeadlines(ctx context.Context) { rc.deadline.wait(ctx, maxYield) }

// sandboxDriver is the Driver of compute-backed sandbox records.
type sandboxDriver struct{ rc *Reconciler }

func (sandboxDriver) Name() string { return "sandboxes" }

// Recover compares the instances with the records; the records left in
// flight are then due and go through the lanes.
func (d sandboxDriver) Recover(ctx context.Context) error { return d.rc.Observe(ctx) }

func (d sandboxDriver) Observe(ctx context.Context) error { return d.rc.Observe(ctx) }

// Due lists the records owed work; an expired TTL's stop is committed at
// once (see decideExpiries).
func (d sandboxDriver) Due(ctx context.Context, now time.Time) ([]string, error) {
	ids, err := d.rc.db.DueRecords(ctx, now)
	if err != nil {
		return nil, err
	}
	d.rc.decideExpiries(ctx, ids)
	return ids, nil
}

// Lane sorts a record's pending work by what it is for (the record is
// usually cached, so this costs no query).
func (d sandboxDriver) Lane(ctx context.Context, id string) Lane {
	rc := d.rc
	r, err := rc.db.GetRecord(ctx, id)
	switch {
	case err != nil:
		return LaneOther
	case r.Phase == sandbox.PhaseStopping,
		(r.Phase == sandbox.PhaseRunning || r.Phase == sandbox.PhasePaused) && rc.expired(r):
		return LaneDeadline
	case r.Phase == sandbox.PhasePending || r.Phase == sandbox.PhaseCreating:
		return LaneCreate
	}
	return LaneOther
}

func (d sandboxDriver) Step(ctx context.Context, id string, l Lane) error {
	rc := d.rc
	if _, busy := rc.creating.Load(id); busy && l != LaneDeadline {
		// Its create is in flight and that Drive goes on until the record
		// is stable: waiting for its lock here would only take a worker from
		// the records behind (every sweep re-kicks it). Deadline work still
		// goes through: a stop cancels the create.
		return nil
	}
	switch l {
	case LaneDeadline:
		defer rc.deadline.begin()()
	case LaneCreate:
		rc.yieldToDeadlines(ctx)
	}
	_, err := rc.Drive(ctx, id)
	return err
}

// Watch follows the provider's events (a container's exit) when it pushes any.
func (d sandboxDriver) Watch(ctx context.Context) {
	w, ok := d.rc.prov.(compute.Watcher)
	if !ok {
		return
	}
	events := w.Watch(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.RecordID != "" {
				go d.rc.observeOne(ctx, ev.RecordID)
			}
		}
	}
}

// Recover runs at start-up: it compares what the provider runs with the
// records (adopting, completing or removing), then drives every record that
// a killed process left in a transitional phase, among those it can claim:
// the others are in the hands of live replicas.
func (rc *Reconciler) Recover(ctx context.Context) error {
	ctx = context.WithValue(ctx, recoveryKey{}, true)
	if err := rc.Observe(ctx); err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	ids, err := rc.db.DueRecords(ctx, rc.now())
	if err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	sem := make(chan struct{}, rc.cfg.Workers)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := rc.withLease(ctx, id, func(ctx context.Context) error { _, err := rc.drive(ctx, id); return err }); err != nil {
				rc.log.Error("recovering sandbox record failed; the sweep retries", "record", id, "err", err)
			}
		}()
	}
	wg.Wait()
	return nil
}

// recoveryKey marks the context of start-up recovery: the reconciler's own
// moves made then are recorded with cause recovery.
type recoveryKey struct{}

func recovering(ctx context.Context) bool {
	v, _ := ctx.Value(recoveryKey{}).(bool)
	return v
}

// errNoProgress ends a Drive loop: the record is stable for now.
var errNoProgress = errors.New("stable")
