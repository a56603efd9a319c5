package app

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/pgtest"
)

// newReplica wires a backend on the PostgreSQL database url and the E2B
// fake, as one replica of several. Only a driving replica runs its loops;
// the other only serves requests, so whatever happens to its records is
// another replica's work (until leases share the work, two driving
// replicas would both drive every record).
func newReplica(t *testing.T, url string, fake *e2bfake.Server, driving bool, mutate ...func(*Config)) *testApp {
	t.Helper()
	return newReplicaLog(t, url, fake, driving, slog.New(slog.NewTextHandler(io.Discard, nil)), mutate...)
}

// newReplicaLog is newReplica logging to log.
func newReplicaLog(t *testing.T, url string, fake *e2bfake.Server, driving bool, log *slog.Logger, mutate ...func(*Config)) *testApp {
	t.Helper()
	dir := t.TempDir()
	cfg := Config{Listen: "127.0.0.1:0", DataDir: dir, DatabaseURL: url, TasksDir: filepath.Join(dir, "tasks"),
		Provider: "e2b", BootstrapOrg: "org1", BootstrapKey: "key-org1-replicas", BootstrapCredits: 1000,
		MinTimeoutSec: 1, ReconcileInterval: 100 * time.Millisecond,
		E2B: &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(a.loops))
	if driving {
		for _, loop := range a.loops {
			go func() { _ = loop(ctx); done <- struct{}{} }()
		}
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		if driving {
			for range a.loops {
				<-done
			}
		}
		a.Close()
	})
	return &testApp{t: t, app: a, srv: srv, key: cfg.BootstrapKey}
}

// §8, the test 4: waitReady on replica A returns when replica B
// finished the work, and A's answer and reads agree with B's. A's waiters
// are woken by B's commit itself: a subscription on A (what waitReady and
// ?wait= block on) fires when B moves the record to running, though A's
// own loops never touch it.
func TestWaitReadyWokenByOtherReplica(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	fake := e2bfake.New(t)
	release := fake.Hold("POST /sandboxes")
	defer release()
	a := newReplica(t, url, fake, false)
	b := newReplica(t, url, fake, true)

	answer := make(chan resp, 1)
	go func() { answer <- a.req("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 120}) }()
	waitFor(t, "B to start the create", func() bool { return fake.Held() == 1 })
	var id string
	if err := a.app.DB.Reader().QueryRow(`SELECT id FROM sandboxes`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	changed, unsubscribe := a.app.Reconciler.Subscribe(id)
	defer unsubscribe()
	release()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("B moved the record on, and A's waiters were not woken")
	}

	var r resp
	select {
	case r = <-answer:
	case <-time.After(30 * time.Second):
		t.Fatal("waitReady on A did not return after B finished the create")
	}
	if r.code != http.StatusCreated || r.json(t)["state"] != "running" || r.json(t)["sandboxID"] != id {
		t.Fatalf("waitReady on A while B drives: %d %s", r.code, r.body)
	}
	for name, ta := range map[string]*testApp{"A": a, "B": b} {
		if got := ta.req("GET", "/sandboxes/"+id, nil).json(t)["state"]; got != "running" {
			t.Fatalf("%s reads %v after A answered running", name, got)
		}
	}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A delete on replica A cancels the create replica B has in flight for that
// record (B hears the record is stopping), so the slow engine call does not
// hold the record, and nothing is left on E2B.
func TestDeleteOnOneReplicaCancelsCreateOnAnother(t *testing.T) {
	url := pgtest.Start(t).NewDatabase(t)
	fake := e2bfake.New(t)
	release := fake.Hold("POST /sandboxes")
	defer release()
	a := newReplica(t, url, fake, false)
	newReplica(t, url, fake, true)

	id, _ := a.create(map[string]any{"timeout": 120})
	waitFor(t, "B to start the create", func() bool { return fake.Held() == 1 })
	if d := a.req("DELETE", "/sandboxes/"+id, nil); d.code != http.StatusNoContent {
		t.Fatalf("delete on A: %d %s", d.code, d.body)
	}
	// The hold is never released: only B cancelling its request ends it.
	waitFor(t, "B to give up its create after A deleted the record", func() bool { return fake.Held() == 0 })
	st := a.waitState(id, 10*time.Second, "killed", "deleted", "stopped")
	if len(fake.Sandboxes()) != 0 {
		t.Fatalf("E2B runs a sandbox of a deleted record: %+v (record %v)", fake.Sandboxes(), st)
	}
}

// DREADNODE_READ_BARRIER takes on or off; anything else is refused by name.
func TestReadBarrierSetting(t *testing.T) {
	t.Setenv("DREADNODE_READ_BARRIER", "off")
	if c, err := ConfigFromEnv(); err != nil || !c.NoReadBarrier {
		t.Fatalf("off: %+v, %v", c.NoReadBarrier, err)
	}
	t.Setenv("DREADNODE_READ_BARRIER", "sometimes")
	if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "DREADNODE_READ_BARRIER") {
		t.Fatalf("a bad value must be refused naming the variable, got %v", err)
	}
}
