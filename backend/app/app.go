package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
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
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/keys"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/orgmetrics"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/runtimes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/templates"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/volumes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/worlds"
)

// App is a wired backend.
type App struct {
	Config     Config
	DB         *store.DB
	Provider   compute.Provider
	Reconciler *reconciler.Reconciler
	Lifecycle  *lifecycle.Service
	Events     *events.Service
	Tasks      *tasks.Service
	Billing    *billing.Service
	Runtimes   *runtimes.Service
	Worlds     *worlds.Service
	Admission  *admission.Admitter
	Keys       *keys.Service
	Volumes    *volumes.Service
	Metrics    *orgmetrics.Service
	Templates  *templates.Service
	Handler    http.Handler
	Log        *slog.Logger
	// DevKey is the generated key of the dev org ("" when bootstrapped from env).
	DevKey string
	// devKeyNew: DevKey was made by this start (the only one that shows it).
	devKeyNew   bool
	loops       []func(ctx context.Context) error
	registry    *prometheus.Registry
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
	if cfg.SandboxDomain == "" {
		cfg.SandboxDomain = "localhost"
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
	agentSeed, err := db.AgentTokenSeed(ctx)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("reading the agents' token seed: %w", err)
	}
	if a.Provider, err = newProvider(cfg, providerEnv{deployment: deployment, agentSeed: agentSeed, log: log}); err != nil {
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
	a.registry = reg
	a.transitions = prometheus.NewCounterVec(transitionsHelp, []string{"phase"})
	reg.MustRegister(newRecordCollector(db), a.transitions)
	if v, ok := a.Provider.(egressCounter); ok {
		reg.MustRegister(newEgressCollector(v))
		logEgress(log, v, cfg.DockerEgress.Off)
	}
	logDiskLimit(ctx, log, a.Provider)
	a.Reconciler = reconciler.New(reconciler.Config{DB: db, Provider: a.Provider, Logger: log, Interval: cfg.ReconcileInterval,
		ObserveEvery: cfg.ObserveEvery, ImageGrace: cfg.ImageGrace, ImageSweepEvery: cfg.ImageSweepEvery, OnChange: a.onChange, RequeueDelay: 2 * time.Second, ReplicaID: cfg.ReplicaID, LeaseTTL: cfg.LeaseTTL})
	a.Admission = admission.New(admission.Config{DB: db, Capacity: capacity, MaxQueue: cfg.MaxQueue, Interval: cfg.ReconcileInterval,
		Logger: log, Admitted: func(r *store.Record) {
			a.Reconciler.Changed(r)
			a.Reconciler.Kick(r.ID)
			if a.Tasks != nil {
				a.Tasks.Admitted(r) // an environment's record: its driver starts it
			}
		}})
	reg.MustRegister(admission.NewCollector(db, a.Admission))
	a.Templates = a.newTemplates(cfg)
	a.Lifecycle = lifecycle.New(lifecycle.Config{DB: db, Reconciler: a.Reconciler, Provider: a.Provider, Logger: log,
		MinTimeout: cfg.MinTimeoutSec, Admit: a.admit, Admission: a.Admission, SandboxDomain: cfg.SandboxDomain,
		OperatorKeys: []string{cfg.BootstrapKey, cfg.AdminKey}, Committer: committer(a.Provider), Resolve: a.resolveTemplate})
	// Billing reads sandbox logs through the lifecycle service and hands
	// the records it kills for lack of credits to the reconciler; it imports
	// neither.
	if a.Billing, err = billing.New(ctx, billing.Config{DB: db, Logs: a.Lifecycle.Logs, Killed: func(r *store.Record) {
		a.Reconciler.Changed(r)
		a.Reconciler.Kick(r.ID)
	}, VolumeUsage: func(ctx context.Context, org string) (int, int64, error) {
		return a.Volumes.Usage(ctx, org) // made below, before any request is served
	}, Logger: log, Rates: cfg.CreditRates, SettleInterval: cfg.SettleInterval}); err != nil {
		a.Close()
		return nil, err
	}
	a.Worlds = worlds.New(db, a.Lifecycle)
	if a.Runtimes, err = runtimes.New(runtimes.Config{DB: db, Sandboxes: a.Lifecycle, Billing: a.Billing, Provider: a.Provider,
		Logger: log}); err != nil {
		a.Close()
		return nil, err
	}
	if a.Tasks, err = tasks.New(tasks.Config{DB: db, CatalogDir: cfg.TasksDir, Logger: log,
		MinTimeoutSec: cfg.MinTimeoutSec, SweepInterval: cfg.ReconcileInterval, Admit: a.admit, Admission: a.Admission,
		Groups: a.taskGroups(cfg, deployment), Committer: a.taskCommitter(cfg)}); err != nil {
		a.Close()
		return nil, fmt.Errorf("task environments: %w", err)
	}
	a.closer = append(a.closer, a.Tasks.Close)
	// One reconciler drives sandboxes and task environments alike.
	a.Tasks.Attach(a.Reconciler)
	a.wireReplicas()
	a.Keys = keys.New(db, log)
	a.Volumes = volumes.New(db, a.Provider, log)
	a.Metrics = orgmetrics.New(db)
	a.Events = events.New(events.Config{DB: db, Logger: log, Retention: cfg.EventRetention, Delivery: cfg.Webhooks})
	a.loops = append(a.loops, a.Reconciler.Run, a.Billing.Run, a.Admission.Run, a.Events.Run)
	e2bCallback := a.wireE2BWebhook()
	contract, err := newRequestContract(cfg.MinTimeoutSec)
	if err != nil {
		a.Close()
		return nil, err
	}
	a.Handler = api.NewHandler(api.Config{
		DB: db, Provider: a.Provider, Logger: log, AdminKey: cfg.AdminKey, OpenAPI: contract.served, Registry: reg, Limits: cfg.Limits,
		MaxBodyBytes: cfg.MaxBodyBytes, Contract: contract.middleware,
		Routes: []api.Registrar{a.Lifecycle.Register, a.Billing.Register, a.Runtimes.Register, a.Worlds.Register, a.Tasks.Register, a.Admission.Register,
			a.Keys.Register, a.Events.Register, a.Volumes.Register, a.Metrics.Register, a.Templates.Register},
		Checks:  map[string]func(context.Context) error{"tasks": a.Tasks.Ping},
		Details: readyDetails(a.Provider),
		Admin:   []api.Registrar{a.Billing.RegisterAdmin, a.Admission.RegisterAdmin, a.Keys.RegisterAdmin, a.Templates.RegisterAdmin},
		Public:  []api.Registrar{a.Lifecycle.RegisterRouter, e2bCallback},
		Hosts:   []api.Registrar{a.Lifecycle.RegisterHostRouter},
		Edges:   []api.Edge{a.e2bEdge()},
	})
	return a, nil
}

// newProvider builds the deployment's provider: DREADNODE_PROVIDER, plus
// the providers DREADNODE_TEMPLATE_PROVIDERS routes templates to.
func newProvider(cfg Config, env providerEnv) (compute.Provider, error) {
	def, err := buildProvider(cfg, cfg.Provider, env)
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
		p, err := buildProvider(cfg, name, env)
		if err != nil {
			return nil, fmt.Errorf("DREADNODE_TEMPLATE_PROVIDERS needs the %s provider: %w", name, err)
		}
		others = append(others, p)
	}
	return multi.New(def, others, cfg.TemplateProviders)
}

// providerEnv is what a provider gets from the deployment: its id (the
// scope of its instances), the seed of the agents' tokens (from the
// database), the logger.
type providerEnv struct {
	deployment, agentSeed string
	log                   *slog.Logger
}

func buildProvider(cfg Config, name string, env providerEnv) (compute.Provider, error) {
	deployment := env.deployment
	switch name {
	case "docker":
		p, err := docker.New(docker.Config{Host: cfg.DockerHost, Network: cfg.DockerNetwork, NetworkPool: cfg.DockerNetworkPool, BaseImage: cfg.DockerImage,
			Runtime: cfg.DockerRuntime, DiskLimitMB: diskLimit(cfg.DockerDiskLimitMB), WarmPoolSize: cfg.WarmPoolSize, Scope: deployment,
			Egress: cfg.DockerEgress, AgentBinary: cfg.AgentBinary, AgentTokenSeed: env.agentSeed, Logger: env.log})
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
		var ec e2b.Config
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

// taskGroups makes the group provider of task environments: E2B
// (sandboxes in a scope of their own, so the reconciler's provider never
// lists them) when DREADNODE_PROVIDER=e2b, else Docker, on the Docker
// provider's client (and with its agent), each network under the
// provider's egress rules when it has them.
func (a *App) taskGroups(cfg Config, deployment string) func(tasks.GroupsFor) (tasks.Engine, error) {
	return func(f tasks.GroupsFor) (tasks.Engine, error) {
		if cfg.Provider == "e2b" {
			var ec e2b.Config
			if cfg.E2B != nil {
				ec = *cfg.E2B
			}
			ec.WebhookURL = "" // the callback serves the sandboxes' provider; environments are polled
			g, err := e2b.NewTaskGroups(ec, deployment, f.Logger)
			if err != nil {
				return nil, fmt.Errorf("task environments on e2b: %w", err)
			}
			return g, nil
		}
		p := dockerOf(a.Provider)
		if p == nil {
			return nil, errors.New("task environments on docker need the docker provider")
		}
		return p.Groups(docker.GroupConfig{Owner: f.Owner, Logger: f.Logger, BuildTimeout: f.BuildTimeout,
			FilterNetwork: taskNetworkFilter(p), NetworkPool: cfg.TaskNetworkPool})
	}
}

// dockerOf is the Docker provider of p: p itself, or the one of a
// multi-provider (DREADNODE_TEMPLATE_PROVIDERS); nil when there is none.
func dockerOf(p compute.Provider) *docker.Provider {
	if d, ok := p.(*docker.Provider); ok {
		return d
	}
	if m, ok := p.(*multi.Provider); ok {
		for _, q := range m.Providers() {
			if d, ok := q.(*docker.Provider); ok {
				return d
			}
		}
	}
	return nil
}

// committer is the provider's checkpointing (forks), nil when it has none.
func committer(p compute.Provider) compute.Committer {
	if c, ok := p.(compute.Committer); ok {
		return c
	}
	return nil
}

// taskCommitter checkpoints task environments' services: the Docker
// provider's, when they run on Docker.
func (a *App) taskCommitter(cfg Config) compute.Committer {
	if cfg.Provider == "e2b" {
		return nil
	}
	if p, ok := a.Provider.(*docker.Provider); ok {
		return p
	}
	return nil
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
	if a.Lifecycle != nil && r.Checkpoint != "" {
		a.Lifecycle.ReleaseCheckpoint(r) // the last fork of a checkpoint to end removes its images
	}
}

// bootstrap ensures the configured org and key; without one, a dev org with
// a generated key kept in the data directory.
func (a *App) bootstrap(ctx context.Context) error {
	org, key := a.Config.BootstrapOrg, a.Config.BootstrapKey
	if org == "" {
		org = "dev"
		var err error
		if key, a.devKeyNew, err = devKey(a.Config.DataDir); err != nil {
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
		// A bootstrap key replaced in the environment stops working.
		n, err := a.DB.RetireBootstrapKeys(ctx, o.ID, key)
		if err != nil {
			return fmt.Errorf("revoking the replaced bootstrap keys of %s: %w", org, err)
		}
		if n > 0 {
			a.Log.Info("revoked the previous bootstrap API key: the configured one replaces it", "org", org, "revoked", n)
		}
	}
	return nil
}

// devKey reads the dev org's key from dir, or makes it (created): kept
// in a file of mode 0600, never in the log.
func devKey(dir string) (key string, created bool, err error) {
	path := devKeyPath(dir)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		if err := os.Chmod(path, 0o600); err != nil { // a copy restored with looser rights
			return "", false, fmt.Errorf("making %s private: %w", path, err)
		}
		return strings.TrimSpace(string(b)), false, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, err
	}
	key = ids.Token("dn_dev")
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("saving the dev API key: %w", err)
	}
	return key, true, nil
}

func devKeyPath(dir string) string { return filepath.Join(dir, "dev-api-key") }

// banner is what Serve prints at start: the URL and, for the dev org, where
// its key is kept. The key itself is shown only by the start that made it
// and only on a terminal: standard output is often a log (a container's,
// a service manager's), and a key in a log outlives the terminal.
func (a *App) banner(w io.Writer, url string, terminal bool) {
	fmt.Fprintf(w, "dreadnode-backend listening on %s\n", url)
	if a.DevKey == "" {
		return
	}
	path := devKeyPath(a.Config.DataDir)
	if a.devKeyNew && terminal {
		fmt.Fprintf(w, "dev API key (shown this once; kept in %s, mode 0600): %s\n", path, a.DevKey)
	} else {
		fmt.Fprintf(w, "dev API key: kept in %s (mode 0600)\n", path)
	}
	fmt.Fprintf(w, "  export DREADNODE_API_URL=%s DREADNODE_API_KEY=$(cat %s) DREADNODE_ORG=dev\n", url, path)
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Serve listens, prints the URL, runs the loops and serves until ctx ends.
func (a *App) Serve(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", a.Config.Listen)
	if err != nil {
		return fmt.Errorf("DREADNODE_LISTEN=%s: %w", a.Config.Listen, err)
	}
	a.banner(os.Stdout, "http://"+ln.Addr().String(), isTerminal(os.Stdout))
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
	// No ReadTimeout or WriteTimeout: uploads, streams (exec, logs, events)
	// and long polls legitimately last long. Headers must come quickly and
	// idle keep-alive connections are closed.
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 1 << 20,
		ErrorLog: a.serverLog()}
	go func() { errs <- srv.Serve(ln) }()
	if a.Config.MetricsListen != "" {
		mln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", a.Config.MetricsListen)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("DREADNODE_METRICS_LISTEN=%s: %w", a.Config.MetricsListen, err)
		}
		msrv := a.MetricsServer()
		defer msrv.Close()
		fmt.Printf("metrics on http://%s/metrics (no key: keep this address private)\n", mln.Addr())
		go func() { errs <- msrv.Serve(mln) }()
	}
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

// MetricsServer serves GET /metrics alone, without a key: the server of
// DREADNODE_METRICS_LISTEN.
func (a *App) MetricsServer() *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", api.MetricsHandler(a.registry))
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: a.serverLog()}
}

// serverLog is the log of net/http's own errors, at ERROR: a panic it
// recovered outside the handlers' recoverer (in a connection's own
// goroutine: "http: panic serving ...", with its stack) is a bug to see.
// Without it they went through the log package to slog's default, at INFO.
func (a *App) serverLog() *log.Logger {
	return slog.NewLogLogger(a.Log.Handler(), slog.LevelError)
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
