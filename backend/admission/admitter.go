package admission

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// DefaultMaxQueue is how many creates an org may have queued at once.
const DefaultMaxQueue = 1000

// Config wires an Admitter.
type Config struct {
	DB *store.DB
	// Capacity is each provider's capacity, by provider name; a provider
	// without an entry is unlimited.
	Capacity map[string]Capacity
	// MaxQueue bounds each org's queue (DREADNODE_MAX_QUEUE); a create past
	// it is 429.
	MaxQueue int
	// RetryAfter is the Retry-After a 429 suggests.
	RetryAfter time.Duration
	// Interval is how often the queue is looked at without a wake-up (retry
	// delays, other replicas' frees).
	Interval time.Duration
	Logger   *slog.Logger
	// Admitted is told of every queued record admitted (now pending): the
	// reconciler's Changed and Kick.
	Admitted func(r *store.Record)
}

// Admitter places creates (start now or queue) and serves the queue.
type Admitter struct {
	cfg  Config
	wake chan struct{}

	mu         sync.Mutex // one dispatch pass at a time; guards the fields below
	lastServed map[string]uint64
	turn       uint64

	waits prometheus.Histogram
}

// New returns an Admitter; call Run to serve the queue.
func New(cfg Config) *Admitter {
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 10 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Admitted == nil {
		cfg.Admitted = func(*store.Record) {}
	}
	return &Admitter{cfg: cfg, wake: make(chan struct{}, 1), lastServed: map[string]uint64{},
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dreadnode_admission_wait_seconds",
			Help:    "Time from create to admission (0 for creates that had room at once).",
			Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900}}),
	}
}

// Wake asks the dispatcher to look at the queue soon (compute was freed or
// a create queued). It never blocks.
func (a *Admitter) Wake() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Changed is the reconciler's hook: a record that ended frees its compute;
// one put back in the queue wants a pass.
func (a *Admitter) Changed(r *store.Record) {
	if r.Phase.Terminal() || r.Phase == sandbox.PhaseQueued {
		a.Wake()
	}
}

// Capacity is the configured capacity of provider (zero: unlimited).
func (a *Admitter) Capacity(provider string) Capacity { return a.cfg.Capacity[provider] }

// Place decides, inside the create's transaction, whether r starts now
// (phase pending) or waits in the queue (phase queued). A create that could
// never fit is a 400 naming the limit; a full queue is a 429.
func (a *Admitter) Place(ctx context.Context, tx *sql.Tx, r *store.Record) error {
	q, err := QuotasOf(ctx, tx, r.OrgID)
	if err != nil {
		return err
	}
	it := Item{ID: r.ID, Org: r.OrgID, Provider: r.Provider, CPU: r.CPUCount, MemoryMB: r.MemoryMB}
	if err := a.fitsAlone(q, it); err != nil {
		return err
	}
	// What follows reads counts and decides from them: serialise it with
	// every other decision on this org (its queue bound, its quotas) and,
	// when the provider is limited, on this provider's capacity.
	if err := a.lock(ctx, tx, []Item{it}); err != nil {
		return err
	}
	var orgQueued, anyQueued int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE `+isQueued+` AND org_id = ?`, r.OrgID).Scan(&orgQueued); err != nil {
		return err
	}
	if orgQueued >= a.cfg.MaxQueue {
		secs := int(a.cfg.RetryAfter / time.Second)
		return &domain.QueueFullError{RetryAfter: a.cfg.RetryAfter, Detail: fmt.Sprintf(
			"the organization already has %d creates queued (the limit, DREADNODE_MAX_QUEUE); retry after %d s, or delete sandboxes to make room",
			orgQueued, secs)}
	}
	if orgQueued == 0 {
		// Others' queued creates go first when room frees up: a new create
		// starts at once only when nobody waits.
		// (PostgreSQL before 16 wants an alias for a subquery in FROM.)
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM sandboxes WHERE `+isQueued+` LIMIT 1) AS q`).Scan(&anyQueued); err != nil {
			return err
		}
	}
	if orgQueued == 0 && anyQueued == 0 {
		fits, err := a.fitsNow(ctx, tx, q, it)
		if err != nil {
			return err
		}
		if fits {
			r.Phase = sandbox.PhasePending
			a.waits.Observe(0)
			return nil
		}
	}
	r.Phase = sandbox.PhaseQueued
	// On SQLite the pass waits for this transaction (one writer) and sees
	// it. On PostgreSQL a pass running before the commit does not see it:
	// the caller wakes the dispatcher again after its commit (lifecycle's
	// Create), and the next tick would anyway.
	a.Wake()
	return nil
}

// lock serialises the admission decisions about the orgs and the limited
// providers of items until tx ends. SQLite needs nothing (DB.Tx runs one
// writer at a time, and store.LockTx does nothing there); on PostgreSQL
// (READ COMMITTED) two transactions could otherwise both count the same
// free slot (a create and a pass, or passes of two replicas) and overrun
// a quota, a capacity or the queue bound. The locks are taken in one
// global order (orgs, then providers, each sorted) so that two decisions
// needing several of them cannot deadlock.
func (a *Admitter) lock(ctx context.Context, tx *sql.Tx, items []Item) error {
	orgs, providers := map[string]bool{}, map[string]bool{}
	for _, it := range items {
		orgs[it.Org] = true
		if !a.cfg.Capacity[it.Provider].unlimited() {
			providers[it.Provider] = true
		}
	}
	for _, k := range []struct {
		kind string
		set  map[string]bool
	}{{"org", orgs}, {"provider", providers}} {
		for _, name := range slices.Sorted(maps.Keys(k.set)) {
			if err := store.LockTx(ctx, tx, "admission", k.kind, name); err != nil {
				return fmt.Errorf("waiting for the admission lock of %s %s: %w", k.kind, name, err)
			}
		}
	}
	return nil
}

func (a *Admitter) fitsAlone(q Quotas, it Item) error {
	type limit struct {
		field, name string
		max         *int
		want        int
		unit        string
	}
	c := a.cfg.Capacity[it.Provider]
	pos := func(n int) *int {
		if n <= 0 {
			return nil
		}
		return &n
	}
	for _, l := range []limit{
		{"resources.cpuCount", "the organization's max_running quota", q.MaxRunning, 1, "sandboxes"},
		{"resources.cpuCount", "the organization's max_cpu quota", q.MaxCPU, it.CPU, "CPUs"},
		{"resources.memoryMB", "the organization's max_memory_mb quota", q.MaxMemoryMB, it.MemoryMB, "MB"},
		{"resources.cpuCount", "the " + it.Provider + " provider's CPU capacity (DREADNODE_CAPACITY_CPU)", pos(c.CPU), it.CPU, "CPUs"},
		{"resources.memoryMB", "the " + it.Provider + " provider's memory capacity (DREADNODE_CAPACITY_MEMORY_MB)", pos(c.MemoryMB), it.MemoryMB, "MB"},
	} {
		if l.max != nil && l.want > *l.max {
			if l.unit == "sandboxes" {
				return &domain.QuotaExceededError{Detail: "max_running: the organization's max_running quota is 0, so it may not run sandboxes; ask an operator to raise it (dreadnode-backend quotas set)"}
			}
			return domain.Invalid(l.field, fmt.Sprintf("asks for %d %s but %s is %d %s, so it could never start; ask for less or ask an operator to raise the limit",
				l.want, l.unit, l.name, *l.max, l.unit))
		}
	}
	return nil
}

func within(max *int, n int) bool { return max == nil || n <= *max }

// allowed reports whether use u stays within quotas q.
func allowed(q Quotas, u Use) bool {
	return within(q.MaxRunning, u.Sandboxes) && within(q.MaxCPU, u.CPU) && within(q.MaxMemoryMB, u.MemoryMB)
}

func (c Capacity) allow(u Use) bool {
	return (c.Sandboxes <= 0 || u.Sandboxes <= c.Sandboxes) && (c.CPU <= 0 || u.CPU <= c.CPU) &&
		(c.MemoryMB <= 0 || u.MemoryMB <= c.MemoryMB)
}

func (c Capacity) unlimited() bool { return c.Sandboxes <= 0 && c.CPU <= 0 && c.MemoryMB <= 0 }

func (a *Admitter) fitsNow(ctx context.Context, tx *sql.Tx, q Quotas, it Item) (bool, error) {
	if q != (Quotas{}) {
		u, err := UseOf(ctx, tx, it.Org)
		if err != nil {
			return false, err
		}
		if !allowed(q, u.plus(it)) {
			return false, nil
		}
	}
	c := a.cfg.Capacity[it.Provider]
	if c.unlimited() {
		return true, nil
	}
	var u Use
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(cpu_count), 0), COALESCE(SUM(memory_mb), 0)
		FROM sandboxes WHERE provider = ? AND phase IN `+holding, it.Provider).Scan(&u.Sandboxes, &u.CPU, &u.MemoryMB)
	if err != nil {
		return false, err
	}
	return c.allow(u.plus(it)), nil
}

// Run serves the queue until ctx ends: a pass on every wake-up and every
// Interval.
func (a *Admitter) Run(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := a.Pass(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("serving the admission queue failed; retrying shortly", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.wake:
		case <-t.C:
		}
	}
}

// Pass admits every queued create that fits now, fairly (see Order), and
// returns how many it admitted. The decision and the admissions are one
// write transaction, so they never race a create or another pass.
func (a *Admitter) Pass(ctx context.Context) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var admitted []*store.Record
	err := a.cfg.DB.Tx(ctx, func(tx *sql.Tx) error {
		admitted = nil
		items, notBefore, err := queuedItems(ctx, tx)
		if err != nil || len(items) == 0 {
			return err
		}
		// The usage read next, and the admissions decided from it, must
		// not interleave with a create placed (or another replica's pass)
		// for the same orgs and limited providers.
		if err := a.lock(ctx, tx, items); err != nil {
			return err
		}
		use, err := usageOf(ctx, tx)
		if err != nil {
			return err
		}
		quotas := map[string]Quotas{}
		now := time.Now().UnixNano()
		var qerr error
		picked := Order(items, a.lastServed, func(it Item) Verdict {
			if notBefore[it.ID] > now {
				return OrgBlocked // requeued after a provider's 429: wait its delay
			}
			q, ok := quotas[it.Org]
			if !ok {
				if q, err = QuotasOf(ctx, tx, it.Org); err != nil {
					qerr = err
					return OrgBlocked
				}
				quotas[it.Org] = q
			}
			okey, pk := usageKey{org: it.Org}, usageKey{provider: it.Provider}
			if !allowed(q, use[okey].plus(it)) {
				return OrgBlocked
			}
			if !a.cfg.Capacity[it.Provider].allow(use[pk].plus(it)) {
				return ProviderBlocked
			}
			use[okey], use[pk] = use[okey].plus(it), use[pk].plus(it)
			return Fits
		})
		if qerr != nil {
			return qerr
		}
		for _, it := range picked {
			r, err := store.TransitionTx(ctx, tx, it.ID, sandbox.PhasePending, sandbox.CauseAdmission, func(r *store.Record) error {
				r.PhaseDeadline = time.Time{}
				return nil
			})
			if errors.Is(err, store.ErrConflict) {
				continue // deleted meanwhile
			}
			if err != nil {
				return err
			}
			admitted = append(admitted, r)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	for _, r := range admitted {
		a.turn++
		a.lastServed[r.OrgID] = a.turn
		a.waits.Observe(now.Sub(r.CreatedAt).Seconds())
		a.cfg.Admitted(r)
	}
	return len(admitted), nil
}

func queuedItems(ctx context.Context, tx *sql.Tx) ([]Item, map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, org_id, provider, seq, cpu_count, memory_mb, COALESCE(phase_deadline, 0)
		FROM sandboxes WHERE `+isQueued+` ORDER BY seq`)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var items []Item
	notBefore := map[string]int64{}
	for rows.Next() {
		var it Item
		var nb int64
		if err := rows.Scan(&it.ID, &it.Org, &it.Provider, &it.Seq, &it.CPU, &it.MemoryMB, &nb); err != nil {
			return nil, nil, err
		}
		items = append(items, it)
		if nb > 0 {
			notBefore[it.ID] = nb
		}
	}
	return items, notBefore, rows.Err()
}

// Position is r's place in its org's queue (1 = next), 0 when not queued.
func Position(ctx context.Context, q querier, r *store.Record) (int, error) {
	if r.Phase != sandbox.PhaseQueued {
		return 0, nil
	}
	var n int
	err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM sandboxes WHERE org_id = ? AND `+isQueued+` AND seq <= ?`, r.OrgID, r.Seq).Scan(&n)
	return n, err
}
