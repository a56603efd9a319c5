package billing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store/storetest"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// env is the shared in-process backend, extended with this package's helpers.
type env struct{ *appenv.Env }

func newEnv(t *testing.T, o appenv.Opts) *env { return &env{appenv.New(t, o)} }

const ledgerBase = "/api/v1/org/org1/sandboxes"

// rtBase is the runtimes API (package runtimes), which the cross-route
// tests below cover with the ledger.
const rtBase = "/api/v1/org/org1/ws/main/runtimes"

func (e *env) insert(id, kind string, phase sandbox.Phase) *store.Record {
	e.T.Helper()
	now := time.Now().UTC()
	r := &store.Record{ID: id, OrgID: e.Org, Kind: kind, Provider: "docker", Phase: phase, TemplateID: "base", CPUCount: 1, MemoryMB: 512,
		CreatedAt: now, Metadata: map[string]string{"k": "v"}}
	switch phase {
	case sandbox.PhaseRunning:
		r.MarkRunning(now.Add(-time.Minute))
		r.EndAt = now.Add(time.Hour)
	case sandbox.PhaseDeleted:
		r.MarkRunning(now.Add(-time.Minute))
		r.MarkKilled(now, sandbox.KillTimeout)
	case sandbox.PhaseQueued, sandbox.PhasePending, sandbox.PhaseCreating, sandbox.PhasePausing, sandbox.PhasePaused, sandbox.PhaseResuming, sandbox.PhaseStopping, sandbox.PhaseCompleted, sandbox.PhaseFailed:
		// as below the switch; named so that a value added to the enum is decided here
	}
	if err := storetest.InsertFixture(context.Background(), e.App.DB, r); err != nil {
		e.T.Fatal(err)
	}
	return r
}

// listAll pages through path with limit, returning ids in order.
func (e *env) listAll(path string, limit int, between func()) []string {
	e.T.Helper()
	var ids []string
	cursor := ""
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	for range 10_000 {
		p := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		page := e.Must(200, "GET", p, nil)
		items := page["items"].([]any)
		if len(items) > limit {
			e.T.Fatalf("page of %d > limit %d", len(items), limit)
		}
		for _, it := range items {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		next, _ := page["next_cursor"].(string)
		if page["next_cursor"] == nil {
			return ids
		}
		if len(items) != limit {
			e.T.Fatalf("a page with a next cursor must be full: %d", len(items))
		}
		cursor = next
		if between != nil {
			between()
		}
	}
	e.T.Fatal("listing did not end")
	return nil
}

// Cursor paging under concurrent inserts: every record that existed at the
// start is listed exactly once; nothing is listed twice.
func TestLedgerCursorPagingUnderConcurrentInserts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	var initial []string
	for i := range 300 {
		initial = append(initial, e.insert(fmt.Sprintf("init%03d", i), sandbox.KindTask, sandbox.PhasePaused).ID)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	inserted := 0
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				inserted = i
				return
			default:
			}
			if i >= 1000 { // bounded, so the listing ends
				<-stop
				inserted = i
				return
			}
			r := &store.Record{ID: fmt.Sprintf("late%05d", i), OrgID: "org1", Kind: sandbox.KindWorld, Provider: "docker",
				Phase: sandbox.PhaseDeleted, TemplateID: "base"}
			if err := storetest.InsertFixture(context.Background(), e.App.DB, r); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	ids := e.listAll(ledgerBase, 7, nil)
	close(stop)
	wg.Wait()
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
		if seen[id] > 1 {
			t.Fatalf("%s listed twice", id)
		}
	}
	for _, id := range initial {
		if seen[id] != 1 {
			t.Fatalf("%s listed %d times", id, seen[id])
		}
	}
	if inserted == 0 {
		t.Fatal("no concurrent inserts happened")
	}
	// Order is insertion order: the initial records come first.
	for i, id := range initial {
		if ids[i] != id {
			t.Fatalf("position %d: %s, want %s", i, ids[i], id)
		}
	}
}

func TestLedgerFiltersUsageAndCredits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	e.insert("run-rt", sandbox.KindRuntime, sandbox.PhaseRunning)
	e.insert("run-task", sandbox.KindTask, sandbox.PhaseRunning)
	e.insert("paused-world", sandbox.KindWorld, sandbox.PhasePaused)
	e.insert("starting", sandbox.KindRuntime, sandbox.PhasePending)
	e.insert("dead", sandbox.KindTask, sandbox.PhaseDeleted)
	e.insert("stopping", sandbox.KindRuntime, sandbox.PhaseStopping)
	cases := map[string][]string{
		"":                                   {"run-rt", "run-task", "paused-world", "starting", "dead", "stopping"},
		"?state=running":                     {"run-rt", "run-task"},
		"?state=running,paused":              {"run-rt", "run-task", "paused-world"},
		"?state=running&state=killed":        {"run-rt", "run-task", "dead", "stopping"},
		"?state=starting":                    {"starting"},
		"?kind=task":                         {"run-task", "dead"},
		"?sandbox_kind=world,runtime":        {"run-rt", "paused-world", "starting", "stopping"},
		"?state=killed&kind=task":            {"dead"},
		"?state=%20running%20,,paused":       {"run-rt", "run-task", "paused-world"},
		"?kind=runtime&sandbox_kind=task":    {"run-rt", "run-task", "starting", "dead", "stopping"},
		"?state=paused&sandbox_kind=runtime": {},
	}
	for q, want := range cases {
		got := e.listAll(ledgerBase+q, 2, nil)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%q: got %v, want %v", q, got, want)
		}
	}
	// Detail: fields of §2, credits as numbers with the estimate adding up.
	d := e.Must(200, "GET", ledgerBase+"/run-rt", nil)
	for _, k := range []string{"id", "sandbox_kind", "provider", "provider_sandbox_id", "state", "kill_reason", "created_at",
		"last_started_at", "last_paused_at", "killed_at", "expires_at", "metadata", "billed_credits", "running_credits",
		"estimated_total_credits", "total_runtime_seconds"} {
		if _, ok := d[k]; !ok {
			t.Errorf("record lacks %s: %v", k, d)
		}
	}
	if rc := d["running_credits"].(float64); rc < 0.0009 || rc > 0.0011 { // ~60 s × 0.00001625
		t.Errorf("running credits of a minute of base: %v", rc)
	}
	if d["estimated_total_credits"] != d["running_credits"] || d["billed_credits"] != float64(0) || d["state"] != "running" {
		t.Errorf("detail: %v", d)
	}
	if rt := d["total_runtime_seconds"].(float64); rt < 59 || rt > 120 {
		t.Errorf("total_runtime_seconds: %v", rt)
	}
	// The usage route is not read as a sandbox id.
	u := e.Must(200, "GET", ledgerBase+"/usage", nil)
	if u["sessions_count"] != float64(3) || u["total_runtime_seconds"].(float64) < 179 {
		t.Fatalf("usage: %v", u)
	}
	// Logs of a task record: kept in the store or empty.
	if l := e.Must(200, "GET", ledgerBase+"/run-task/logs", nil); len(l["logs"].([]any)) != 0 {
		t.Fatalf("logs: %v", l)
	}
	if err := e.App.DB.SaveLogs(context.Background(), "dead", "line one\nline two\n"); err != nil {
		t.Fatal(err)
	}
	if l := e.Must(200, "GET", ledgerBase+"/dead/logs", nil); len(l["logs"].([]any)) != 2 {
		t.Fatalf("saved logs: %v", l)
	}
	// Credits: balance plus what runs and is not yet settled.
	c := e.Must(200, "GET", "/api/v1/org/org1/credits", nil)
	if c["balance"] != float64(1000) || c["running_sandboxes"] != float64(2) || c["running_credits"].(float64) <= 0 {
		t.Fatalf("credits: %v", c)
	}
	res, err := e.App.Billing.SettleAll(context.Background())
	if err != nil || res.Records != 3 {
		t.Fatalf("settle: %+v %v", res, err)
	}
	d2 := e.Must(200, "GET", ledgerBase+"/run-rt", nil)
	if d2["billed_credits"].(float64) < d["running_credits"].(float64) || d2["running_credits"].(float64) > 0.0001 {
		t.Fatalf("after settling: %v", d2)
	}
	c2 := e.Must(200, "GET", "/api/v1/org/org1/credits", nil)
	if c2["balance"].(float64) >= 1000 {
		t.Fatalf("balance after settling: %v", c2)
	}
}

func TestAdminCredits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	admin := func(method, path string, body any) appenv.Resp { return e.ReqKey(e.AdminKey, method, path, body) }
	if r := admin("POST", "/admin/orgs/org1/credits", map[string]any{"amount": 2.5}); r.Code != 200 || r.Obj(t)["balance"] != 1002.5 || r.Obj(t)["granted"] != 2.5 {
		t.Fatalf("grant: %s", r)
	}
	if r := admin("GET", "/admin/orgs/org1/credits", nil); r.Code != 200 || r.Obj(t)["balance"] != 1002.5 {
		t.Fatalf("show: %s", r)
	}
	for _, c := range []struct {
		body any
		code int
	}{
		{map[string]any{}, 400}, {map[string]any{"amount": 0}, 400}, {map[string]any{"amount": -1}, 400},
		{map[string]any{"amount": "5"}, 400}, {map[string]any{"amount": 1e12}, 400}, {map[string]any{"amount": 1, "org": "x"}, 400},
		{"{", 400}, {"[]", 400}, {`{"amount": 1e400}`, 400}, {strings.Repeat(" ", 2<<20), 413},
	} {
		if r := admin("POST", "/admin/orgs/org1/credits", c.body); r.Code != c.code {
			t.Errorf("grant %v: want %d, got %s", c.body, c.code, r)
		}
	}
	if r := admin("POST", "/admin/orgs/nobody/credits", map[string]any{"amount": 1}); r.Code != 404 {
		t.Fatalf("grant to an unknown org: %s", r)
	}
	if r := e.Req("POST", "/admin/orgs/org1/credits", map[string]any{"amount": 1}); r.Code != 401 {
		t.Fatalf("grant with an org key: %s", r)
	}
	if r := e.ReqKey("", "POST", "/admin/orgs/org1/credits", map[string]any{"amount": 1}); r.Code != 401 {
		t.Fatalf("grant without a key: %s", r)
	}
	if b := e.Must(200, "GET", "/api/v1/org/org1/credits", nil); b["balance"] != 1002.5 {
		t.Fatalf("balance: %v", b)
	}
}

// Another org's paths and objects answer 404; no key answers 401.
func TestCrossOrgIs404(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	other := e.AddOrg("org2", 1_000_000)
	e.insert("mine", sandbox.KindRuntime, sandbox.PhasePaused)
	rt := e.Must(201, "POST", rtBase, map[string]any{"name": "x"})
	rid := rt["id"].(string)
	paths := []struct{ method, path string }{
		{"GET", "/api/v1/org/org1/sandboxes"},
		{"GET", "/api/v1/org/org1/sandboxes/usage"},
		{"GET", "/api/v1/org/org1/sandboxes/mine"},
		{"GET", "/api/v1/org/org1/sandboxes/mine/logs"},
		{"GET", "/api/v1/org/org1/credits"},
		{"GET", rtBase},
		{"POST", rtBase},
		{"GET", rtBase + "/" + rid},
		{"DELETE", rtBase + "/" + rid},
		{"POST", rtBase + "/" + rid + "/start"},
		{"POST", rtBase + "/" + rid + "/pause"},
		{"POST", rtBase + "/" + rid + "/resume"},
		{"POST", rtBase + "/" + rid + "/reset"},
		{"POST", rtBase + "/" + rid + "/keepalive"},
	}
	for _, p := range paths {
		if r := e.ReqKey(other, p.method, p.path, nil); r.Code != 404 {
			t.Errorf("org2 key on %s %s: %s", p.method, p.path, r)
		}
		if r := e.ReqKey("", p.method, p.path, nil); r.Code != 401 {
			t.Errorf("no key on %s %s: %s", p.method, p.path, r)
		}
	}
	// Through its own org path, org2 still cannot reach org1's objects.
	for _, p := range []string{"/api/v1/org/org2/sandboxes/mine", "/api/v1/org/org2/sandboxes/mine/logs", "/api/v1/org/org2/ws/main/runtimes/" + rid} {
		if r := e.ReqKey(other, "GET", p, nil); r.Code != 404 {
			t.Errorf("org2 reaching org1's object via %s: %s", p, r)
		}
	}
	if r := e.ReqKey(other, "GET", "/api/v1/org/org2/sandboxes", nil); r.Code != 200 || len(r.Obj(t)["items"].([]any)) != 0 {
		t.Errorf("org2 sees org1's records: %s", r)
	}
	// Another workspace of the same org does not hold the runtime either.
	if r := e.Req("GET", "/api/v1/org/org1/ws/other/runtimes/"+rid, nil); r.Code != 404 {
		t.Errorf("runtime via another workspace: %s", r)
	}
	if r := e.Req("GET", "/api/v1/org/org1/sandboxes/nope", nil); r.Code != 404 || r.Obj(t)["type"] != "not_found" {
		t.Errorf("unknown record: %s", r)
	}
}

// Bad input on every route answers 4xx with the error envelope, never 5xx.
func TestBadInputNever5xx(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	rt := e.Must(201, "POST", rtBase, map[string]any{"name": "bad-input"})
	rid := rt["id"].(string)
	big := strings.Repeat("x", 2<<20)
	cases := []struct {
		method, path string
		body         any
		code         int
	}{
		{"GET", ledgerBase + "?state=bogus", nil, 400},
		{"GET", ledgerBase + "?state=deleted", nil, 400},
		{"GET", ledgerBase + "?kind=vm", nil, 400},
		{"GET", ledgerBase + "?limit=0", nil, 400},
		{"GET", ledgerBase + "?limit=501", nil, 400},
		{"GET", ledgerBase + "?limit=abc", nil, 400},
		{"GET", ledgerBase + "?cursor=%%%", nil, 400},
		{"GET", ledgerBase + "?cursor=bm90LWEtY3Vyc29y", nil, 400},
		{"GET", ledgerBase + "?foo=1", nil, 400},
		{"GET", ledgerBase + "/usage?x=1", nil, 400},
		{"GET", ledgerBase + "/" + strings.Repeat("z", 5000), nil, 404},
		{"GET", ledgerBase + "/%00/logs", nil, 404},
		{"POST", ledgerBase, nil, 405},
		{"GET", rtBase + "?limit=-1", nil, 400},
		{"GET", rtBase + "?cursor=" + "czox", nil, 400}, // a ledger cursor is not a runtimes cursor
		{"GET", "/api/v1/org/org1/ws/bad%20ws/runtimes", nil, 400},
		{"POST", "/api/v1/org/org1/ws/-x/runtimes", map[string]any{"name": "a"}, 400},
		{"POST", rtBase, "{", 400},
		{"POST", rtBase, "[1]", 400},
		{"POST", rtBase, `{"name": "a"} {}`, 400},
		{"POST", rtBase, big, 413},
		{"POST", rtBase, map[string]any{}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "unknown": 1}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "resources": map[string]any{"cpuCount": 1}}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "resources": map[string]any{"cpu_count": 99}}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "resources": map[string]any{"memory_mb": 1}}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "template": "nope"}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "template": "UPPER"}, 400},
		{"POST", rtBase, map[string]any{"name": "a b"}, 400},
		{"POST", rtBase, map[string]any{"name": 5}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "env_vars": map[string]string{"1x": "y"}}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "metadata": map[string]string{"bad key": "y"}}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "metadata": map[string]any{"k": 1}}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "timeout_sec": 0}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "timeout_sec": 86401}, 400},
		{"POST", rtBase, map[string]any{"name": "a", "timeout_sec": "60"}, 400},
		{"GET", rtBase + "/nope", nil, 404},
		{"DELETE", rtBase + "/nope", nil, 404},
		{"POST", rtBase + "/nope/start", nil, 404},
		{"POST", rtBase + "/" + rid + "/start", "{", 400},
		{"POST", rtBase + "/" + rid + "/start", map[string]any{"timeout_sec": 0}, 400},
		{"POST", rtBase + "/" + rid + "/start", map[string]any{"extra": true}, 400},
		{"POST", rtBase + "/" + rid + "/pause", map[string]any{"x": 1}, 400},
		{"POST", rtBase + "/" + rid + "/resume", "nope", 400},
		{"POST", rtBase + "/" + rid + "/reset", map[string]any{"x": 1}, 400},
		{"POST", rtBase + "/" + rid + "/keepalive", map[string]any{"extend_seconds": 1}, 400},
		{"POST", rtBase + "/" + rid + "/keepalive", map[string]any{"extend_seconds": 1.5}, 400},
		{"POST", rtBase + "/" + rid + "/keepalive", big, 413},
		{"POST", rtBase + "/" + rid + "/pause", nil, 409},
		{"POST", rtBase + "/" + rid + "/resume", nil, 409},
		{"POST", rtBase + "/" + rid + "/keepalive", nil, 409},
		{"GET", rtBase + "/" + rid + "/start", nil, 405},
		{"PUT", "/api/v1/org/org1/credits", map[string]any{"amount": 1}, 405},
		{"GET", "/api/v1/org/org1/credits?x=1", nil, 400},
	}
	for _, c := range cases {
		r := e.Req(c.method, c.path, c.body)
		if r.Code >= 500 || r.Code != c.code {
			t.Errorf("%s %s %.80v: want %d, got %s", c.method, c.path, c.body, c.code, r)
			continue
		}
		if r.Code >= 400 {
			m := r.Obj(t)
			if m["code"] != float64(r.Code) || m["detail"] == "" || m["type"] == "" {
				t.Errorf("%s %s: not the error envelope: %s", c.method, c.path, r)
			}
		}
	}
	// Idempotent runtime create.
	a := e.Req("POST", rtBase, map[string]any{"name": "idem"}, "Idempotency-Key", "k1")
	b := e.Req("POST", rtBase, map[string]any{"name": "idem"}, "Idempotency-Key", "k1")
	if a.Code != 201 || b.Code != 200 || a.Obj(t)["id"] != b.Obj(t)["id"] {
		t.Fatalf("idempotent create: %s / %s", a, b)
	}
	if r := e.Req("GET", "/api/v1/org/org1/ws/main/runtimes?limit=1", nil); r.Code != http.StatusOK || r.Obj(t)["next_cursor"] == nil {
		t.Fatalf("runtime paging: %s", r)
	}
}

// The ledger lists oldest first by default and newest first with
// order=desc, so the latest kills are on the first page; a cursor pages
// in the order it was made for and is refused by the other.
func TestLedgerOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{NoLoops: true})
	var ids []string
	for i := range 9 {
		ids = append(ids, e.insert(fmt.Sprintf("ord%02d", i), sandbox.KindWorld, sandbox.PhaseDeleted).ID)
	}
	asc := e.listAll(ledgerBase+"?state=killed", 2, nil)
	desc := e.listAll(ledgerBase+"?state=killed&order=desc", 2, nil)
	explicit := e.listAll(ledgerBase+"?state=killed&order=asc", 4, nil)
	if len(asc) != len(ids) || len(desc) != len(ids) || len(explicit) != len(ids) {
		t.Fatalf("asc %v, desc %v, explicit asc %v; want %d each", asc, desc, explicit, len(ids))
	}
	for i := range ids {
		if asc[i] != ids[i] || explicit[i] != ids[i] || desc[i] != ids[len(ids)-1-i] {
			t.Fatalf("position %d: asc %s, explicit asc %s, desc %s; want %s and %s", i, asc[i], explicit[i], desc[i], ids[i], ids[len(ids)-1-i])
		}
	}
	// A record killed now is the first newest first, and the last oldest first.
	latest := e.insert("ord-latest", sandbox.KindWorld, sandbox.PhaseDeleted).ID
	first := e.Must(200, "GET", ledgerBase+"?state=killed&order=desc&limit=1", nil)["items"].([]any)
	if len(first) != 1 || first[0].(map[string]any)["id"] != latest {
		t.Fatalf("newest first page: %v, want %s", first, latest)
	}
	ascPage := e.Must(200, "GET", ledgerBase+"?limit=1", nil)
	descPage := e.Must(200, "GET", ledgerBase+"?limit=1&order=desc", nil)
	for _, c := range []struct{ path, param string }{
		{ledgerBase + "?order=desc&cursor=" + url.QueryEscape(ascPage["next_cursor"].(string)), "cursor"},
		{ledgerBase + "?cursor=" + url.QueryEscape(descPage["next_cursor"].(string)), "cursor"},
		{ledgerBase + "?order=newest", "order"},
		{ledgerBase + "?order=DESC", "order"},
	} {
		r := e.Req("GET", c.path, nil)
		if r.Code != http.StatusBadRequest || !strings.Contains(string(r.Body), `"loc":["query","`+c.param+`"]`) {
			t.Fatalf("%s: %d %s, want 400 at query %s", c.path, r.Code, r.Body, c.param)
		}
	}
}
