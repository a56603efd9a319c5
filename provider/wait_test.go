package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/client"
)

func fastPolls(t *testing.T) {
	t.Helper()
	a, b, c, d := envPollInitial, envPollMax, sandboxPollInitial, sandboxPollMax
	envPollInitial, envPollMax, sandboxPollInitial, sandboxPollMax = 10*time.Millisecond, 40*time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { envPollInitial, envPollMax, sandboxPollInitial, sandboxPollMax = a, b, c, d })
}

func testClient(t *testing.T, h http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{BaseURL: srv.URL, APIKey: "k", RetryMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// seqServer answers status polls with the given states in turn (the last repeats).
func seqServer(t *testing.T, states []map[string]any) (*client.Client, *[]string) {
	var mu sync.Mutex
	var queries []string
	i := 0
	return testClient(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/environments/e1/status") && !strings.HasSuffix(r.URL.Path, "/sandboxes/s1") {
			http.Error(w, `{"code":404,"detail":"no route","type":"not_found"}`, 404)
			return
		}
		queries = append(queries, r.URL.RawQuery)
		st := states[min(i, len(states)-1)]
		i++
		if code, ok := st["_status"].(int); ok {
			w.WriteHeader(code)
		}
		_ = json.NewEncoder(w).Encode(st)
	}), &queries
}

func TestWaitEnvironmentReady(t *testing.T) {
	fastPolls(t)
	c, queries := seqServer(t, []map[string]any{
		{"id": "e1", "state": "building"},
		{"id": "e1", "state": "building"},
		{"id": "e1", "state": "provisioning"},
		{"id": "e1", "state": "ready", "service_urls": map[string]any{"web": map[string]any{"url": "http://127.0.0.1:1", "host": "127.0.0.1", "port": 1}}},
	})
	env, err := waitEnvironment(context.Background(), c, "acc", "main", "e1", client.EnvReady, nil)
	if err != nil {
		t.Fatal(err)
	}
	if env.State != "ready" || env.ServiceURLs["web"].Port != 1 {
		t.Fatalf("%+v", env)
	}
	if len(*queries) != 4 {
		t.Fatalf("polls %v", *queries)
	}
}

func TestWaitEnvironmentLongPollParameter(t *testing.T) {
	c, queries := seqServer(t, []map[string]any{{"id": "e1", "state": "ready"}})
	if _, err := waitEnvironment(context.Background(), c, "acc", "main", "e1", client.EnvReady, nil); err != nil {
		t.Fatal(err)
	}
	if (*queries)[0] != "wait=1" {
		t.Fatalf("first poll query %q, want wait=1", (*queries)[0])
	}
}

func TestWaitEnvironmentFailedCarriesServerError(t *testing.T) {
	fastPolls(t)
	c, _ := seqServer(t, []map[string]any{
		{"id": "e1", "state": "building"},
		{"id": "e1", "state": "failed", "error": "task build failed: exit code 3"},
	})
	_, err := waitEnvironment(context.Background(), c, "acc", "main", "e1", client.EnvReady, nil)
	if err == nil || !strings.Contains(err.Error(), "task build failed: exit code 3") {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitEnvironmentTimeout(t *testing.T) {
	fastPolls(t)
	c, _ := seqServer(t, []map[string]any{{"id": "e1", "state": "building"}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := waitEnvironment(ctx, c, "acc", "main", "e1", client.EnvReady, nil)
	if !errors.Is(err, errWaitTimeout) || !strings.Contains(err.Error(), `last state "building"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitEnvironmentTornDown(t *testing.T) {
	fastPolls(t)
	c, _ := seqServer(t, []map[string]any{
		{"id": "e1", "state": "ready"},
		{"_status": 404, "code": 404, "detail": "environment not found", "type": "not_found"},
	})
	if _, err := waitEnvironment(context.Background(), c, "acc", "main", "e1", client.EnvTornDown, nil); err != nil {
		t.Fatalf("404 while waiting for torn_down: %v", err)
	}
}

func TestWaitSandboxFailedCarriesDiagnostic(t *testing.T) {
	fastPolls(t)
	c, _ := seqServer(t, []map[string]any{
		{"sandboxID": "s1", "state": "starting"},
		{"sandboxID": "s1", "state": "failed", "diagnostic": "image missing: no such image nope:latest"},
	})
	_, err := waitSandbox(context.Background(), c, "s1", client.SandboxRunning, nil)
	if err == nil || !strings.Contains(err.Error(), "image missing: no such image nope:latest") {
		t.Fatalf("err = %v", err)
	}
}

func TestWaitSandboxDeleted(t *testing.T) {
	fastPolls(t)
	c, _ := seqServer(t, []map[string]any{
		{"sandboxID": "s1", "state": "running"},
		{"sandboxID": "s1", "state": "deleted"},
	})
	if _, err := waitSandbox(context.Background(), c, "s1", client.SandboxDeleted, nil); err != nil {
		t.Fatal(err)
	}
}
