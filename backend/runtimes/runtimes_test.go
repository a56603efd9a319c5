package runtimes_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// env is the shared in-process backend, extended with this package's helpers.
type env struct{ *appenv.Env }

func newEnv(t *testing.T, o appenv.Opts) *env { return &env{appenv.New(t, o)} }

const rtBase = "/api/v1/org/org1/ws/main/runtimes"

func TestRuntimeLifecycleOnDocker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{})
	ctx := context.Background()

	rt := e.Must(201, "POST", rtBase, map[string]any{"name": "agent-1", "env_vars": map[string]string{"GREETING": "hi"},
		"metadata": map[string]string{"team": "red"}, "resources": map[string]any{"cpu_count": 1, "memory_mb": 256}, "timeout_sec": 600})
	id := rt["id"].(string)
	if rt["state"] != "idle" || rt["instance"] != nil || rt["sandbox_id"] != nil || rt["template"] != "base" {
		t.Fatalf("a new runtime is idle without a sandbox: %v", rt)
	}
	if r := e.Req("POST", rtBase, map[string]any{"name": "agent-1"}); r.Code != http.StatusConflict {
		t.Fatalf("duplicate name: %s", r)
	}
	// Without a sandbox: pause, resume, keepalive are 409.
	for _, op := range []string{"pause", "resume", "keepalive"} {
		if r := e.Req("POST", rtBase+"/"+id+"/"+op, nil); r.Code != http.StatusConflict {
			t.Fatalf("%s on an idle runtime: %s", op, r)
		}
	}

	// start provisions and links a sandbox; the token is shown once.
	st := e.Must(200, "POST", rtBase+"/"+id+"/start", nil)
	tok, _ := st["sandbox_token"].(string)
	inst, _ := st["instance"].(map[string]any)
	if st["state"] != "running" || tok == "" || inst == nil || inst["state"] != "running" || inst["runtime_id"] != id {
		t.Fatalf("start: %v", st)
	}
	sid := inst["id"].(string)
	for _, k := range []string{"billed_credits", "running_credits", "estimated_total_credits"} {
		if _, ok := inst[k].(float64); !ok {
			t.Fatalf("instance lacks %s: %v", k, inst)
		}
	}
	if inst["memory_mb"] != float64(256) || inst["sandbox_kind"] != "runtime" || inst["provider"] != "docker" || inst["provider_sandbox_id"] == nil {
		t.Fatalf("instance: %v", inst)
	}
	if g := e.Must(200, "GET", rtBase+"/"+id, nil); g["sandbox_token"] != nil || g["state"] != "running" || g["sandbox_id"] != sid {
		t.Fatalf("GET runtime: %v", g)
	}
	if len(e.ContainersOf(sid)) != 1 {
		t.Fatalf("one container expected for %s", sid)
	}
	if r := e.Req("POST", rtBase+"/"+id+"/start", nil); r.Code != http.StatusConflict {
		t.Fatalf("start on a running runtime: %s", r)
	}
	// The access token works on the lifecycle exec route.
	ex := e.Must(200, "POST", "/sandboxes/"+sid+"/exec", map[string]any{"cmd": []string{"sh", "-c", "echo $GREETING"}}, "X-Access-Token", tok)
	if ex["stdout"] != "hi\n" {
		t.Fatalf("exec: %v", ex)
	}

	// Write operations on a runtime's sandbox through the lifecycle API: 409.
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/sandboxes/" + sid + "/pause", nil},
		{"DELETE", "/sandboxes/" + sid, nil},
		{"POST", "/sandboxes/" + sid + "/connect", nil},
		{"POST", "/sandboxes/" + sid + "/timeout", map[string]any{"timeout": 120}},
		{"POST", "/sandboxes/" + sid + "/refreshes", map[string]any{"duration": 120}},
	} {
		r := e.Req(c.method, c.path, c.body)
		if r.Code != http.StatusConflict || r.Obj(t)["type"] != "conflict" {
			t.Fatalf("%s %s on a runtime's sandbox: want 409, got %s", c.method, c.path, r)
		}
	}
	if g := e.Must(200, "GET", "/sandboxes/"+sid, nil); g["state"] != "running" {
		t.Fatalf("the refused operations changed the sandbox: %v", g)
	}

	// pause → paused, no accrual; settled on pause.
	p := e.Must(200, "POST", rtBase+"/"+id+"/pause", nil)
	if p["state"] != "paused" || p["instance"].(map[string]any)["state"] != "paused" {
		t.Fatalf("pause: %v", p)
	}
	rec, err := e.App.DB.GetRecord(ctx, sid)
	if err != nil || rec.BilledNs != rec.RuntimeNs || rec.RuntimeNs == 0 || !rec.RunningSince.IsZero() {
		t.Fatalf("a paused record is settled up to its pause: %+v %v", rec, err)
	}
	if r := e.Req("POST", rtBase+"/"+id+"/pause", nil); r.Code != http.StatusConflict {
		t.Fatalf("pause on a paused runtime: %s", r)
	}
	// keepalive works while paused and extends the TTL.
	ka := e.Must(200, "POST", rtBase+"/"+id+"/keepalive", map[string]any{"extend_seconds": 3600})
	exp, err := time.Parse(time.RFC3339Nano, ka["expires_at"].(string))
	if err != nil || math.Abs(time.Until(exp).Seconds()-3600) > 30 {
		t.Fatalf("keepalive: %v %v", ka, err)
	}
	for _, bad := range []any{map[string]any{"extend_seconds": 59}, map[string]any{"extend_seconds": 3601}, map[string]any{"extend": 60}, "{"} {
		if r := e.Req("POST", rtBase+"/"+id+"/keepalive", bad); r.Code != 400 {
			t.Fatalf("keepalive %v: %s", bad, r)
		}
	}

	// resume → running again; exec still works with the same token.
	rs := e.Must(200, "POST", rtBase+"/"+id+"/resume", nil)
	if rs["state"] != "running" || rs["sandbox_id"] != sid {
		t.Fatalf("resume: %v", rs)
	}
	if ex := e.Must(200, "POST", "/sandboxes/"+sid+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", tok); ex["exitCode"] != float64(0) {
		t.Fatalf("exec after resume: %v", ex)
	}
	rec, _ = e.App.DB.GetRecord(ctx, sid)
	if rec.Sessions != 2 {
		t.Fatalf("sessions after resume = %d, want 2", rec.Sessions)
	}

	// The ledger shows the record with its runtime and logs answer.
	l := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/"+sid, nil)
	if l["runtime_id"] != id || l["state"] != "running" || l["sandbox_kind"] != "runtime" {
		t.Fatalf("ledger record: %v", l)
	}
	if lg := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/"+sid+"/logs", nil); lg["sandbox_id"] != sid {
		t.Fatalf("logs: %v", lg)
	}

	// Running long enough to owe at least a micro-credit (exec through the
	// sandbox's agent is fast enough that the whole test may not), so the
	// reset below has something to bill.
	appenv.Eventually(t, 30*time.Second, func() error {
		if r := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/"+sid, nil); r["estimated_total_credits"].(float64) <= 0 {
			return fmt.Errorf("nothing owed yet: %v", r["estimated_total_credits"])
		}
		return nil
	})
	// reset kills and unlinks the sandbox (record kept, kill_reason reset).
	rr := e.Must(200, "POST", rtBase+"/"+id+"/reset", nil)
	if rr["state"] != "idle" || rr["instance"] != nil || rr["sandbox_id"] != nil || rr["last_sandbox_id"] != sid {
		t.Fatalf("reset: %v", rr)
	}
	appenv.Eventually(t, 30*time.Second, func() error {
		if n := len(e.ContainersOf(sid)); n != 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
	killed := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/"+sid, nil)
	if killed["state"] != "killed" || killed["kill_reason"] != "reset" || killed["killed_at"] == nil || killed["running_credits"] != float64(0) {
		t.Fatalf("reset record: %v", killed)
	}
	if killed["billed_credits"].(float64) <= 0 {
		t.Fatalf("the reset record billed nothing: %v", killed)
	}
	for _, op := range []string{"pause", "resume", "keepalive"} {
		if r := e.Req("POST", rtBase+"/"+id+"/"+op, nil); r.Code != http.StatusConflict {
			t.Fatalf("%s after reset: %s", op, r)
		}
	}
	if r := e.Must(200, "POST", rtBase+"/"+id+"/reset", nil); r["state"] != "idle" {
		t.Fatalf("reset of an idle runtime is a no-op: %v", r)
	}

	// start again: a new sandbox behind the same runtime.
	st2 := e.Must(200, "POST", rtBase+"/"+id+"/start", map[string]any{"timeout_sec": 300})
	sid2 := st2["sandbox_id"].(string)
	if sid2 == sid || st2["sandbox_token"] == "" {
		t.Fatalf("second start: %v", st2)
	}
	list := e.Must(200, "GET", rtBase, nil)
	if items := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["sandbox_id"] != sid2 {
		t.Fatalf("list: %v", list)
	}

	// delete kills the sandbox, keeps the records.
	if r := e.Req("DELETE", rtBase+"/"+id, nil); r.Code != http.StatusNoContent {
		t.Fatalf("delete: %s", r)
	}
	if r := e.Req("GET", rtBase+"/"+id, nil); r.Code != 404 {
		t.Fatalf("GET after delete: %s", r)
	}
	if r := e.Req("DELETE", rtBase+"/"+id, nil); r.Code != 404 {
		t.Fatalf("second delete: %s", r)
	}
	d := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/"+sid2, nil)
	if d["state"] != "killed" || d["kill_reason"] != "deleted" {
		t.Fatalf("deleted runtime's record: %v", d)
	}
	appenv.Eventually(t, 30*time.Second, func() error {
		if n := len(e.ContainersOf(sid2)); n != 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
	// Both records stay in the ledger; usage counts them.
	page := e.Must(200, "GET", "/api/v1/org/org1/sandboxes?state=killed&kind=runtime", nil)
	if n := len(page["items"].([]any)); n != 2 {
		t.Fatalf("killed runtime records: %d (%v)", n, page)
	}
	u := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/usage", nil)
	if u["sessions_count"] != float64(3) || u["total_runtime_seconds"].(float64) <= 0 || u["current_month_seconds"].(float64) <= 0 {
		t.Fatalf("usage: %v", u)
	}
	if u["current_month_seconds"].(float64) > u["total_runtime_seconds"].(float64) {
		t.Fatalf("month > total: %v", u)
	}
}

// A runtime whose sandbox ends on its own (here its TTL) reads as idle and
// can be started again.
func TestRuntimeSandboxTimeoutMakesItIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{})
	rt := e.Must(201, "POST", rtBase, map[string]any{"name": "short", "timeout_sec": 2})
	id := rt["id"].(string)
	st := e.Must(200, "POST", rtBase+"/"+id+"/start", nil)
	sid := st["sandbox_id"].(string)
	appenv.Eventually(t, 60*time.Second, func() error {
		g := e.Must(200, "GET", rtBase+"/"+id, nil)
		if g["state"] != "idle" {
			return fmt.Errorf("state %v", g["state"])
		}
		if g["instance"] != nil || g["last_sandbox_id"] != sid {
			return fmt.Errorf("idle runtime: %v", g)
		}
		return nil
	})
	if l := e.Must(200, "GET", "/api/v1/org/org1/sandboxes/"+sid, nil); l["kill_reason"] != "timeout" {
		t.Fatalf("kill reason: %v", l)
	}
	if r := e.Req("POST", rtBase+"/"+id+"/pause", nil); r.Code != http.StatusConflict {
		t.Fatalf("pause of a timed-out runtime: %s", r)
	}
	st2 := e.Must(200, "POST", rtBase+"/"+id+"/start", map[string]any{"timeout_sec": 120})
	if st2["sandbox_id"] == sid || st2["state"] != "running" {
		t.Fatalf("restart: %v", st2)
	}
	e.Must(204, "DELETE", rtBase+"/"+id, nil)
}

// An org whose balance runs out has every sandbox killed with
// insufficient_credits (a runtime's and a plain one), its runtimes read idle,
// and new compute gets 402 until an operator grants credits.
func TestCreditsRunOutOnDocker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{})
	key := e.AddOrg("poor", 40) // 40 micro-credits: ~2.5 s of the base template
	base := "/api/v1/org/poor/ws/w/runtimes"
	r := e.ReqKey(key, "POST", base, map[string]any{"name": "r"})
	if r.Code != 201 {
		t.Fatalf("create runtime: %s", r)
	}
	id := r.Obj(t)["id"].(string)
	r = e.ReqKey(key, "POST", base+"/"+id+"/start", nil)
	if r.Code != 200 {
		t.Fatalf("start: %s", r)
	}
	sid := r.Obj(t)["sandbox_id"].(string)
	r = e.ReqKey(key, "POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 300})
	if r.Code != 201 {
		t.Fatalf("create sandbox: %s", r)
	}
	plain := r.Obj(t)["sandboxID"].(string)

	appenv.Eventually(t, 60*time.Second, func() error {
		if _, err := e.App.Billing.SettleAll(context.Background()); err != nil {
			return err
		}
		for _, s := range []string{sid, plain} {
			g := e.ReqKey(key, "GET", "/api/v1/org/poor/sandboxes/"+s, nil).Obj(t)
			if g["state"] != "killed" || g["kill_reason"] != "insufficient_credits" {
				return fmt.Errorf("%s: %v %v", s, g["state"], g["kill_reason"])
			}
		}
		return nil
	})
	c := e.ReqKey(key, "GET", "/api/v1/org/poor/credits", nil).Obj(t)
	if c["balance"] != float64(0) {
		t.Fatalf("credits: %v", c)
	}
	var billed float64
	for _, s := range []string{sid, plain} {
		billed += e.ReqKey(key, "GET", "/api/v1/org/poor/sandboxes/"+s, nil).Obj(t)["billed_credits"].(float64)
	}
	if math.Abs(billed-0.000040) > 1e-9 {
		t.Fatalf("billed %.6f, want exactly the 0.000040 that left the balance", billed)
	}
	if g := e.ReqKey(key, "GET", base+"/"+id, nil).Obj(t); g["state"] != "idle" {
		t.Fatalf("runtime after credits ran out: %v", g)
	}
	appenv.Eventually(t, 30*time.Second, func() error {
		if n := len(e.ContainersOf(sid)) + len(e.ContainersOf(plain)); n != 0 {
			return fmt.Errorf("%d containers left", n)
		}
		return nil
	})
	// 402 on every create path.
	if r := e.ReqKey(key, "POST", "/sandboxes", map[string]any{}); r.Code != http.StatusPaymentRequired || r.Obj(t)["type"] != "insufficient_credits" {
		t.Fatalf("create without credits: %s", r)
	}
	if r := e.ReqKey(key, "POST", base+"/"+id+"/start", nil); r.Code != http.StatusPaymentRequired {
		t.Fatalf("start without credits: %s", r)
	}
	// The org key cannot grant; the admin key can.
	if r := e.ReqKey(key, "POST", "/admin/orgs/poor/credits", map[string]any{"amount": 5}); r.Code != http.StatusUnauthorized {
		t.Fatalf("grant with an org key: %s", r)
	}
	g := e.ReqKey(e.AdminKey, "POST", "/admin/orgs/poor/credits", map[string]any{"amount": 5})
	if g.Code != 200 || g.Obj(t)["balance"] != float64(5) {
		t.Fatalf("admin grant: %s", g)
	}
	if r := e.ReqKey(key, "POST", base+"/"+id+"/start", nil); r.Code != 200 {
		t.Fatalf("start after the grant: %s", r)
	}
	if r := e.ReqKey(key, "DELETE", base+"/"+id, nil); r.Code != 204 {
		t.Fatalf("delete: %s", r)
	}
}

// Concurrent starts of one idle runtime: exactly one provisions a sandbox.
func TestConcurrentStartsOneWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, appenv.Opts{})
	id := e.Must(201, "POST", rtBase, map[string]any{"name": "race"})["id"].(string)
	codes := make(chan int, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- e.Req("POST", rtBase+"/"+id+"/start", nil).Code
		}()
	}
	wg.Wait()
	close(codes)
	got := map[int]int{}
	for c := range codes {
		got[c]++
	}
	if got[200] != 1 || got[409] != 3 {
		t.Fatalf("status codes of 4 concurrent starts: %v", got)
	}
	page := e.Must(200, "GET", "/api/v1/org/org1/sandboxes?kind=runtime", nil)
	if n := len(page["items"].([]any)); n != 1 {
		t.Fatalf("%d sandboxes provisioned, want 1", n)
	}
	e.Must(204, "DELETE", rtBase+"/"+id, nil)
}
