package runtimes_test

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
	"github.com/docker/docker/api/types/filters"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/app"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/apitest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// env is a backend wired in-process (app.New) on a temp database and the
// real Docker engine, served by httptest.
type env struct {
	t        *testing.T
	app      *app.App
	srv      *httptest.Server
	key      string
	adminKey string
	org      string
}

type envOpts struct {
	noLoops bool // do not run the reconciler and settle loops
	credits float64
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	images.EnsureBase(t) // fails (never skips) without Docker
	dir := t.TempDir()
	if o.credits == 0 {
		o.credits = 1000
	}
	cfg := app.Config{Listen: "127.0.0.1:0", DataDir: dir, DatabaseURL: filepath.Join(dir, "db"), TasksDir: filepath.Join(dir, "tasks"),
		Provider: "docker", BootstrapOrg: "org1", BootstrapKey: "key-org1-" + t.Name(), BootstrapCredits: o.credits,
		AdminKey: "admin-" + t.Name(), MinTimeoutSec: 1, ReconcileInterval: 100 * time.Millisecond}
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
	if o.noLoops {
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
	e := &env{t: t, app: a, srv: srv, key: cfg.BootstrapKey, adminKey: cfg.AdminKey, org: "org1"}
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
func (e *env) removeContainers() {
	dep, err := e.app.DB.DeploymentID(context.Background())
	if err != nil {
		return
	}
	cli := dockertest.Client(e.t)
	cs, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", compute.LabelDeployment+"="+dep))})
	if err != nil {
		return
	}
	for _, c := range cs {
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
}

// containersOf lists the containers labelled with record id (all states).
func (e *env) containersOf(id string) []container.Summary {
	return dockertest.ContainersOfRecord(e.t, id)
}

// addOrg makes another org with its own key.
func (e *env) addOrg(name string, micro int64) string {
	e.t.Helper()
	ctx := context.Background()
	o, _, err := e.app.DB.EnsureOrg(ctx, name, micro)
	if err != nil {
		e.t.Fatal(err)
	}
	key := "key-" + name + "-" + e.t.Name()
	if err := e.app.DB.EnsureAPIKey(ctx, o.ID, key); err != nil {
		e.t.Fatal(err)
	}
	return key
}

type resp struct {
	code int
	body []byte
}

func (r resp) obj(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object (%d): %s", r.code, r.body)
	}
	return m
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.code, r.body) }

func (e *env) req(method, path string, body any, hdr ...string) resp {
	e.t.Helper()
	return e.reqKey(e.key, method, path, body, hdr...)
}

func (e *env) reqKey(key, method, path string, body any, hdr ...string) resp {
	e.t.Helper()
	r := apitest.Do(e.t, e.srv.URL, method, path, body, append([]string{"X-API-Key", key}, hdr...)...)
	return resp{code: r.Code, body: r.Body}
}

// must asserts the status code and returns the JSON object answered.
func (e *env) must(code int, method, path string, body any, hdr ...string) map[string]any {
	e.t.Helper()
	r := e.req(method, path, body, hdr...)
	if r.code != code {
		e.t.Fatalf("%s %s: want %d, got %s", method, path, code, r)
	}
	if len(r.body) == 0 {
		return nil
	}
	return r.obj(e.t)
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, bounded by the deadline
	}
}
