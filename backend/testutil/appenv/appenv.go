// Package appenv is the in-process backend that the HTTP tests of the
// service packages (billing, runtimes) run against: app.New on a temp
// database and the real Docker engine, served by httptest, with helpers to
// call it with an org's key. One copy, so a change to the wiring is made once.
package appenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/apitest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// Env is a backend wired in-process (app.New) on a temp database and the
// real Docker engine, served by httptest.
type Env struct {
	T        *testing.T
	App      *app.App
	Srv      *httptest.Server
	Key      string // org1's API key
	AdminKey string
	Org      string // the bootstrap org's id
}

// Opts tunes New.
type Opts struct {
	NoLoops bool    // do not run the reconciler and settle loops
	Credits float64 // org1's balance (default 1000)
	// Config, when set, changes the backend's configuration before it starts.
	Config func(*app.Config)
}

// New starts the backend; the test's cleanup stops it and removes its containers.
func New(t *testing.T, o Opts) *Env {
	t.Helper()
	images.EnsureBase(t) // fails (never skips) without Docker
	dir := t.TempDir()
	if o.Credits == 0 {
		o.Credits = 1000
	}
	cfg := app.Config{Listen: "127.0.0.1:0", DataDir: dir, DatabaseURL: filepath.Join(dir, "db"), TasksDir: filepath.Join(dir, "tasks"),
		Provider: "docker", BootstrapOrg: "org1", BootstrapKey: "key-org1-" + t.Name(), BootstrapCredits: o.Credits,
		AdminKey: "admin-" + t.Name(), MinTimeoutSec: 1, ReconcileInterval: 100 * time.Millisecond,
		// The sandbox agent built from the code under test, injected as the backend does.
		AgentBinary: agentbin.Path(t)}
	if o.Config != nil {
		o.Config(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	loops := a.Loops()
	if o.NoLoops {
		loops = nil
	}
	go func() {
		defer close(done)
		for _, loop := range loops {
			go func() { _ = loop(ctx) }()
		}
		<-ctx.Done()
	}()
	srv := httptest.NewServer(a.Handler)
	e := &Env{T: t, App: a, Srv: srv, Key: cfg.BootstrapKey, AdminKey: cfg.AdminKey, Org: "org1"}
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		e.removeContainers()
		a.Close()
	})
	return e
}

// removeContainers deletes what this backend's deployment left (and only
// that: other tests share the engine).
func (e *Env) removeContainers() {
	dep, err := e.App.DB.DeploymentID(context.Background())
	if err != nil {
		return
	}
	_ = dockertest.RemoveDeployment(context.Background(), dockertest.Client(e.T), dep)
}

// ContainersOf lists the containers labelled with record id (all states).
func (e *Env) ContainersOf(id string) []container.Summary {
	return dockertest.ContainersOfRecord(e.T, id)
}

// AddOrg makes another org with its own key.
func (e *Env) AddOrg(name string, micro int64) string {
	e.T.Helper()
	ctx := context.Background()
	o, _, err := e.App.DB.EnsureOrg(ctx, name, micro)
	if err != nil {
		e.T.Fatal(err)
	}
	key := "key-" + name + "-" + e.T.Name()
	if err := e.App.DB.EnsureAPIKey(ctx, o.ID, key); err != nil {
		e.T.Fatal(err)
	}
	return key
}

// Resp is an answer: its status and body.
type Resp struct {
	Code int
	Body []byte
}

// Obj decodes the body as a JSON object (failing the test otherwise).
func (r Resp) Obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response is not a JSON object (%d): %s", r.Code, r.Body)
	}
	return m
}

func (r Resp) String() string { return fmt.Sprintf("%d %s", r.Code, r.Body) }

// Req calls the backend with org1's key.
func (e *Env) Req(method, path string, body any, hdr ...string) Resp {
	e.T.Helper()
	return e.ReqKey(e.Key, method, path, body, hdr...)
}

// ReqKey calls the backend with key.
func (e *Env) ReqKey(key, method, path string, body any, hdr ...string) Resp {
	e.T.Helper()
	r := apitest.Do(e.T, e.Srv.URL, method, path, body, append([]string{"X-API-Key", key}, hdr...)...)
	return Resp{Code: r.Code, Body: r.Body}
}

// Must asserts the status code and returns the JSON object answered.
func (e *Env) Must(code int, method, path string, body any, hdr ...string) map[string]any {
	e.T.Helper()
	r := e.Req(method, path, body, hdr...)
	if r.Code != code {
		e.T.Fatalf("%s %s: want %d, got %s", method, path, code, r)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.Obj(e.T)
}

// Eventually polls cond until it returns nil or the deadline passes.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	poll.Until(t, timeout, 50*time.Millisecond, cond)
}
