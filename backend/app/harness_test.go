package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/apitest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/dockertest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/images"
)

// testApp is a backend wired in-process on a temp database and the real
// Docker engine, served by httptest.
type testApp struct {
	t   testing.TB
	app *App
	srv *httptest.Server
	key string
}

func newTestApp(t *testing.T, mutate func(*Config)) *testApp {
	t.Helper()
	return newApp(t, mutate)
}

func newTestAppB(b *testing.B) *testApp { return newApp(b, nil) }

func newApp(tb testing.TB, mutate func(*Config)) *testApp {
	tb.Helper()
	images.EnsureBase(tb)
	dir := tb.TempDir()
	cfg := Config{Listen: "127.0.0.1:0", DataDir: dir, DatabaseURL: filepath.Join(dir, "db"), TasksDir: filepath.Join(dir, "tasks"),
		Provider: "docker", BootstrapOrg: "org1", BootstrapKey: "key-org1-" + tb.Name(), BootstrapCredits: 1000,
		MinTimeoutSec: 1, ReconcileInterval: 100 * time.Millisecond, AgentBinary: agentbin.Path(tb)}
	if mutate != nil {
		mutate(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := New(ctx, cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, loop := range a.loops {
			go func() { _ = loop(ctx) }()
		}
		<-ctx.Done()
	}()
	srv := httptest.NewServer(a.Handler)
	ta := &testApp{t: tb, app: a, srv: srv, key: cfg.BootstrapKey}
	tb.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		ta.removeContainers()
		a.Close()
	})
	return ta
}

// removeContainers deletes whatever this app's deployment left, so a failed
// test does not leak into the next.
func (ta *testApp) removeContainers() {
	dep, err := ta.app.DB.DeploymentID(context.Background())
	if err != nil {
		return
	}
	_ = dockertest.RemoveDeployment(context.Background(), dockertest.Client(ta.t), dep)
}

// containers lists the containers of a deployment (all states).
func (ta *testApp) containers(deployment string) []container.Summary {
	return dockertest.ContainersWithLabel(ta.t, compute.LabelDeployment, deployment)
}

// containersOf lists the containers labelled with record id.
func (ta *testApp) containersOf(id string) []container.Summary {
	return dockertest.ContainersOfRecord(ta.t, id)
}

type resp struct {
	code int
	body []byte
	hdr  http.Header
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object (%d): %s", r.code, r.body)
	}
	return m
}

func (ta *testApp) req(method, path string, body any, hdr ...string) resp {
	ta.t.Helper()
	return ta.reqKey(ta.key, method, path, body, hdr...)
}

func (ta *testApp) reqKey(key, method, path string, body any, hdr ...string) resp {
	ta.t.Helper()
	r := apitest.Do(ta.t, ta.srv.URL, method, path, body, append([]string{"X-API-Key", key}, hdr...)...)
	return resp{code: r.Code, body: r.Body, hdr: r.Header}
}

// create makes a sandbox and returns its id and access token.
func (ta *testApp) create(body map[string]any) (string, string) {
	ta.t.Helper()
	r := ta.req("POST", "/sandboxes", body)
	if r.code != http.StatusCreated {
		ta.t.Fatalf("create: %d %s", r.code, r.body)
	}
	m := r.json(ta.t)
	id := m["sandboxID"].(string)
	// waitReady waits a bounded time and then answers with the sandbox as it
	// is; on a loaded machine a start can outlast it, so a test that asked
	// for a ready sandbox waits until it is no longer starting (a start that
	// fails or ends still answers with its state, for the test to judge).
	if body["waitReady"] == true && m["state"] == "starting" {
		ta.waitState(id, 3*time.Minute, "running", "paused", "completed", "failed", "deleted")
	}
	return id, m["accessToken"].(string)
}

// waitState polls the sandbox until its state is one of want, with a deadline.
func (ta *testApp) waitState(id string, timeout time.Duration, want ...string) map[string]any {
	ta.t.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]any
	for time.Now().Before(deadline) {
		r := ta.req("GET", "/sandboxes/"+id, nil)
		if r.code == http.StatusOK {
			last = r.json(ta.t)
			for _, w := range want {
				if last["state"] == w {
					return last
				}
			}
		}
		time.Sleep(50 * time.Millisecond) // poll interval within the deadline
	}
	ta.t.Fatalf("sandbox %s did not reach %v within %s; last: %v", id, want, timeout, last)
	return nil
}

// waitGone polls until no container carries the record's label.
func (ta *testApp) waitGone(id string, timeout time.Duration) {
	ta.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if len(ta.containersOf(id)) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	ta.t.Fatalf("a container of sandbox %s is still there after %s", id, timeout)
}

func (ta *testApp) createB(tb testing.TB) (string, string) {
	tb.Helper()
	return ta.create(map[string]any{"waitReady": true})
}
