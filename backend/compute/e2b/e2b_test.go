package e2b_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
)

// fastRetry keeps backoffs tiny so retry tests take milliseconds.
var fastRetry = e2b.RetryConfig{MaxAttempts: 5, MaxElapsed: 10 * time.Second, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond}

type env struct {
	fake *e2bfake.Server
	p    *e2b.Provider
	prov compute.Provider
}

func setup(t *testing.T, mutate func(*e2b.Config), opts ...e2bfake.Option) env {
	t.Helper()
	opts = append([]e2bfake.Option{e2bfake.WithTemplate(e2bfake.Template{ID: "dreadnode-web", CPUCount: 2, MemoryMB: 1024})}, opts...)
	fake := e2bfake.New(t, opts...)
	cfg := e2b.Config{
		APIKey:       fake.APIKey,
		APIURL:       fake.URL,
		Domain:       fake.Domain,
		HTTPClient:   fake.HTTPClient(),
		EnvdURL:      fake.EnvdURL,
		Retry:        fastRetry,
		ListPageSize: 3,
		Scope:        "dep-1",
		Templates: map[string]compute.Template{
			"base": {ID: "base", CPUCount: 2, MemoryMB: 512},
			"web":  {ID: "dreadnode-web", CPUCount: 2, MemoryMB: 1024, Ports: []int{8080}},
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := e2b.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env{fake: fake, p: p, prov: p}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

func wantKind(t *testing.T, err error, kind compute.Kind, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got nil", kind)
	}
	if got := compute.KindOf(err); got != kind {
		t.Fatalf("want kind %s, got %s: %v", kind, got, err)
	}
	for _, c := range contains {
		if !strings.Contains(err.Error(), c) {
			t.Errorf("error %q does not mention %q", err.Error(), c)
		}
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

func spec(record string) compute.Spec {
	return compute.Spec{RecordID: record, OrgID: "org-1", Kind: "runtime", Template: "base", Timeout: 10 * time.Minute}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)

	inst, err := e.prov.Create(ctx, compute.Spec{
		RecordID: "rec-1", OrgID: "org-1", Kind: "runtime", Template: "base",
		EnvVars:  map[string]string{"FOO": "bar"},
		Metadata: map[string]string{"user": "alice", compute.LabelRecord: "spoofed"},
		Timeout:  10 * time.Minute, AutoPause: true,
		Network: compute.Network{AllowInternetAccess: ptr(false), AllowPublicTraffic: ptr(false), AllowOut: []string{"8.8.8.8/32"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != compute.StatusRunning || inst.RecordID != "rec-1" || inst.OrgID != "org-1" || inst.CPUCount != 2 || inst.MemoryMB != 512 {
		t.Fatalf("unexpected instance %+v", inst)
	}
	if !strings.Contains(inst.Ref.Data, "envdAccessToken") {
		t.Fatalf("Ref.Data %q carries no envd access token", inst.Ref.Data)
	}
	sb, ok := e.fake.Sandbox(inst.Ref.ID)
	if !ok {
		t.Fatal("the fake has no such sandbox")
	}
	wantMD := map[string]string{
		"user": "alice", compute.LabelManaged: "true", compute.LabelRecord: "rec-1", compute.LabelDeployment: "dep-1",
		compute.LabelOrg: "org-1", compute.LabelKind: "runtime",
	}
	for k, v := range wantMD {
		if sb.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, sb.Metadata[k], v, sb.Metadata)
		}
	}
	if got := sb.EndAt.Sub(sb.StartedAt); got != 10*time.Minute+30*time.Second {
		t.Errorf("TTL %s, want 10m plus the default grace of 30s", got)
	}
	if !sb.AutoPause || !sb.Secure || sb.AllowInternetAccess == nil || *sb.AllowInternetAccess || sb.EnvVars["FOO"] != "bar" {
		t.Errorf("create body not passed through: %+v", sb)
	}
	if !strings.Contains(string(sb.Network), `"allowOut":["8.8.8.8/32"]`) || !strings.Contains(string(sb.Network), `"allowPublicTraffic":false`) {
		t.Errorf("network %s", sb.Network)
	}

	got, err := e.prov.Get(ctx, inst.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != compute.StatusRunning || got.RecordID != "rec-1" || got.OrgID != "org-1" || got.StartedAt.IsZero() {
		t.Fatalf("get: %+v", got)
	}

	res, err := e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"echo", "hello", "world"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hello world\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	res, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"env"}, Env: map[string]string{"BAZ": "qux"}})
	if err != nil || !strings.Contains(string(res.Stdout), "FOO=bar\n") || !strings.Contains(string(res.Stdout), "BAZ=qux\n") {
		t.Fatalf("exec env: %q %v", res.Stdout, err)
	}

	if err := e.prov.WriteFile(ctx, inst.Ref, "/tmp/dir/a.txt", []byte("alpha\x00beta")); err != nil {
		t.Fatal(err)
	}
	data, err := e.prov.ReadFile(ctx, inst.Ref, "/tmp/dir/a.txt")
	if err != nil || string(data) != "alpha\x00beta" {
		t.Fatalf("read: %q %v", data, err)
	}
	res, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"cat", "/tmp/dir/a.txt"}})
	if err != nil || string(res.Stdout) != "alpha\x00beta" {
		t.Fatalf("cat: %+v %v", res, err)
	}

	if err := e.prov.Pause(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}
	if got, err := e.prov.Get(ctx, inst.Ref); err != nil || got.Status != compute.StatusPaused {
		t.Fatalf("after pause: %+v %v", got, err)
	}
	wantKind(t, e.prov.Pause(ctx, inst.Ref), compute.KindConflict, "not running")
	_, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}})
	wantKind(t, err, compute.KindConflict, "paused")

	resumed, wasPaused, err := e.p.Connect(ctx, inst.Ref)
	if err != nil || !wasPaused {
		t.Fatalf("connect of a paused sandbox: resumed=%v %v", wasPaused, err)
	}
	if resumed.Status != compute.StatusRunning || resumed.RecordID != "rec-1" || resumed.Ref.ID != inst.Ref.ID {
		t.Fatalf("resumed: %+v", resumed)
	}
	if resumed.Ref.Data == inst.Ref.Data {
		t.Fatal("Resume did not refresh the envd access token in Ref.Data")
	}
	if sb, _ := e.fake.Sandbox(inst.Ref.ID); sb.Resumes != 1 || sb.State != "running" {
		t.Fatalf("fake after resume: %+v", sb)
	}
	// Files survive the pause; the new token works.
	if data, err := e.prov.ReadFile(ctx, resumed.Ref, "/tmp/dir/a.txt"); err != nil || string(data) != "alpha\x00beta" {
		t.Fatalf("read after resume: %q %v", data, err)
	}
	// A caller holding the old Ref still gets through (the token is re-read).
	if res, err := e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec with a stale token: %+v %v", res, err)
	}

	again, err := e.prov.Resume(ctx, resumed.Ref) // running: connect answers 200
	if err != nil || again.Status != compute.StatusRunning {
		t.Fatalf("resume of a running sandbox: %+v %v", again, err)
	}
	if sb, _ := e.fake.Sandbox(inst.Ref.ID); sb.Resumes != 1 {
		t.Fatalf("a running sandbox was resumed again: %d", sb.Resumes)
	}
	if _, was, err := e.p.Connect(ctx, resumed.Ref); err != nil || was {
		t.Fatalf("connect of a running sandbox reported resumed=%v %v", was, err)
	}

	before := time.Now()
	if err := e.prov.SetTimeout(ctx, resumed.Ref, 20*time.Minute); err != nil {
		t.Fatal(err)
	}
	if sb, _ := e.fake.Sandbox(inst.Ref.ID); sb.EndAt.Before(before.Add(20*time.Minute+29*time.Second)) || sb.EndAt.After(time.Now().Add(20*time.Minute+31*time.Second)) {
		t.Fatalf("timeout not applied: end %s", sb.EndAt)
	}
	if err := e.p.Refresh(ctx, resumed.Ref, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if sb, _ := e.fake.Sandbox(inst.Ref.ID); sb.EndAt.Before(before.Add(30*time.Minute - time.Second)) {
		t.Fatalf("refresh not applied: end %s", sb.EndAt)
	}

	e.fake.AddLog(inst.Ref.ID, "warn", "disk almost full")
	logs, err := e.prov.Logs(ctx, resumed.Ref)
	if err != nil || !strings.Contains(logs, "INFO sandbox started") || !strings.Contains(logs, "WARN disk almost full") {
		t.Fatalf("logs: %q %v", logs, err)
	}
	m, err := e.prov.Metrics(ctx, resumed.Ref)
	if err != nil || m != (compute.Metrics{}) {
		t.Fatalf("metrics before any reading: %+v %v", m, err)
	}
	e.fake.SetMetrics(inst.Ref.ID, e2bfake.Metric{CPUUsedPct: 12.5, MemUsed: 100 << 20, DiskUsed: 1 << 30})
	m, err = e.prov.Metrics(ctx, resumed.Ref)
	if err != nil || m.CPUPercent != 12.5 || m.CPUCount != 2 || m.MemoryUsedBytes != 100<<20 || m.MemoryLimitBytes != 512<<20 || m.DiskUsedBytes != 1<<30 {
		t.Fatalf("metrics: %+v %v", m, err)
	}

	if err := e.prov.Delete(ctx, resumed.Ref); err != nil {
		t.Fatal(err)
	}
	_, err = e.prov.Get(ctx, resumed.Ref)
	wantKind(t, err, compute.KindNotFound, inst.Ref.ID)
	if err := e.prov.Delete(ctx, resumed.Ref); err != nil {
		t.Fatalf("delete of a deleted sandbox: %v", err)
	}
}

func TestListPagesAndMapsMetadata(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, e2bfake.WithPageSize(2))
	ctx := ctxT(t)
	ours := map[string]string{} // sandbox id -> record id
	for i := range 5 {
		rec := "rec-" + string(rune('a'+i))
		inst, err := e.prov.Create(ctx, spec(rec))
		if err != nil {
			t.Fatal(err)
		}
		ours[inst.Ref.ID] = rec
	}
	// Someone else's sandboxes, and an orphan of ours whose record is gone.
	e.fake.AddSandbox(e2bfake.SandboxSpec{})
	e.fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{"team": "other", compute.LabelRecord: "not-managed"}})
	// Another backend's (another database's) sandbox in the same E2B team.
	e.fake.AddSandbox(e2bfake.SandboxSpec{Metadata: map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: "theirs", compute.LabelDeployment: "dep-2",
	}})
	orphan := e.fake.AddSandbox(e2bfake.SandboxSpec{Paused: true, Metadata: map[string]string{
		compute.LabelManaged: "true", compute.LabelRecord: "ghost", compute.LabelOrg: "org-9", compute.LabelKind: "task",
		compute.LabelDeployment: "dep-1",
	}})
	ours[orphan] = "ghost"
	if err := e.prov.Pause(ctx, compute.Ref{ID: firstKey(ours, orphan)}); err != nil {
		t.Fatal(err)
	}

	listsBefore := e.fake.Count(e2bfake.RouteList)
	got, err := e.prov.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pages := e.fake.Count(e2bfake.RouteList) - listsBefore; pages != 3 {
		t.Errorf("List read %d pages of 2 for 6 sandboxes, want 3", pages)
	}
	if len(got) != len(ours) {
		t.Fatalf("List returned %d instances, want %d: %+v", len(got), len(ours), got)
	}
	paused := 0
	for _, inst := range got {
		rec, ok := ours[inst.Ref.ID]
		if !ok {
			t.Errorf("List returned a sandbox that is not ours: %+v", inst)
			continue
		}
		if inst.RecordID != rec {
			t.Errorf("%s: record %q, want %q", inst.Ref.ID, inst.RecordID, rec)
		}
		if inst.Status == compute.StatusPaused {
			paused++
		}
		if inst.Ref.ID == orphan && inst.OrgID != "org-9" {
			t.Errorf("orphan org %q", inst.OrgID)
		}
		if inst.Ref.ID != orphan && inst.OrgID != "org-1" {
			t.Errorf("%s: org %q", inst.Ref.ID, inst.OrgID)
		}
	}
	if paused != 2 {
		t.Errorf("%d paused instances listed, want 2", paused)
	}
	// The client asked for our label, both states, and a page size.
	for _, r := range e.fake.Requests() {
		if r.Route == e2bfake.RouteList && r.Query.Get("limit") == "3" {
			if r.Query.Get("metadata") != compute.LabelDeployment+"=dep-1&"+compute.LabelManaged+"=true" || r.Query.Get("state") != "running,paused" {
				t.Errorf("list query %v", r.Query)
			}
		}
	}
}

func firstKey(m map[string]string, except string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != except {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys[0]
}

func TestCreateIsIdempotentPerRecord(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	a, err := e.prov.Create(ctx, spec("rec-same"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.prov.Pause(ctx, a.Ref); err != nil {
		t.Fatal(err)
	}
	b, err := e.prov.Create(ctx, spec("rec-same"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Ref.ID != b.Ref.ID || b.Status != compute.StatusPaused || !strings.Contains(b.Ref.Data, "envdAccessToken") {
		t.Fatalf("second create did not adopt: %+v vs %+v", a, b)
	}
	if n := len(e.fake.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes, want 1", n)
	}
}

func TestCreateAdoptsWhenTheAnswerIsLost(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	// E2B creates the sandbox, then the connection drops before the answer.
	e.fake.FailNext(e2bfake.RouteCreate, 1, e2bfake.Fault{DropConnection: true, AfterHandling: true})
	inst, err := e.prov.Create(ctx, spec("rec-lost"))
	if err != nil {
		t.Fatal(err)
	}
	sbs := e.fake.Sandboxes()
	if len(sbs) != 1 || sbs[0].ID != inst.Ref.ID || inst.RecordID != "rec-lost" {
		t.Fatalf("want the one sandbox adopted, got %+v and %+v", inst, sbs)
	}
	if n := e.fake.Count(e2bfake.RouteCreate); n != 1 {
		t.Fatalf("%d creates sent, want 1", n)
	}
	// The adopted instance is usable: its Ref carries the token.
	if res, err := e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v", err)
	}
}

func TestAuthFailsFast(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			ctx := ctxT(t)
			e.fake.FailNext(e2bfake.RouteGet, 10, e2bfake.Fault{Status: status, Message: "nope"})
			_, err := e.prov.Get(ctx, compute.Ref{ID: "isomething"})
			wantKind(t, err, compute.KindAuth, "E2B_API_KEY", "nope")
			if n := len(e.fake.Requests()); n != 1 {
				t.Fatalf("%d requests made, want exactly 1", n)
			}
		})
	}
	t.Run("wrong key", func(t *testing.T) {
		t.Parallel()
		e := setup(t, func(c *e2b.Config) { c.APIKey = "e2b_wrong" })
		ctx := ctxT(t)
		_, err := e.prov.Create(ctx, spec("rec-1"))
		wantKind(t, err, compute.KindAuth, "E2B_API_KEY", "401")
		if n := len(e.fake.Requests()); n != 1 {
			t.Fatalf("%d requests made, want exactly 1", n)
		}
		wantKind(t, e.prov.Ping(ctx), compute.KindAuth, "E2B_API_KEY")
	})
}

func TestTransientFailuresAreRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		route string
		fault e2bfake.Fault
		call  func(context.Context, env, compute.Ref) error
	}{
		{"429 on create", e2bfake.RouteCreate, e2bfake.Fault{Status: 429, Message: "concurrency limit reached"},
			func(ctx context.Context, e env, _ compute.Ref) error {
				_, err := e.prov.Create(ctx, spec("rec-x"))
				return err
			}},
		{"503 capacity on create", e2bfake.RouteCreate, e2bfake.Fault{Status: 503, ErrorCode: "sandbox_capacity_unavailable", Message: "no capacity"},
			func(ctx context.Context, e env, _ compute.Ref) error {
				_, err := e.prov.Create(ctx, spec("rec-x"))
				return err
			}},
		{"503 on connect", e2bfake.RouteConnect, e2bfake.Fault{Status: 503, ErrorCode: "sandbox_capacity_unavailable"},
			func(ctx context.Context, e env, r compute.Ref) error { _, err := e.prov.Resume(ctx, r); return err }},
		{"502 on get", e2bfake.RouteGet, e2bfake.Fault{Status: 502},
			func(ctx context.Context, e env, r compute.Ref) error { _, err := e.prov.Get(ctx, r); return err }},
		{"504 on pause", e2bfake.RoutePause, e2bfake.Fault{Status: 504},
			func(ctx context.Context, e env, r compute.Ref) error { return e.prov.Pause(ctx, r) }},
		{"dropped connection on list", e2bfake.RouteList, e2bfake.Fault{DropConnection: true},
			func(ctx context.Context, e env, _ compute.Ref) error { _, err := e.prov.List(ctx); return err }},
		{"429 with Retry-After on delete", e2bfake.RouteDelete, e2bfake.Fault{Status: 429, RetryAfter: "0"},
			func(ctx context.Context, e env, r compute.Ref) error { return e.prov.Delete(ctx, r) }},
		{"502 from the envd proxy", e2bfake.RouteFilesGet, e2bfake.Fault{Status: 502},
			func(ctx context.Context, e env, r compute.Ref) error {
				_, err := e.prov.ReadFile(ctx, r, "/etc/hostname")
				return err
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			ctx := ctxT(t)
			inst, err := e.prov.Create(ctx, spec("rec-setup"))
			if err != nil {
				t.Fatal(err)
			}
			e.fake.SetFile(inst.Ref.ID, "/etc/hostname", []byte("sandbox\n"))
			before := e.fake.Count(tc.route)
			e.fake.FailNext(tc.route, 2, tc.fault)
			if err := tc.call(ctx, e, inst.Ref); err != nil {
				t.Fatalf("not retried to success: %v", err)
			}
			if n := e.fake.Count(tc.route) - before; n != 3 {
				t.Fatalf("%d requests to %s, want 3 (2 failures, 1 success)", n, tc.route)
			}
		})
	}
}

func TestRetriesAreBoundedInCount(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *e2b.Config) { c.Retry.MaxAttempts = 4 })
	ctx := ctxT(t)
	e.fake.FailNext(e2bfake.RouteCreate, 100, e2bfake.Fault{Status: 503, ErrorCode: "sandbox_capacity_unavailable", Message: "cluster full"})
	_, err := e.prov.Create(ctx, compute.Spec{Template: "base"})
	wantKind(t, err, compute.KindUnavailable, "sandbox_capacity_unavailable", "cluster full", "4 attempts")
	if n := e.fake.Count(e2bfake.RouteCreate); n != 4 {
		t.Fatalf("%d attempts, want 4", n)
	}

	e.fake.ClearFaults()
	e.fake.FailNext(e2bfake.RouteGet, 100, e2bfake.Fault{Status: 429, Message: "rate limit"})
	_, err = e.prov.Get(ctx, compute.Ref{ID: "iabc"})
	wantKind(t, err, compute.KindUnavailable, "429", "concurrent-sandbox limit", "rate limit")
}

func TestRetriesAreBoundedInTime(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *e2b.Config) {
		c.Retry = e2b.RetryConfig{MaxAttempts: 1000, MaxElapsed: 150 * time.Millisecond, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}
	})
	ctx := ctxT(t)
	e.fake.FailNext(e2bfake.RouteGet, 1000, e2bfake.Fault{DropConnection: true})
	start := time.Now()
	_, err := e.prov.Get(ctx, compute.Ref{ID: "iabc"})
	elapsed := time.Since(start)
	wantKind(t, err, compute.KindUnavailable, "cannot reach the E2B API")
	n := e.fake.Count(e2bfake.RouteGet)
	if n < 2 || n >= 1000 {
		t.Fatalf("%d attempts; want retries stopped by time, not count", n)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("gave up after %s; MaxElapsed is 150ms", elapsed)
	}
}

func TestStatusMapping(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)

	_, err := e.prov.Get(ctx, compute.Ref{ID: "inosuchsandbox"})
	wantKind(t, err, compute.KindNotFound, "inosuchsandbox")
	wantKind(t, e.prov.Pause(ctx, compute.Ref{ID: "inosuchsandbox"}), compute.KindNotFound)
	_, err = e.prov.Resume(ctx, compute.Ref{ID: "inosuchsandbox"})
	wantKind(t, err, compute.KindNotFound)
	wantKind(t, e.prov.SetTimeout(ctx, compute.Ref{ID: "inosuchsandbox"}, time.Minute), compute.KindNotFound)
	_, err = e.prov.Logs(ctx, compute.Ref{ID: "inosuchsandbox"})
	wantKind(t, err, compute.KindNotFound)
	_, err = e.prov.Metrics(ctx, compute.Ref{ID: "inosuchsandbox"})
	wantKind(t, err, compute.KindNotFound)

	e.fake.FailNext(e2bfake.RouteCreate, 1, e2bfake.Fault{Status: 400, Message: "envVars must be strings"})
	_, err = e.prov.Create(ctx, spec("rec-1"))
	wantKind(t, err, compute.KindInvalid, "envVars must be strings")

	e.fake.FailNext(e2bfake.RouteCreate, 1, e2bfake.Fault{Status: 500, ErrorCode: "sandbox_create_failed", Message: "boom"})
	_, err = e.prov.Create(ctx, spec("rec-1"))
	wantKind(t, err, compute.KindInternal, "sandbox_create_failed", "boom")

	_, err = e.prov.Create(ctx, compute.Spec{RecordID: "rec-2", Template: "no-such-template"})
	wantKind(t, err, compute.KindImageMissing, "no-such-template")

	_, err = e.prov.Create(ctx, compute.Spec{RecordID: "rec-3", Template: "base", CPUCount: 8})
	wantKind(t, err, compute.KindInvalid, "CPU")
	if _, err := e.prov.Create(ctx, compute.Spec{RecordID: "rec-4", Template: "base", CPUCount: 2, MemoryMB: 512}); err != nil {
		t.Fatalf("the template's own resources must be accepted: %v", err)
	}

	short, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-short.Done()
	_, err = e.prov.Get(short, compute.Ref{ID: "iabc"})
	wantKind(t, err, compute.KindTimeout)
}

func TestDeletedBehindOurBack(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	inst, err := e.prov.Create(ctx, spec("rec-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !e.fake.Kill(inst.Ref.ID) {
		t.Fatal("kill")
	}
	_, err = e.prov.Get(ctx, inst.Ref)
	wantKind(t, err, compute.KindNotFound)
	_, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"true"}})
	wantKind(t, err, compute.KindNotFound)
	_, err = e.prov.ReadFile(ctx, inst.Ref, "/etc/hostname")
	wantKind(t, err, compute.KindNotFound)
	wantKind(t, e.prov.WriteFile(ctx, inst.Ref, "/x", []byte("x")), compute.KindNotFound)
	if err := e.prov.Delete(ctx, inst.Ref); err != nil {
		t.Fatal(err)
	}

	// A TTL that runs out without autoPause kills the sandbox too.
	inst, err = e.prov.Create(ctx, spec("rec-2"))
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Expire(inst.Ref.ID)
	_, err = e.prov.Get(ctx, inst.Ref)
	wantKind(t, err, compute.KindNotFound)
}

func TestExec(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	inst, err := e.prov.Create(ctx, spec("rec-1"))
	if err != nil {
		t.Fatal(err)
	}

	res, err := e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"cat", "/missing"}})
	if err != nil || res.ExitCode != 1 || string(res.Stderr) != "cat: /missing: No such file or directory\n" || len(res.Stdout) != 0 {
		t.Fatalf("failing command: %+v %v", res, err)
	}
	res, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"exit", "42"}})
	if err != nil || res.ExitCode != 42 {
		t.Fatalf("exit code: %+v %v", res, err)
	}
	res, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"pwd"}, Cwd: "/srv"})
	if err != nil || string(res.Stdout) != "/srv\n" {
		t.Fatalf("cwd: %+v %v", res, err)
	}
	_, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"no-such-binary"}})
	wantKind(t, err, compute.KindInvalid, "no-such-binary")
	_, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{})
	wantKind(t, err, compute.KindInvalid)

	start := time.Now()
	_, err = e.prov.Exec(ctx, inst.Ref, compute.ExecRequest{Cmd: []string{"sleep", "3600"}, Timeout: 100 * time.Millisecond})
	wantKind(t, err, compute.KindTimeout, "sleep 3600", "timeout")
	if time.Since(start) > 10*time.Second {
		t.Fatalf("the timeout was not honoured: %s", time.Since(start))
	}
	eventually(t, "the timed-out process to be killed", func() bool { return e.fake.Running() == 0 })
	sigs := e.fake.Signals()
	if len(sigs) != 1 || sigs[0].Signal != process.Signal_SIGNAL_SIGKILL || sigs[0].SandboxID != inst.Ref.ID {
		t.Fatalf("signals %+v, want one SIGKILL", sigs)
	}
}

func TestFiles(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *e2b.Config) { c.User = "user" })
	ctx := ctxT(t)
	inst, err := e.prov.Create(ctx, spec("rec-1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.prov.ReadFile(ctx, inst.Ref, "/nope.txt")
	wantKind(t, err, compute.KindNotFound, "/nope.txt")
	if err := e.prov.WriteFile(ctx, inst.Ref, "notes/todo.txt", []byte("relative")); err != nil {
		t.Fatal(err)
	}
	if data, ok := e.fake.File(inst.Ref.ID, "/home/user/notes/todo.txt"); !ok || string(data) != "relative" {
		t.Fatalf("a relative path must land in the user's home: %q %v", data, ok)
	}
	_, err = e.prov.ReadFile(ctx, inst.Ref, "/home/user/notes")
	wantKind(t, err, compute.KindInvalid, "directory")
	if err := e.prov.WriteFile(ctx, inst.Ref, "/empty", nil); err != nil {
		t.Fatal(err)
	}
	if data, err := e.prov.ReadFile(ctx, inst.Ref, "/empty"); err != nil || len(data) != 0 {
		t.Fatalf("empty file: %q %v", data, err)
	}
	for _, r := range e.fake.Requests() {
		if strings.HasPrefix(r.Route, "envd ") && r.Route != e2bfake.RouteProcessStart && r.Query.Get("username") != "user" {
			t.Errorf("%s without username: %v", r.Route, r.Query)
		}
	}
}

func TestMainCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	s := spec("rec-main")
	s.Command = []string{"sleep", "3600"}
	inst, err := e.prov.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the main process to run", func() bool { return e.fake.Running() == 1 })

	s = spec("rec-bad")
	s.Command = []string{"no-such-entrypoint"}
	_, err = e.prov.Create(ctx, s)
	wantKind(t, err, compute.KindEntrypoint, "no-such-entrypoint")
	for _, sb := range e.fake.Sandboxes() {
		if sb.ID != inst.Ref.ID {
			t.Fatalf("the sandbox whose entrypoint failed was left behind: %+v", sb)
		}
	}
}

func TestEndpointsAndServiceURL(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	inst, err := e.prov.Create(ctx, compute.Spec{RecordID: "rec-web", Template: "web"})
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := e.fake.Sandbox(inst.Ref.ID)
	if sb.TemplateID != "dreadnode-web" {
		t.Fatalf("our template id was not mapped to E2B's: %q", sb.TemplateID)
	}
	ep, ok := inst.Endpoints[8080]
	want := "https://8080-" + inst.Ref.ID + ".e2b.test"
	if !ok || ep.URL != want || ep.Host != "8080-"+inst.Ref.ID+".e2b.test" || ep.Port != 443 {
		t.Fatalf("endpoint %+v, want %s", inst.Endpoints, want)
	}
	got, err := e.prov.Get(ctx, inst.Ref)
	if err != nil || got.Endpoints[8080].URL != want {
		t.Fatalf("get endpoints: %+v %v", got.Endpoints, err)
	}
	if e.p.ServiceURL("abc", 3000) != "https://3000-abc.e2b.test" {
		t.Fatal(e.p.ServiceURL("abc", 3000))
	}
	tmpls, err := e.prov.Templates(ctx)
	if err != nil || len(tmpls) != 2 || tmpls[0].ID != "base" || tmpls[1].ID != "web" || !slices.Equal(tmpls[1].Ports, []int{8080}) {
		t.Fatalf("templates %+v %v", tmpls, err)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	if err := e.prov.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	e.fake.FailNext(e2bfake.RouteList, 5, e2bfake.Fault{Status: 503})
	wantKind(t, e.prov.Ping(ctx), compute.KindUnavailable, "503")
	if n := e.fake.Count(e2bfake.RouteList); n != 2 {
		t.Fatalf("%d list requests, want 2 (ping does not retry)", n)
	}
}

func TestNewAndConfig(t *testing.T) {
	_, err := e2b.New(e2b.Config{})
	if err == nil || !strings.Contains(err.Error(), "E2B_API_KEY") {
		t.Fatalf("New without a key: %v", err)
	}
	_, err = e2b.New(e2b.Config{APIKey: "k", APIURL: "ftp://x"})
	if err == nil || !strings.Contains(err.Error(), "E2B_API_URL") {
		t.Fatalf("New with a bad URL: %v", err)
	}
	cfg := e2b.ConfigFrom(config.E2B{APIKey: "e2b_abc", Domain: "example.dev"})
	p, err := e2b.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ServiceURL("sbx", 8080); got != "https://8080-sbx.example.dev" {
		t.Fatal(got)
	}
	p, err = e2b.New(e2b.ConfigFrom(config.E2B{APIKey: "e2b_abc"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.ServiceURL("sbx", 8080); got != "https://8080-sbx.e2b.app" {
		t.Fatal(got)
	}
}

func TestErrorsAreProviderErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	_, err := e.prov.Get(ctxT(t), compute.Ref{ID: "inope"})
	var pe *compute.Error
	if !errors.As(err, &pe) || pe.Op != "get" {
		t.Fatalf("%T %v", err, err)
	}
}

func TestVolumes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	s := spec("rec-v")
	s.Volumes = []compute.Volume{{Name: "data", Path: "/data"}, {Name: "cache dir", Path: "/cache"}}
	inst, err := e.prov.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	wantVols := []string{"dn-dep-1-rec-v-cache-dir", "dn-dep-1-rec-v-data"}
	if got := e.fake.Volumes(); !slices.Equal(got, wantVols) {
		t.Fatalf("volumes %v, want %v", got, wantVols)
	}
	sb, _ := e.fake.Sandbox(inst.Ref.ID)
	if len(sb.VolumeMounts) != 2 || sb.VolumeMounts[0] != (e2bfake.VolumeMount{Name: "dn-dep-1-rec-v-data", Path: "/data"}) {
		t.Fatalf("mounts %+v", sb.VolumeMounts)
	}
	// Adopting the same record makes no new volumes.
	again, err := e.prov.Create(ctx, s)
	if err != nil || again.Ref.ID != inst.Ref.ID || len(e.fake.Volumes()) != 2 {
		t.Fatalf("re-create: %+v %v %v", again, err, e.fake.Volumes())
	}
	// Delete through a listed Ref (what the orphan sweep holds) removes them.
	list, err := e.prov.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := e.prov.Delete(ctx, list[0].Ref); err != nil {
		t.Fatal(err)
	}
	if got := e.fake.Volumes(); len(got) != 0 {
		t.Fatalf("volumes left behind: %v", got)
	}

	// A create E2B refuses does not leave its volumes behind.
	e.fake.FailNext(e2bfake.RouteCreate, 1, e2bfake.Fault{Status: 400, Message: "bad"})
	_, err = e.prov.Create(ctx, s)
	wantKind(t, err, compute.KindInvalid, "bad")
	if got := e.fake.Volumes(); len(got) != 0 {
		t.Fatalf("volumes left behind after a refused create: %v", got)
	}

	s.Volumes = []compute.Volume{{Name: "ro", Path: "/ro", ReadOnly: true}}
	_, err = e.prov.Create(ctx, s)
	wantKind(t, err, compute.KindInvalid, "read-only")
}

// Snapshots on E2B call E2B's own routes (the fake checks them against
// openapi.yml): a snapshot is a team template holding the sandbox's files,
// a sandbox created from its image starts from it with them, the parent
// runs on, and removing the image deletes the template (again: no error).
// Only the image form SnapshotImagePrefix reaches E2B; a local image is
// still refused, and the provider is no compute.Committer (no fork).
func TestSnapshots(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ctx := ctxT(t)
	if _, ok := e.prov.(compute.Committer); ok {
		t.Fatal("the E2B provider is a compute.Committer: fork would checkpoint through E2B's snapshots")
	}
	parent, err := e.prov.Create(ctx, spec("rec-parent"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.prov.WriteFile(ctx, parent.Ref, "/root/kept", []byte("before")); err != nil {
		t.Fatal(err)
	}
	snaps := e.p.Snapshots()
	img, err := snaps.Commit(ctx, parent.Ref, compute.CommitOptions{Name: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img.Name, e2b.SnapshotImagePrefix) || !slices.Contains(e.fake.Templates(), img.ID) {
		t.Fatalf("snapshot image %+v; the team's templates %v", img, e.fake.Templates())
	}
	if got, err := e.prov.Get(ctx, parent.Ref); err != nil || got.Status != compute.StatusRunning {
		t.Fatalf("the parent after its snapshot: %+v %v", got, err)
	}
	s := spec("rec-child")
	s.Template, s.Image = "org-snapshot-template", img.Name
	child, err := e.prov.Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sb, _ := e.fake.Sandbox(child.Ref.ID); sb.TemplateID != img.ID {
		t.Fatalf("the child started from template %q, want the snapshot %q", sb.TemplateID, img.ID)
	}
	if data, err := e.prov.ReadFile(ctx, child.Ref, "/root/kept"); err != nil || string(data) != "before" {
		t.Fatalf("the child's copy of the parent's file: %q %v", data, err)
	}
	if err := snaps.RemoveImage(ctx, img.Name); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(e.fake.Templates(), img.ID) {
		t.Fatalf("the snapshot's template outlived its removal: %v", e.fake.Templates())
	}
	if err := snaps.RemoveImage(ctx, img.Name); err != nil {
		t.Fatalf("removing a snapshot E2B no longer knows: %v", err)
	}
	s = spec("rec-local")
	s.Image = "dreadnode-snapshot/x:y"
	_, err = e.prov.Create(ctx, s)
	wantKind(t, err, compute.KindInvalid, "local image")
	_, err = snaps.Commit(ctx, compute.Ref{ID: "inope"}, compute.CommitOptions{})
	wantKind(t, err, compute.KindNotFound)
}
