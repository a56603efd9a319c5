// Package tasks serves the task catalog and task environments (API §3, seed
// 000): POST /environments answers at once with state "building"; a worker
// builds the task's images (cached by content hash), provisions the compose
// project on Docker (a private network per environment, services in
// dependency order, ports on 127.0.0.1) and marks it ready; the
// reconciler, through this package's driver, expires, recovers and
// garbage-collects environments from what the database says. Each environment is backed by a ledger record of kind task.
package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/taskenv"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/notify"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/catalog"
)

// Defaults of Config.
const (
	DefaultBuildDeadline     = 15 * time.Minute
	DefaultReadyDeadline     = 3 * time.Minute
	DefaultSweepInterval     = time.Second
	DefaultMinTimeoutSec     = 60
	DefaultMaxTimeoutSec     = 86400
	DefaultTimeoutSec        = 3600
	DefaultMaxWait           = 60 * time.Second
	DefaultMaxExecOutput     = 1 << 20
	DefaultExecTimeoutSec    = apitypes.TaskExecRequestTimeoutSecDefault // the document's bounds
	MaxExecTimeoutSec        = apitypes.TaskExecRequestTimeoutSecMaximum
	DefaultMaxConcurrentJobs = 16
	DefaultCatalogDir        = "tasks" // DREADNODE_TASKS_DIR's default
)

// Config configures a Service. Zero values take the defaults above.
type Config struct {
	DB *store.DB
	// CatalogDir is the task catalog (DREADNODE_TASKS_DIR, read by the
	// backend's configuration); "" is DefaultCatalogDir.
	CatalogDir string
	Logger     *slog.Logger
	// Now is the clock (tests move it to expire environments).
	Now func() time.Time

	// BuildDeadline bounds the building state (all image builds of one
	// environment); ReadyDeadline bounds provisioning (services up and
	// healthy). Past them the environment fails.
	BuildDeadline time.Duration
	ReadyDeadline time.Duration
	// SweepInterval is the period of the driver's observation (dead
	// services, orphans) and, when Run drives the environments on its own
	// reconciler, of its deadline sweep (expiry, deadlines, credits kills).
	SweepInterval time.Duration
	// MinTimeoutSec..MaxTimeoutSec bound an environment's timeout_sec
	// (default 60..86400, DREADNODE_MIN_TIMEOUT_SEC may lower the minimum);
	// DefaultTimeoutSec applies when the request has none (3600).
	MinTimeoutSec     int
	MaxTimeoutSec     int
	DefaultTimeoutSec int
	// MaxWait bounds GET /status?wait= (60 s).
	MaxWait time.Duration
	// MaxConcurrentJobs bounds environments building/provisioning at once
	// (the size of the build pool, off the reconciler's lanes).
	MaxConcurrentJobs int
	// Admit, when set, is asked before an environment is created (e.g. the
	// org's credits); the error it returns (a domain error) is the answer.
	Admit func(ctx context.Context, orgID string) error
	// Admission, when set, places each environment against the org's
	// quotas and the provider's capacity (§7): one that fits but not now
	// waits in the queue, building nothing, until it is admitted.
	Admission Admission
	// Groups makes the group provider the environments run on (required;
	// the app passes compute/docker's or compute/e2b's). The Service closes
	// what it returns.
	Groups func(GroupsFor) (Engine, error)
	// Committer checkpoints services for Fork (nil: forks answer 503).
	Committer compute.Committer
}

// GroupsFor is what the Service asks of its group provider.
type GroupsFor struct {
	// Owner labels every resource of this database's environments (its
	// deployment id): only those are adopted or collected.
	Owner string
	// BuildTimeout bounds one image build (Config.BuildDeadline).
	BuildTimeout time.Duration
	Logger       *slog.Logger
}

// Service is the task catalog and environment service.
type Service struct {
	cfg     Config
	db      *store.DB
	log     *slog.Logger
	now     func() time.Time
	catalog *catalog.Catalog
	engine  Engine
	// providerName is the ledger record's provider ("docker", "e2b").
	providerName string
	owner        string
	hub          notify.Hub // per environment id: state changed
	// rc is the reconciler driving the environments (Attach), kickEnv its
	// queue for one of them.
	rc      *reconciler.Reconciler
	kickEnv func(id string)

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	workers map[string]*worker
	// pool bounds the workers building or provisioning at once (Config.MaxConcurrentJobs).
	pool   chan struct{}
	locks  map[string]*envLock
	wg     sync.WaitGroup // workers
	runs   sync.WaitGroup // Run loops
	closed bool
	// dockerDown: the last sweep could not list Docker resources.
	dockerDown bool
	// sizes are the environments' footprints for admission (admission.go).
	sizes footprints
}

type worker struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

type envLock struct {
	mu   sync.Mutex
	refs int
}

// Errors used as cancellation causes of a worker.
var (
	errShutdown = errors.New("the backend is shutting down")
	errStopped  = errors.New("the environment was torn down")
)

// deadlineError is the cause of a worker whose persisted deadline passed; it
// is a context.DeadlineExceeded so the engine describes what was not ready.
type deadlineError struct{ state taskenv.State }

func (e deadlineError) Error() string { return string(e.state) + " deadline exceeded" }

func (e deadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// New opens the catalog and connects to Docker; the tables come with the
// store's schema.
func New(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("tasks: Config.DB is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CatalogDir == "" {
		cfg.CatalogDir = DefaultCatalogDir
	}
	setDefault(&cfg.BuildDeadline, DefaultBuildDeadline)
	setDefault(&cfg.ReadyDeadline, DefaultReadyDeadline)
	setDefault(&cfg.SweepInterval, DefaultSweepInterval)
	setDefault(&cfg.MaxWait, DefaultMaxWait)
	setDefault(&cfg.MinTimeoutSec, DefaultMinTimeoutSec)
	setDefault(&cfg.MaxTimeoutSec, DefaultMaxTimeoutSec)
	setDefault(&cfg.DefaultTimeoutSec, DefaultTimeoutSec)
	setDefault(&cfg.MaxConcurrentJobs, DefaultMaxConcurrentJobs)
	if cfg.MinTimeoutSec > cfg.MaxTimeoutSec {
		return nil, fmt.Errorf("tasks: MinTimeoutSec %d exceeds MaxTimeoutSec %d", cfg.MinTimeoutSec, cfg.MaxTimeoutSec)
	}
	cfg.DefaultTimeoutSec = min(max(cfg.DefaultTimeoutSec, cfg.MinTimeoutSec), cfg.MaxTimeoutSec)

	ctx := context.Background()
	owner, err := cfg.DB.DeploymentID(ctx)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	cat, err := catalog.Open(ctx, cfg.CatalogDir, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	if cfg.Groups == nil {
		return nil, errors.New("tasks: Config.Groups is required")
	}
	eng, err := cfg.Groups(GroupsFor{Owner: owner, BuildTimeout: cfg.BuildDeadline, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	name := "docker"
	if n, ok := eng.(Named); ok {
		name = n.Name()
	}
	s := &Service{cfg: cfg, db: cfg.DB, log: cfg.Logger, catalog: cat, engine: eng, providerName: name, owner: owner,
		workers: map[string]*worker{}, pool: make(chan struct{}, cfg.MaxConcurrentJobs), locks: map[string]*envLock{}}
	s.now = func() time.Time { return cfg.Now().UTC() }
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Catalog is the task catalog.
func (s *Service) Catalog() *catalog.Catalog { return s.catalog }

// Runtime is the engine the environments run on.
func (s *Service) Runtime() Engine { return s.engine }

// Owner labels every Docker resource of this database
// (dev.dreadnode.tasks.owner=<the database's deployment id>).
func (s *Service) Owner() string { return s.owner }

// Builds is the number of image builds this Service ran; cache hits do not count.
func (s *Service) Builds() int64 { return s.engine.Builds() }

// Ping reports whether the engine (Docker, E2B) answers (for /readyz).
func (s *Service) Ping(ctx context.Context) error { return s.engine.Ping(ctx) }

// Attach registers the environments' driver on rc, the one reconciler of
// the backend: its loop then recovers, sweeps and drives them. Call it once,
// before rc runs.
func (s *Service) Attach(rc *reconciler.Reconciler) {
	s.rc = rc
	// The create lane only starts builds (they run in the build pool), so
	// it needs few workers whatever MaxConcurrentJobs is.
	s.kickEnv = rc.Register(driver{s}, reconciler.Lanes{Deadline: 8, Create: 4, Other: 4,
		ObserveEvery: s.cfg.SweepInterval})
}

// Run drives the environments on a reconciler of their own until ctx is
// done (a backend without sandboxes, tests); a backend with sandboxes
// calls Attach on its reconciler instead.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("tasks: Run after Close")
	}
	if s.rc == nil {
		s.Attach(reconciler.New(reconciler.Config{DB: s.db, Logger: s.log, Clock: reconciler.ClockFunc(s.now),
			Interval: s.cfg.SweepInterval}))
	}
	s.runs.Add(1)
	s.mu.Unlock()
	defer s.runs.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	return s.rc.Run(ctx)
}

// Kick asks the reconciler for a sweep now (e.g. after moving the test clock).
func (s *Service) Kick() {
	if s.rc != nil {
		s.rc.SweepSoon()
	}
}

// kick queues environment id for a step of the driver.
func (s *Service) kick(id string) {
	if s.kickEnv != nil {
		s.kickEnv(id)
	}
}

// Close stops the workers without changing any environment's state (a new
// Service on the same database resumes them) and releases Docker.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, w := range s.workers {
		w.cancel(errShutdown)
	}
	s.mu.Unlock()
	s.cancel() // also ends Run
	s.runs.Wait()
	s.wg.Wait()
	return s.engine.Close()
}

// lockEnv serialises the user operations (pause, resume, delete) of one
// environment in this process; the database stays the arbiter between
// processes through conditional updates.
func (s *Service) lockEnv(id string) func() {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &envLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}
}

// stopWorker cancels environment id's worker with cause and waits for it.
func (s *Service) stopWorker(ctx context.Context, id string, cause error) {
	s.mu.Lock()
	w := s.workers[id]
	s.mu.Unlock()
	if w == nil {
		return
	}
	w.cancel(cause)
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

// bg is a context for cleanup that must finish even when the request or
// worker that started it is cancelled, bounded by d.
func (s *Service) bg(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
