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

	"github.com/dreadnode/terraform-provider-dreadnode/backend/keyed"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/notify"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/provider"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Config tunes a Reconciler.
type Config struct {
	DB       *store.DB
	Provider provider.Provider
	Logger   *slog.Logger
	Now      func() time.Time
	// Interval is the sweep period for TTLs and transitional records.
	Interval time.Duration
	// ObserveEvery is how often instances are compared with the provider
	// (exits, disappearances, orphans) when no event arrives.
	ObserveEvery time.Duration
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
	// room (provider.AtCapacity: E2B's 429) back to the admission queue to be
	// tried again after this delay instead of failing it. Zero fails it (no
	// admission queue to serve it).
	RequeueDelay time.Duration
	// OnChange is called after every committed transition (metrics, ledger).
	OnChange func(r *store.Record)
}

// Reconciler owns the sandbox records of every kind but task.
type Reconciler struct {
	cfg      Config
	db       *store.DB
	prov     provider.Provider
	log      *slog.Logger
	locks    keyed.Mutex
	notes    notify.Hub
	lanes    [laneCount]*lane
	creating sync.Map     // id -> context.CancelFunc of its create in flight
	deadline atomic.Int64 // deadline drives in flight: new creates wait for them
}

// A lane is a queue of records with workers of its own. Work is sorted by
// what it is for, so a burst of creates blocked in the engine cannot delay
// a TTL expiry, a credit kill or a delete: each kind of work makes at most
// its lane's number of engine calls at once.
type lane struct {
	name    string
	kicks   chan string
	queued  sync.Map // id -> struct{}: de-duplicates kicks
	workers int
}

const (
	laneDeadline = iota // stopping records and expired TTLs
	laneCreate          // pending and creating records
	laneOther           // pauses, resumes
	laneCount
)

// New returns a Reconciler; call Run to start its loop.
func New(cfg Config) *Reconciler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
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
	rc := &Reconciler{cfg: cfg, db: cfg.DB, prov: cfg.Provider, log: cfg.Logger}
	deadline := max(2, cfg.Workers/4)
	create := cfg.CreateWorkers
	if create <= 0 {
		create = max(1, cfg.Workers/8)
	}
	other := max(1, cfg.Workers-deadline-create)
	for i, l := range []struct {
		name    string
		workers int
	}{{"deadline", deadline}, {"create", create}, {"other", other}} {
		rc.lanes[i] = &lane{name: l.name, kicks: make(chan string, 4096), workers: l.workers}
	}
	return rc
}

// laneOf sorts a record's pending work by what it is for (the record is
// usually cached, so this costs no query).
func (rc *Reconciler) laneOf(id string) *lane {
	r, err := rc.db.GetRecord(context.Background(), id)
	switch {
	case err != nil:
		return rc.lanes[laneOther]
	case r.Phase == store.PhaseStopping,
		(r.Phase == store.PhaseRunning || r.Phase == store.PhasePaused) && rc.expired(r):
		return rc.lanes[laneDeadline]
	case r.Phase == store.PhasePending || r.Phase == store.PhaseCreating:
		return rc.lanes[laneCreate]
	}
	return rc.lanes[laneOther]
}

func (rc *Reconciler) now() time.Time { return rc.cfg.Now().UTC() }

// Kick asks the loop to drive id soon. It never blocks; a full queue is
// caught up by the next sweep.
func (rc *Reconciler) Kick(id string) {
	l := rc.laneOf(id)
	if _, dup := l.queued.LoadOrStore(id, struct{}{}); dup {
		return
	}
	select {
	case l.kicks <- id:
	default:
		l.queued.Delete(id)
	}
}

// Subscribe returns a channel closed at id's next committed change, and a
// release to call when the caller stops waiting.
func (rc *Reconciler) Subscribe(id string) (<-chan struct{}, func()) { return rc.notes.Wait(id) }

// Changed reports a transition made outside the reconciler (API handlers,
// ledger) so waiters wake up.
func (rc *Reconciler) Changed(r *store.Record) {
	if r.Phase == store.PhaseStopping || r.Phase.Terminal() {
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

// Run recovers, then loops until ctx is done: it drives kicked records,
// sweeps due ones every Interval, and compares instances with records every
// ObserveEvery (and whenever the provider pushes an event).
func (rc *Reconciler) Run(ctx context.Context) error {
	// Start-up recovery as in Recover, but the records a killed process left
	// in flight go through the lanes: a backlog of creates must not hold up
	// the deadlines that passed while no backend was up.
	if err := rc.Observe(ctx); err != nil {
		return fmt.Errorf("start-up recovery: %w", err)
	}
	var wg sync.WaitGroup
	for _, l := range rc.lanes {
		for range l.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc.work(ctx, l)
			}()
		}
	}
	// Observing lists every instance (slow under load): it runs beside the
	// sweep so due records are kicked on time whatever the engine's pace.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rc.observeLoop(ctx)
	}()
	rc.sweepDue(ctx)
	sweep := time.NewTicker(rc.cfg.Interval)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-sweep.C:
			rc.sweepDue(ctx)
		}
	}
}

func (rc *Reconciler) work(ctx context.Context, l *lane) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-l.kicks:
			l.queued.Delete(id)
			if _, busy := rc.creating.Load(id); busy && l != rc.lanes[laneDeadline] {
				// Its create is in flight and that Drive goes on until the
				// record is stable: waiting for its lock here would only take
				// a worker from the records behind (every sweep re-kicks it).
				// Deadline work still goes through: a stop cancels the create.
				continue
			}
			switch l {
			case rc.lanes[laneDeadline]:
				rc.deadline.Add(1)
			case rc.lanes[laneCreate]:
				rc.yieldToDeadlines(ctx)
			}
			if _, err := rc.Drive(ctx, id); err != nil && ctx.Err() == nil {
				rc.log.Error("driving sandbox record failed; the next sweep retries", "record", id, "lane", l.name, "err", err)
			}
			if l == rc.lanes[laneDeadline] {
				rc.deadline.Add(-1)
			}
		}
	}
}

// maxYield bounds how long a create waits for deadline work, so a steady
// stream of deletes cannot starve creates.
const maxYield = 2 * time.Second

// yieldToDeadlines holds a new create back while deadline work is in flight
// (at most maxYield): the engine then serves removals without a queue of
// creates ahead of them.
func (rc *Reconciler) yieldToDeadlines(ctx context.Context) {
	for end := time.Now().Add(maxYield); rc.deadline.Load() > 0 && time.Now().Before(end) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond) // a short poll: the engine works at a far coarser pace
	}
}

func (rc *Reconciler) observeLoop(ctx context.Context) {
	var events <-chan provider.Event
	if w, ok := rc.prov.(provider.Watcher); ok {
		events = w.Watch(ctx)
	}
	observe := time.NewTicker(rc.cfg.ObserveEvery)
	defer observe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-observe.C:
			if err := rc.Observe(ctx); err != nil && ctx.Err() == nil {
				rc.log.Warn("comparing instances with records failed; retrying next period", "err", err)
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.RecordID != "" {
				go rc.observeOne(ctx, ev.RecordID)
			}
		}
	}
}

func (rc *Reconciler) sweepDue(ctx context.Context) {
	ids, err := rc.db.DueRecords(ctx, rc.now())
	if err != nil {
		if ctx.Err() == nil {
			rc.log.Warn("listing due sandbox records failed", "err", err)
		}
		return
	}
	for _, id := range ids {
		rc.decideExpiry(ctx, id)
		rc.Kick(id)
	}
}

// decideExpiry commits the stop of an expired sandbox at once (a database
// write, no engine call), so it counts as ended in every view from its
// endAt on, however busy the workers that remove instances are.
func (rc *Reconciler) decideExpiry(ctx context.Context, id string) {
	r, err := rc.db.GetRecord(ctx, id)
	if err != nil || r.AutoPause || !rc.expired(r) || (r.Phase != store.PhaseRunning && r.Phase != store.PhasePaused) {
		return
	}
	r, err = rc.db.Transition(ctx, id, []store.Phase{store.PhaseRunning, store.PhasePaused}, store.PhaseStopping, func(r *store.Record) error {
		if r.AutoPause || !rc.expired(r) { // extended meanwhile
			return errNoProgress
		}
		r.StopAt(r.EndAt)
		r.KillReason = store.KillTimeout
		return nil
	})
	switch {
	case err == nil:
		rc.Changed(r)
	case !errors.Is(err, store.ErrConflict) && !errors.Is(err, errNoProgress) && ctx.Err() == nil:
		rc.log.Warn("stopping an expired sandbox failed; the next sweep retries", "record", id, "err", err)
	}
}

// Recover runs at start-up: it compares what the provider runs with the
// records (adopting, completing or removing), then drives every record that
// a killed process left in a transitional phase.
func (rc *Reconciler) Recover(ctx context.Context) error {
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
			if _, err := rc.Drive(ctx, id); err != nil {
				rc.log.Error("recovering sandbox record failed; the sweep retries", "record", id, "err", err)
			}
		}()
	}
	wg.Wait()
	return nil
}

// errNoProgress ends a Drive loop: the record is stable for now.
var errNoProgress = errors.New("stable")
