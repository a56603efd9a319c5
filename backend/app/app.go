package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/multi"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/runtimes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks/e2bengine"
)

// App is a wired backend.
type App struct {
	Config     Config
	DB         *store.DB
	Provider   compute.Provider
	Reconciler *reconciler.Reconciler
	Lifecycle  *lifecycle.Service
	Tasks      *tasks.Service
	Billing    *billing.Service
	Runtimes   *runtimes.Service
	Admission  *admission.Admitter
	Handler    http.Handler
	Log        *slog.Logger
	// DevKey is the generated key of the dev org ("" when bootstrapped from env).
	DevKey      string
	loops       []func(ctx context.Context) error
	transitions *prometheus.CounterVec
	closer      []func() error
}

// New opens the database, the provider and wires the routes.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*App, error) {
	if log == nil {
		log = slog.Default()
	}
	db, err := store.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a := &App{Config: cfg, DB: db, Log: log, closer: []func() error{db.Close}}
	db.SetReadBarrier(!cfg.NoReadBarrier)
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = reconciler.NewReplicaID()
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = reconciler.DefaultLeaseTTL
	}
	a.Config = cfg
	if db.Dialect() == store.SQLite {
		// One process per SQLite file: the leases its previous run held
		// (killed mid-create) are nobody's, so they need not expire first.
		if err := db.ReleaseAllLeases(ctx); err != nil {
			a.Close()
			return nil, fmt.Errorf("clearing the leases of a previous run: %w", err)
		}
	}
	log.Info("replica starting", "replica", cfg.ReplicaID, "database", db.Dialect(), "lease_ttl", cfg.LeaseTTL)
	if err := a.bootstrap(ctx); err != nil {
		a.Close()
		return nil, err
	}
	deployment, err := db.DeploymentID(ctx)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("reading the deployment id: %w", err)
	}
	if a.Provider, err = newProvider(cfg, deployment); err != nil {
		a.Close()
		return nil, err
	}
	if c, ok := a.Provider.(interface{ Close() error }); ok {
		a.closer = append(a.closer, c.Close)
	}
	capacity, err := a.providerCapacity(ctx)
	if err != nil {
		a.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	a.transitions = prometheus.NewCounterVec(transitionsHelp, []string{"phase"})
	reg.MustRegister(newRecordCollector(db), a.transitions)
	a.Reconciler = reconciler.New(reconciler.Config{DB: db, Provider: a.Provider, Logger: log, Interval: cfg.ReconcileInterval,
		OnChange: a.onChange, RequeueDelay: 2 * time.Second, ReplicaID: cfg.ReplicaID, LeaseTTL: cfg.LeaseTTL})
	a.Admission = admission.New(admission.Config{DB: db, Capacity: capacity, MaxQueue: cfg.MaxQueue, Interval: cfg.ReconcileInterval,
		Logger: log, Admitted: func(r *store.Record) { a.Reconciler.Changed(r); a.Reconciler.Kick(r.ID) }})
	reg.MustRegister(admission.NewCollector(db, a.Admission))
	a.Lifecycle = lifecycle.New(lifecycle.Config{DB: db, Reconciler: a.Reconciler, Provider: a.Provider, Logger: log,
		MinTimeout: cfg.MinTimeoutSec, Admit: a.admit, Admission: a.Admission})
	rates, settleEvery, err := billing.EnvConfig()
	if err != nil {
		a.Close()
		return nil, err
	}
	// Billing reads sandbox logs through the lifecycle service and hands
	// the records it kills for lack of credits to the reconciler; it imports
	// neither.
	if a.Billing, err = billing.New(ctx, billing.Config{DB: db, Logs: a.Lifecycle.Logs, Killed: func(r *store.Record) {
		a.Reconciler.Changed(r)
		a.Reconciler.Kick(r.ID)
	}, Logger: log, Rates: &rates, SettleInterval: settleEvery}); err != nil {
		a.Close()
		return nil, err
	}
	if a.Runtimes, err = runtimes.New(runtimes.Config{DB: db, Sandboxes: a.Lifecycle, Billing: a.Billing, Provider: a.Provider,
		Logger: log}); err != nil {
		a.Close()
		return nil, err
	}
	taskEngine, err := newTaskEngine(cfg, deployment, log)
	if err != nil {
		a.Close()
		return nil, err
	}
	if a.Tasks, err = tasks.New(tasks.Config{DB: db, DockerHost: cfg.DockerHost, CatalogDir: cfg.TasksDir, Logger: log,
		MinTimeoutSec: cfg.MinTimeoutSec, SweepInterval: cfg.ReconcileInterval, Admit: a.admit, Engine: taskEngine}); err != nil {
		a.Close()
		return nil, fmt.Errorf("task environments: %w", err)
	}
	a.closer = append(a.closer, a.Tasks.Close)
	// One reconciler drives sandboxes and task environments alike.
	a.Tasks.Attach(a.Reconciler)
	a.wireReplicas()
	a.loops = append(a.loops, a.Reconciler.Run, a.Billing.Run, a.Admission.Run)
	a.Handler = api.NewHandler(api.Config{
		DB: db, Provider: a.Provider, Logger: log, AdminKey: cfg.AdminKey, OpenAPI: openAPIDocument, Registry: reg,
		Routes: []api.Registrar{a.Lifecycle.Register, a.Billing.Register, a.Runtimes.Register, a.Tasks.Register, a.Admission.Register},
		Checks: map[string]func(context.Context) error{"tasks": a.Tasks.Ping},
		Admin:  []api.Registrar{a.Billing.RegisterAdmin, a.Admission.RegisterAdmin},
		Public: []api.Registrar{a.Lifecycle.RegisterRouter},
	})
	return a, nil
}

// newProvider builds the deployment's provider: DREADNODE_PROVIDER, plus
// the providers DREADNODE_TEMPLATE_PROVIDERS routes templates to.
func newProvider(cfg Config, deployment string) (compute.Provider, error) {
	def, err := buildProvider(cfg, cfg.Provider, deployment)
	if err != nil || len(cfg.TemplateProviders) == 0 {
		return def, err
	}
	var others []compute.Provider
	seen := map[string]bool{cfg.Provider: true}
	for _, name := range cfg.TemplateProviders {
		if seen[name] {
			continue
		}
		seen[name] = true
		p, err := buildProvider(cfg, name, deployment)
		if err != nil {
			return nil, fmt.Errorf("DREADNODE_TEMPLATE_PROVIDERS needs the %s provider: %w", name, err)
		}
		others = append(others, p)
	}
	return multi.New(def, others, cfg.TemplateProviders)
}

func buildProvider(cfg Config, name, deployment string) (compute.Provider, error) {
	switch name {
	case "docker":
		p, err := docker.New(docker.Config{Host: cfg.DockerHost, Network: cfg.DockerNetwork, BaseImage: cfg.DockerImage,
			Runtime: cfg.DockerRuntime, DiskLimitMB: diskLimit(cfg.DockerDiskLimitMB), WarmPoolSize: cfg.WarmPoolSize, Scope: deployment,
			AgentBinary: cfg.AgentBinary})
		if err != nil {
			return nil, fmt.Errorf("docker provider: %w (is the Docker daemon running? DOCKER_HOST=%q)", err, cfg.DockerHost)
		}
		if cfg.DockerRuntime != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.CheckRuntimes(ctx); err != nil {
				_ = p.Close()
				return nil, fmt.Errorf("DOCKER_SANDBOX_RUNTIME=%s: %w", cfg.DockerRuntime, err)
			}
		}
		return p, nil
	case "e2b":
		ec := e2b.ConfigFromEnv()
		if cfg.E2B != nil {
			ec = *cfg.E2B
		}
		ec.Scope = deployment
		p, err := e2b.New(ec)
		if err != nil {
			return nil, fmt.Errorf("e2b provider: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("DREADNODE_PROVIDER=%s is not a provider; use docker or e2b", name)
}

// diskLimit maps DOCKER_DISK_LIMIT_MB to docker.Config.DiskLimitMB: 0 (no
// cap) is negative there, where 0 takes the default.
func diskLimit(mb int) int {
	if mb == 0 {
		return -1
	}
	return mb
}

// newTaskEngine is the engine of task environments: E2B (sandboxes in a
// scope of their own, so the reconciler's provider never lists them) when
// DREADNODE_PROVIDER=e2b, else nil: Docker.
func newTaskEngine(cfg Config, deployment string, log *slog.Logger) (tasks.Engine, error) {
	if cfg.Provider != "e2b" {
		return nil, nil
	}
	ec := e2b.ConfigFromEnv()
	if cfg.E2B != nil {
		ec = *cfg.E2B
	}
	eng, err := e2bengine.NewE2B(ec, deployment, log)
	if err != nil {
		return nil, fmt.Errorf("task environments on e2b: %w", err)
	}
	return eng, nil
}

// admit refuses creates for an org without credits: billing.Admit.
func (a *App) admit(ctx context.Context, orgID string) error {
	return a.Billing.Admit(ctx, orgID)
}

// onChange is the reconciler's hook: billing settles records that stopped
// accruing (paused or ended).
func (a *App) onChange(r *store.Record) {
	a.transitions.WithLabelValues(string(r.Phase)).Inc()
	if a.Billing != nil {
		a.Billing.OnChange(r)
	}
	if a.Admission != nil {
		a.Admission.Changed(r) // freed compute or a requeued create: serve the queue
	}
}

// bootstrap ensures the configured org and key; without one, a dev org with
// a generated key kept in the data directory.
func (a *App) bootstrap(ctx context.Context) error {
	org, key := a.Config.BootstrapOrg, a.Config.BootstrapKey
	if org == "" {
		org = "dev"
		var err error
		if key, err = devKey(a.Config.DataDir); err != nil {
			return err
		}
		a.DevKey = key
	}
	o, created, err := a.DB.EnsureOrg(ctx, org, int64(math.Round(a.Config.BootstrapCredits*1e6)))
	if err != nil {
		return fmt.Errorf("bootstrapping org %s: %w", org, err)
	}
	if created {
		a.Log.Info("created org", "org", org, "credits", a.Config.BootstrapCredits)
	}
	if key != "" {
		if err := a.DB.EnsureAPIKey(ctx, o.ID, key); err != nil {
			return fmt.Errorf("bootstrapping the API key of %s: %w", org, err)
		}
	}
	return nil
}

func devKey(dir string) (string, error) {
	path := filepath.Join(dir, "dev-api-key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	key := ids.Token("dn_dev")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("saving the dev API key: %w", err)
	}
	return key, nil
}

// Serve listens, prints the URL, runs the loops and serves until ctx ends.
func (a *App) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", a.Config.Listen)
	if err != nil {
		return fmt.Errorf("DREADNODE_LISTEN=%s: %w", a.Config.Listen, err)
	}
	url := "http://" + ln.Addr().String()
	fmt.Printf("dreadnode-backend listening on %s\n", url)
	if a.DevKey != "" {
		fmt.Printf("dev API key: %s (org \"dev\"; export DREADNODE_API_URL=%s DREADNODE_API_KEY=%s DREADNODE_ORG=dev)\n", a.DevKey, url, a.DevKey)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(a.loops)+1)
	for _, loop := range a.loops {
		go func() {
			if err := loop(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- err
			}
		}()
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { errs <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errs:
		a.Log.Error("backend stopping", "err", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return err
}

// Loops are the background loops Serve runs (for in-process use).
func (a *App) Loops() []func(ctx context.Context) error { return a.loops }

// WarmPoolReady is the number of warm containers ready to be claimed (0
// without a pool or with a provider that has none).
func (a *App) WarmPoolReady() int {
	if p, ok := a.Provider.(interface{ WarmReady() int }); ok {
		return p.WarmReady()
	}
	return 0
}

// Close releases the provider and the database.
func (a *App) Close() {
	for i := len(a.closer) - 1; i >= 0; i-- {
		_ = a.closer[i]()
	}
}
