package reconciler

import (
	"context"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// A Driver drives the records of one kind (compute-backed sandboxes, task
// environments) to the state their persisted phase asks for. The Reconciler
// owns the one loop around every driver: start-up recovery, the deadline
// sweep that asks each driver what is due, the lanes that run the steps,
// and the periodic observation of the runtime (exits, orphans).
type Driver interface {
	// Name names the kind in logs ("sandboxes", "task environments").
	Name() string
	// Recover runs once before the loop starts: it compares the runtime
	// with the records a killed process left (adopting, failing, removing).
	// What is still owed work afterwards is found by Due.
	Recover(ctx context.Context) error
	// Due lists the ids owed work at now: transitional phases and passed
	// deadlines (TTLs, phase deadlines). It may commit decisions that need
	// no runtime call (a TTL's stop dated at its end), so they hold from
	// that moment whatever the lanes' backlog.
	Due(ctx context.Context, now time.Time) ([]string, error)
	// Lane sorts id's pending work (see Lane).
	Lane(ctx context.Context, id string) Lane
	// Step drives id until it is stable for now; lane is where the work was
	// queued.
	Step(ctx context.Context, id string, lane Lane) error
	// Observe compares the runtime with the records: an instance that
	// exited or vanished, an orphan whose record is over.
	Observe(ctx context.Context) error
}

// A Watching driver follows the runtime's own events for as long as the
// loop runs (Watch returns when ctx is done); the periodic Observe remains,
// so a missed event only delays a transition.
type Watching interface {
	Watch(ctx context.Context)
}

// Lane is the queue a record's work waits in. Work is sorted by what it is
// for, so a burst of slow creates cannot delay a TTL expiry, a credit kill
// or a delete: each kind of work makes at most its lane's number of runtime
// calls at once.
type Lane int

// The lanes.
const (
	LaneDeadline Lane = iota // stops, expiries, deadlines passed
	LaneCreate               // creates, builds, provisions
	LaneOther                // pauses, resumes
	laneCount
)

var laneNames = [laneCount]string{"deadline", "create", "other"}

// Lanes sizes a driver's lanes (workers per lane) and its observation period.
type Lanes struct {
	Deadline, Create, Other int
	// ObserveEvery is the period of the driver's Observe.
	ObserveEvery time.Duration
}

// lane is a queue of ids with workers of its own.
type lane struct {
	name    string
	kicks   chan string
	queued  sync.Map // id -> struct{}: de-duplicates kicks
	workers int
}

// run is one registered driver with its lanes.
type run struct {
	d            Driver
	lanes        [laneCount]*lane
	observeEvery time.Duration
}

func newRun(d Driver, l Lanes) *run {
	r := &run{d: d, observeEvery: l.ObserveEvery}
	for i, n := range [laneCount]int{l.Deadline, l.Create, l.Other} {
		r.lanes[i] = &lane{name: laneNames[i], kicks: make(chan string, 4096), workers: max(1, n)}
	}
	return r
}

// kick queues id in the lane the driver sorts it into. It never blocks; a
// full queue is caught up by the next sweep.
func (r *run) kick(id string) {
	// A lane is a sort, not a decision: a cached copy will do.
	l := r.lanes[r.d.Lane(store.Relaxed(context.Background()), id)]
	if _, dup := l.queued.LoadOrStore(id, struct{}{}); dup {
		return
	}
	select {
	case l.kicks <- id:
	default:
		l.queued.Delete(id)
	}
}

// Register adds a driver to the loop (before Run) and returns the function
// that queues one of its ids for a step.
func (rc *Reconciler) Register(d Driver, l Lanes) (kick func(id string)) {
	if l.ObserveEvery <= 0 {
		l.ObserveEvery = rc.cfg.ObserveEvery
	}
	r := newRun(d, l)
	rc.runs = append(rc.runs, r)
	return r.kick
}

// SweepSoon asks the loop for a deadline sweep now (e.g. after a test moved
// its clock); it never blocks.
func (rc *Reconciler) SweepSoon() {
	select {
	case rc.sweepNow <- struct{}{}:
	default:
	}
}

func (rc *Reconciler) work(ctx context.Context, r *run, l Lane) {
	ln := r.lanes[l]
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-ln.kicks:
			ln.queued.Delete(id)
			if err := rc.stepLeased(ctx, r, id, l); err != nil && ctx.Err() == nil {
				rc.log.Error("driving a record failed; the next sweep retries", "driver", r.d.Name(), "record", id, "lane", ln.name, "err", err)
			}
		}
	}
}

func (rc *Reconciler) observeLoop(ctx context.Context, r *run) {
	t := time.NewTicker(r.observeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := r.d.Observe(ctx); err != nil && ctx.Err() == nil {
				rc.log.Warn("comparing the runtime with the records failed; retrying next period", "driver", r.d.Name(), "err", err)
			}
		}
	}
}

// sweepDue is the one deadline sweep: every driver lists what is due and
// its ids go to their lanes.
func (rc *Reconciler) sweepDue(ctx context.Context) {
	now := rc.now()
	for _, r := range rc.runs {
		ids, err := r.d.Due(ctx, now)
		if err != nil {
			if ctx.Err() == nil {
				rc.log.Warn("listing due records failed", "driver", r.d.Name(), "err", err)
			}
			continue
		}
		for _, id := range ids {
			r.kick(id)
		}
	}
}
