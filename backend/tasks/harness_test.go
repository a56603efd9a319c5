package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/apitest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// catalogDirs is the repo's catalog plus the test fixtures.
var catalogDirs = filepath.Join("..", "..", "tasks") + string(filepath.ListSeparator) + filepath.Join("testdata", "tasks")

// clock is a test clock: real time plus an offset the test moves.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// harness is one backend: a store on a temp file, a tasks.Service running
// its loop, and an HTTP server whose tiny auth middleware takes the org from
// the X-Test-Org header.
type harness struct {
	t      testing.TB
	db     *store.DB
	dbPath string // SQLite file or postgres:// URL
	svc    *tasks.Service
	srv    *httptest.Server
	clock  *clock
	cli    *client.Client
	stop   func() // stops the Service (Run and Close)
	cfg    tasks.Config
}

type harnessOpt func(*tasks.Config)

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessOn(t, filepath.Join(t.TempDir(), "t.db"), opts...)
}

// newHarnessOn is newHarness on the database at dbPath: a SQLite file or a
// postgres:// URL (pgtest.EachDatabase gives both).
func newHarnessOn(t testing.TB, dbPath string, opts ...harnessOpt) *harness {
	t.Helper()
	images.EnsureBase(t)
	db, err := store.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, org := range []string{"acme", "other"} {
		if _, _, err := db.EnsureOrg(context.Background(), org, 1_000_000_000); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	h := &harness{t: t, db: db, dbPath: dbPath, clock: &clock{}, cli: cli}
	h.cfg = tasks.Config{DB: db, CatalogDir: catalogDirs, Logger: testLogger(t), Now: h.clock.Now, Groups: dockerGroups(docker.GroupConfig{}),
		SweepInterval: 200 * time.Millisecond, ReadyDeadline: 2 * time.Minute, BuildDeadline: 5 * time.Minute}
	for _, o := range opts {
		o(&h.cfg)
	}
	h.start()
	t.Cleanup(func() {
		h.stopService()
		h.srv.Close()
		h.assertNothingLeft()
	})
	return h
}

// dockerGroups makes a test Service's Docker group provider from cfg (the
// Service gives the owner, build timeout and logger) on a Docker provider
// of its own, with the agent built from the code under test unless
// agentBinary names one. The provider filters nothing and caps no disk
// (the tests that want rules give FilterNetwork), and builds have no
// network; closing the Service closes it.
func dockerGroups(cfg docker.GroupConfig, agentBinary ...string) func(tasks.GroupsFor) (tasks.Engine, error) {
	return func(f tasks.GroupsFor) (tasks.Engine, error) {
		cfg.Owner, cfg.BuildTimeout, cfg.Logger = f.Owner, f.BuildTimeout, f.Logger
		if cfg.BuildNetwork == nil {
			cfg.BuildNetwork = func(context.Context) (string, error) { return "none", nil }
		}
		bin := ""
		if len(agentBinary) > 0 {
			bin = agentBinary[0]
		}
		if bin == "" {
			var err error
			if bin, err = agentbin.Build(); err != nil {
				return nil, err
			}
		}
		// One seed for every process of the test binary (TestCrashKill9's
		// helper and its successor), as one database gives a deployment.
		p, err := docker.New(docker.Config{Scope: f.Owner, AgentBinary: bin,
			AgentTokenSeed: "tasks-test-agent-token-seed", Egress: docker.EgressConfig{Off: true}, DiskLimitMB: -1})
		if err != nil {
			return nil, err
		}
		g, err := p.Groups(cfg)
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		return providerGroups{g, p}, nil
	}
}

// providerGroups are Groups on a provider made for them alone: closing
// them closes it.
type providerGroups struct {
	*docker.Groups
	p *docker.Provider
}

func (g providerGroups) Close() error { return errors.Join(g.Groups.Close(), g.p.Close()) }

// dockerRuntime is the Docker group provider of svc.
func dockerRuntime(t *testing.T, svc *tasks.Service) *docker.Groups {
	t.Helper()
	g, ok := svc.Runtime().(providerGroups)
	if !ok {
		t.Fatalf("the service runs on %T, not Docker", svc.Runtime())
	}
	return g.Groups
}

// start (re)starts the Service on the harness's database.
func (h *harness) start() {
	h.t.Helper()
	svc, err := tasks.New(h.cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = svc.Run(ctx)
	}()
	h.svc = svc
	h.stop = func() {
		cancel()
		<-done
		_ = svc.Close()
	}
	r := mux.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			org := r.Header.Get("X-Test-Org")
			if org == "" {
				httpx.WriteErr(w, httpx.NewError(http.StatusUnauthorized, "unauthorized", "missing key"))
				return
			}
			next.ServeHTTP(w, r.WithContext(httpx.WithOrg(r.Context(), org)))
		})
	})
	svc.Register(r)
	registerLedger(h.t, r, h.db, h.clock.Now)
	if h.srv == nil {
		h.srv = httptest.NewServer(r)
	} else {
		h.srv.Config.Handler = r
	}
}

func (h *harness) stopService() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// assertNothingLeft deletes every live environment through the API and
// checks that no container or network of this harness survives.
func (h *harness) assertNothingLeft() {
	h.t.Helper()
	owner := h.svc.Owner()
	ctx := context.Background()
	// Environments left live by the test are torn down by a fresh service,
	// whose loop also collects what a stopped worker's last requests made.
	svc, err := tasks.New(h.cfg)
	if err == nil {
		rctx, rcancel := context.WithCancel(ctx)
		runDone := make(chan struct{})
		go func() {
			defer close(runDone)
			_ = svc.Run(rctx)
		}()
		defer func() {
			rcancel()
			<-runDone
			svc.Close()
		}()
		for _, org := range []string{"acme", "other"} {
			rows, _ := h.db.Reader().QueryContext(ctx, `SELECT id, workspace FROM task_environments WHERE org_id = ? AND state NOT IN ('torn_down', 'failed')`, org)
			var pairs [][2]string
			for rows != nil && rows.Next() {
				var id, ws string
				_ = rows.Scan(&id, &ws)
				pairs = append(pairs, [2]string{id, ws})
			}
			if rows != nil {
				rows.Close()
			}
			r := mux.NewRouter()
			svc.Register(r)
			for _, p := range pairs {
				req := httptest.NewRequest(http.MethodDelete, "/api/v1/org/"+org+"/ws/"+p[1]+"/environments/"+p[0], nil)
				req = req.WithContext(httpx.WithOrg(req.Context(), org))
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, req)
			}
		}
	}
	f := filters.NewArgs(filters.Arg("label", compute.LabelGroupOwner+"="+owner))
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs, err1 := h.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		ns, err2 := h.cli.NetworkList(ctx, network.ListOptions{Filters: f})
		if err1 == nil && err2 == nil && len(cs) == 0 && len(ns) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Errorf("leaked Docker resources of owner %s: %d containers, %d networks (%v %v)", owner, len(cs), len(ns), err1, err2)
			for _, c := range cs {
				_ = h.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
			for _, n := range ns {
				_ = h.cli.NetworkRemove(ctx, n.ID)
			}
			return
		}
		time.Sleep(100 * time.Millisecond) // polling Docker with a deadline
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("TASKS_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// response is a decoded HTTP answer.
type response struct {
	Code   int
	Header http.Header
	Body   []byte
}

func (r *response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("decoding %q: %v", r.Body, err)
	}
	return m
}

// do sends a request as org; body may be nil, a string (raw) or a value.
func (h *harness) do(org, method, path string, body any, headers ...string) *response {
	h.t.Helper()
	r := apitest.Do(h.t, h.srv.URL, method, path, body, append([]string{"X-Test-Org", org}, headers...)...)
	return &response{Code: r.Code, Header: r.Header, Body: r.Body}
}

func envPath(org, ws string, rest ...string) string {
	return "/api/v1/org/" + org + "/ws/" + ws + "/environments" + strings.Join(rest, "")
}

// create POSTs an environment and returns id and token.
func (h *harness) create(org, ws string, body map[string]any, headers ...string) (string, string) {
	h.t.Helper()
	r := h.do(org, http.MethodPost, envPath(org, ws), body, headers...)
	if r.Code != http.StatusCreated {
		h.t.Fatalf("create: %d %s", r.Code, r.Body)
	}
	m := r.JSON(h.t)
	if m["state"] != "building" {
		h.t.Fatalf("create answered state %v, want building", m["state"])
	}
	tok, _ := m["execute_token"].(string)
	return m["id"].(string), tok
}

// waitState long-polls /status until the environment is in one of want
// (failing on any other terminal state).
func (h *harness) waitState(org, ws, id string, timeout time.Duration, want ...string) map[string]any {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	since := ""
	for {
		q := "?wait=10"
		if since != "" {
			q += "&since=" + since
		}
		r := h.do(org, http.MethodGet, envPath(org, ws, "/", id, "/status", q), nil)
		if r.Code != http.StatusOK {
			h.t.Fatalf("status: %d %s", r.Code, r.Body)
		}
		m := r.JSON(h.t)
		st := m["state"].(string)
		for _, w := range want {
			if st == w {
				return m
			}
		}
		if st == "failed" || st == "torn_down" {
			h.t.Fatalf("environment %s ended %s (want %v): %v", id, st, want, m["error"])
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("environment %s still %s after %s (want %v)", id, st, timeout, want)
		}
		since = st
	}
}

func (h *harness) get(org, ws, id string) map[string]any {
	h.t.Helper()
	r := h.do(org, http.MethodGet, envPath(org, ws, "/", id), nil)
	if r.Code != http.StatusOK {
		h.t.Fatalf("get: %d %s", r.Code, r.Body)
	}
	return r.JSON(h.t)
}

func (h *harness) execute(org, ws, id, token string, body any) *response {
	h.t.Helper()
	var hdr []string
	if token != "" {
		hdr = []string{tasks.TokenHeader, token}
	}
	return h.do(org, http.MethodPost, envPath(org, ws, "/", id, "/execute"), body, hdr...)
}

// containers lists the Docker containers of environment id.
func (h *harness) containers(id string) []container.Summary {
	h.t.Helper()
	cs, err := h.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", compute.LabelGroup+"="+id))})
	if err != nil {
		h.t.Fatal(err)
	}
	return cs
}

func (h *harness) networks(id string) []network.Summary {
	h.t.Helper()
	ns, err := h.cli.NetworkList(context.Background(), network.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", compute.LabelGroup+"="+id))})
	if err != nil {
		h.t.Fatal(err)
	}
	return ns
}

// waitGone polls Docker until environment id has no container and network.
func (h *harness) waitGone(id string, timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		cs, ns := h.containers(id), h.networks(id)
		if len(cs) == 0 && len(ns) == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("environment %s still has %d containers and %d networks", id, len(cs), len(ns))
		}
		time.Sleep(50 * time.Millisecond) // polling Docker with a deadline
	}
}

func (h *harness) record(id string) *store.Record {
	h.t.Helper()
	r, err := h.db.GetRecord(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// httpGet fetches url from the host (a service's address on its network).
func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// registerLedger adds the ledger routes (§2, package billing) on db to r, so
// tests read a task record as the ledger API shows it.
func registerLedger(t testing.TB, r *mux.Router, db *store.DB, now func() time.Time) {
	t.Helper()
	b, err := billing.New(context.Background(), billing.Config{DB: db, Now: now, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	b.Register(r)
}

// ledger is the ledger API's view of record id (org acme).
func (h *harness) ledger(id string) map[string]any {
	h.t.Helper()
	r := h.do("acme", http.MethodGet, "/api/v1/org/acme/sandboxes/"+id, nil)
	if r.Code != http.StatusOK {
		h.t.Fatalf("ledger record %s: %d %s", id, r.Code, r.Body)
	}
	return r.JSON(h.t)
}
