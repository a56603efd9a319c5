package tasks_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

func TestCatalogRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.do("acme", http.MethodGet, "/api/v1/org/acme/tasks", nil)
	if r.Code != 200 {
		t.Fatalf("list tasks: %d %s", r.Code, r.Body)
	}
	list := r.JSON(t)["tasks"].([]any)
	byRef := map[string]map[string]any{}
	for _, x := range list {
		m := x.(map[string]any)
		byRef[m["ref"].(string)] = m
	}
	wl := byRef["dreadnode/web-login@1.0.0"]
	if wl == nil || byRef["dreadnode/ssrf-vault@1.0.0"] == nil || byRef["acme/private-task@0.1.0"] == nil {
		t.Fatalf("catalog lacks the example tasks: %v", byRef)
	}
	if wl["expose"].(map[string]any)["web"].(float64) != 8080 || wl["execute_service"] != "attacker" || wl["latest"] != true ||
		wl["inputs"].(map[string]any)["flag"] == nil || len(wl["services"].([]any)) != 2 || wl["description"] == "" {
		t.Fatalf("web-login entry: %v", wl)
	}
	if byRef["dreadnode/versioned@1.2.0"]["latest"] != true || byRef["dreadnode/versioned@1.0.0"]["latest"] != false {
		t.Fatal("latest flags wrong")
	}
	// The other org does not see acme's private task.
	for _, x := range h.do("other", http.MethodGet, "/api/v1/org/other/tasks", nil).JSON(t)["tasks"].([]any) {
		if x.(map[string]any)["org"] == "acme" {
			t.Fatal("org other sees acme's task")
		}
	}
	for ref, want := range map[string]string{
		"web-login":                 "dreadnode/web-login@1.0.0",
		"dreadnode/web-login@1.0.0": "dreadnode/web-login@1.0.0",
		"versioned":                 "dreadnode/versioned@1.2.0",
		"versioned@^1.0":            "dreadnode/versioned@1.2.0",
	} {
		g := h.do("acme", http.MethodGet, "/api/v1/org/acme/tasks/"+ref, nil)
		if g.Code != 200 || g.JSON(t)["ref"] != want {
			t.Errorf("GET tasks/%s: %d %s", ref, g.Code, g.Body)
		}
	}
	nf := h.do("acme", http.MethodGet, "/api/v1/org/acme/tasks/nope@9.9.9", nil)
	if nf.Code != 404 || !strings.Contains(string(nf.Body), "nope@9.9.9") {
		t.Fatalf("unknown task: %d %s", nf.Code, nf.Body)
	}
	if b := h.do("acme", http.MethodGet, "/api/v1/org/acme/tasks/Bad%20Ref", nil); b.Code != 400 {
		t.Fatalf("malformed ref: %d %s", b.Code, b.Body)
	}
	if x := h.do("acme", http.MethodGet, "/api/v1/org/other/tasks", nil); x.Code != 404 {
		t.Fatalf("another org's catalog path: %d", x.Code)
	}
}

// Bad input on every route answers 4xx with the error envelope, never 5xx.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, token := h.create("acme", "ws", map[string]any{"task_ref": "versioned"})
	long := strings.Repeat("x", 300)
	cases := []struct {
		name, method, path string
		body               any
		hdr                []string
		want               int
		detail             string
	}{
		{"no task_ref", "POST", envPath("acme", "ws"), map[string]any{}, nil, 400, "task_ref"},
		{"empty task_ref", "POST", envPath("acme", "ws"), map[string]any{"task_ref": " "}, nil, 400, "task_ref"},
		{"malformed task_ref", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "Web Login!"}, nil, 400, "task_ref"},
		{"task_ref type", "POST", envPath("acme", "ws"), map[string]any{"task_ref": 5}, nil, 400, "task_ref"},
		{"unknown task", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "nope@1.0.0"}, nil, 404, "nope@1.0.0"},
		{"unknown version", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login@7.0.0"}, nil, 404, "web-login@7.0.0"},
		{"unknown input", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "inputs": map[string]string{"bogus": "1"}}, nil, 400, "bogus"},
		{"input type", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "inputs": map[string]any{"flag": 1}}, nil, 400, "inputs"},
		{"build context out of the task", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "input-context", "inputs": map[string]string{"ctx": "../"}}, nil, 400, "services.app.build.context"},
		{"missing required input", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "nonce-build"}, nil, 400, "nonce"},
		{"timeout low", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "timeout_sec": 59}, nil, 400, "timeout_sec"},
		{"timeout high", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "timeout_sec": 86401}, nil, 400, "timeout_sec"},
		{"timeout float", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "timeout_sec": 1.5}, nil, 400, "timeout_sec"},
		{"unknown field", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "colour": "red"}, nil, 400, "colour"},
		{"bad json", "POST", envPath("acme", "ws"), `{"task_ref":`, nil, 400, "JSON"},
		{"not an object", "POST", envPath("acme", "ws"), `[1,2]`, nil, 400, ""},
		{"secret_ids type", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "secret_ids": "x"}, nil, 400, "secret_ids"},
		{"project_id long", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login", "project_id": strings.Repeat("p", 201)}, nil, 400, "project_id"},
		{"idempotency key long", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "web-login"}, []string{"Idempotency-Key", long}, 400, "Idempotency-Key"},
		{"oversized body", "POST", envPath("acme", "ws"), `{"task_ref":"` + strings.Repeat("a", 1<<20+10) + `"}`, nil, 413, ""},
		{"bad workspace", "POST", envPath("acme", "Bad.WS"), map[string]any{"task_ref": "web-login"}, nil, 400, "workspace"},
		{"workspace too long", "GET", envPath("acme", strings.Repeat("w", 65)), nil, nil, 400, "workspace"},
		{"other org path", "POST", envPath("other", "ws"), map[string]any{"task_ref": "web-login"}, nil, 404, ""},
		{"list bad state", "GET", envPath("acme", "ws", "?state=running"), nil, nil, 400, "state"},
		{"list bad page", "GET", envPath("acme", "ws", "?page=0"), nil, nil, 400, "page"},
		{"list bad limit", "GET", envPath("acme", "ws", "?limit=101"), nil, nil, 400, "limit"},
		{"list limit text", "GET", envPath("acme", "ws", "?limit=ten"), nil, nil, 400, "limit"},
		{"list unknown param", "GET", envPath("acme", "ws", "?sort=asc"), nil, nil, 400, "sort"},
		{"get unknown", "GET", envPath("acme", "ws", "/nope"), nil, nil, 404, "nope"},
		{"get long id", "GET", envPath("acme", "ws", "/", long), nil, nil, 404, ""},
		{"get other workspace", "GET", envPath("acme", "ws2", "/", id), nil, nil, 404, ""},
		{"status unknown", "GET", envPath("acme", "ws", "/nope/status"), nil, nil, 404, ""},
		{"status wait text", "GET", envPath("acme", "ws", "/", id, "/status?wait=soon"), nil, nil, 400, "wait"},
		{"status wait negative", "GET", envPath("acme", "ws", "/", id, "/status?wait=-1"), nil, nil, 400, "wait"},
		{"status wait too long", "GET", envPath("acme", "ws", "/", id, "/status?wait=61"), nil, nil, 400, "wait"},
		{"status bad since", "GET", envPath("acme", "ws", "/", id, "/status?since=running"), nil, nil, 400, "since"},
		{"pause unknown", "POST", envPath("acme", "ws", "/nope/pause"), nil, nil, 404, ""},
		{"pause body", "POST", envPath("acme", "ws", "/", id, "/pause"), map[string]any{"x": 1}, nil, 400, "x"},
		{"resume unknown", "POST", envPath("acme", "ws", "/nope/resume"), nil, nil, 404, ""},
		{"delete unknown", "DELETE", envPath("acme", "ws", "/nope"), nil, nil, 404, ""},
		{"execute unknown env", "POST", envPath("acme", "ws", "/nope/execute"), map[string]any{"command": "true"}, []string{"X-Environment-Token", token}, 404, ""},
		{"execute no token", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": "true"}, nil, 401, ""},
		{"execute wrong token", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": "true"}, []string{"X-Environment-Token", "det_" + ids.New()}, 403, ""},
		{"execute no command", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{}, []string{"X-Environment-Token", token}, 400, "command"},
		{"execute empty command", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": ""}, []string{"X-Environment-Token", token}, 400, "command"},
		{"execute empty argv", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": []string{}}, []string{"X-Environment-Token", token}, 400, "command"},
		{"execute command type", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": 5}, []string{"X-Environment-Token", token}, 400, "command"},
		{"execute mixed argv", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": []any{"ls", 1}}, []string{"X-Environment-Token", token}, 400, "command"},
		{"execute timeout 0", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": "true", "timeout_sec": 0}, []string{"X-Environment-Token", token}, 400, "timeout_sec"},
		{"execute timeout 601", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": "true", "timeout_sec": 601}, []string{"X-Environment-Token", token}, 400, "timeout_sec"},
		{"execute unknown field", "POST", envPath("acme", "ws", "/", id, "/execute"), map[string]any{"command": "true", "env": map[string]string{}}, []string{"X-Environment-Token", token}, 400, "env"},
		{"execute bad json", "POST", envPath("acme", "ws", "/", id, "/execute"), `{`, []string{"X-Environment-Token", token}, 400, ""},
		{"tasks unknown param", "GET", "/api/v1/org/acme/tasks?x=1", nil, nil, 400, "x"},
	}
	for _, tc := range cases {
		r := h.do("acme", tc.method, tc.path, tc.body, tc.hdr...)
		if r.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.Code, truncate(r.Body), tc.want)
			continue
		}
		m := r.JSON(t)
		if m["code"].(float64) != float64(tc.want) || m["type"] == "" || m["detail"] == "" {
			t.Errorf("%s: not the error envelope: %s", tc.name, r.Body)
		}
		if tc.detail != "" && !strings.Contains(m["detail"].(string), tc.detail) {
			t.Errorf("%s: detail %q does not name %q", tc.name, m["detail"], tc.detail)
		}
	}
	// A not-ready environment refuses execute (409) once validated. The
	// versioned task is image-only and becomes ready fast: delete first.
	h.do("acme", "DELETE", envPath("acme", "ws", "/", id), nil)
	if r := h.execute("acme", "ws", id, token, map[string]any{"command": "true"}); r.Code != 409 {
		t.Fatalf("execute in a torn down environment: %d %s", r.Code, r.Body)
	}
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// Another org's environment answers 404 on every route; the path org must
// be the key's.
func TestCrossOrg(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id, token := h.create("acme", "ws", map[string]any{"task_ref": "versioned"})
	for _, p := range []struct{ method, path string }{
		{"GET", envPath("other", "ws", "/", id)},
		{"GET", envPath("other", "ws", "/", id, "/status")},
		{"POST", envPath("other", "ws", "/", id, "/pause")},
		{"POST", envPath("other", "ws", "/", id, "/resume")},
		{"POST", envPath("other", "ws", "/", id, "/execute")},
		{"DELETE", envPath("other", "ws", "/", id)},
		{"GET", envPath("acme", "ws", "/", id)}, // acme's path with other's key
		{"DELETE", envPath("acme", "ws", "/", id)},
	} {
		r := h.do("other", p.method, p.path, map[string]any{"command": "true"}, "X-Environment-Token", token)
		if r.Code != 404 {
			t.Errorf("%s %s as other: %d %s", p.method, p.path, r.Code, r.Body)
		}
	}
	if l := h.do("other", "GET", envPath("other", "ws"), nil).JSON(t); len(l["environments"].([]any)) != 0 {
		t.Fatalf("other lists acme's environments: %v", l)
	}
	if g := h.do("acme", "GET", envPath("acme", "ws", "/", id), nil); g.Code != 200 || g.JSON(t)["state"] == "torn_down" {
		t.Fatalf("acme's environment was affected: %d %s", g.Code, g.Body)
	}
	if r := h.do("", "GET", envPath("acme", "ws", "/", id), nil); r.Code != 401 {
		t.Fatalf("no key: %d", r.Code)
	}
}

// Idempotency-Key: the same key returns the first environment, without the
// token; another key makes another.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	key := "key-" + ids.New()
	body := map[string]any{"task_ref": "versioned"}
	first := h.do("acme", "POST", envPath("acme", "ws"), body, "Idempotency-Key", key)
	second := h.do("acme", "POST", envPath("acme", "ws"), body, "Idempotency-Key", key)
	if first.Code != 201 || second.Code != 200 {
		t.Fatalf("codes %d %d", first.Code, second.Code)
	}
	a, b := first.JSON(t), second.JSON(t)
	if a["id"] != b["id"] || a["execute_token"] == nil || b["execute_token"] != nil || second.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %s / %s", first.Body, second.Body)
	}
	third := h.do("acme", "POST", envPath("acme", "ws"), body, "Idempotency-Key", "other-"+key)
	if third.JSON(t)["id"] == a["id"] {
		t.Fatal("another key replayed the first environment")
	}
	// The same key in another workspace is another create.
	if h.do("acme", "POST", envPath("acme", "ws2"), body, "Idempotency-Key", key).JSON(t)["id"] == a["id"] {
		t.Fatal("a key of workspace ws replayed in ws2")
	}
}

// The second environment of a task skips building: its images are found by
// content hash, the build counter does not move, and the timeline says so.
func TestCachedSecondBuild(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	nonce := ids.New()
	before := h.svc.Builds()
	id1, tok1 := h.create("acme", "ws", map[string]any{"task_ref": "nonce-build", "inputs": map[string]string{"nonce": nonce}})
	h.waitState("acme", "ws", id1, readyTimeout, "ready")
	if got := h.svc.Builds() - before; got != 1 {
		t.Fatalf("first environment ran %d builds, want 1", got)
	}
	if tl := timeline(h.get("acme", "ws", id1)); !strings.Contains(tl, "provisioning:built 1 image(s)") {
		t.Fatalf("first timeline: %s", tl)
	}
	ex := h.execute("acme", "ws", id1, tok1, map[string]any{"command": []string{"cat", "/srv/nonce"}}).JSON(t)
	if strings.TrimSpace(ex["output"].(string)) != nonce {
		t.Fatalf("the image was not built from the input: %v", ex)
	}
	start := time.Now()
	id2, _ := h.create("acme", "ws", map[string]any{"task_ref": "nonce-build", "inputs": map[string]string{"nonce": nonce}})
	h.waitState("acme", "ws", id2, readyTimeout, "ready")
	t.Logf("second environment ready in %s", time.Since(start))
	if got := h.svc.Builds() - before; got != 1 {
		t.Fatalf("second environment built again (%d builds)", got)
	}
	env2 := h.get("acme", "ws", id2)
	if tl := timeline(env2); !strings.Contains(tl, "provisioning:images cached") {
		t.Fatalf("second timeline: %s", tl)
	}
	if !strings.Contains(env2["instruction"].(string), "nonce "+nonce) {
		t.Fatalf("instruction inputs not rendered: %q", env2["instruction"])
	}
	// Clean up: the environments, then the image only this test built.
	image := h.containers(id2)[0].Image
	for _, id := range []string{id1, id2} {
		h.do("acme", "DELETE", envPath("acme", "ws", "/", id), nil)
	}
	if !strings.HasPrefix(image, "dreadnode-task/nonce-build-app:") {
		t.Fatalf("unexpected image %s", image)
	}
	if err := dockerRuntime(t, h.svc).RemoveImage(context.Background(), image); err != nil {
		t.Errorf("removing %s: %v", image, err)
	}
}

func timeline(env map[string]any) string {
	var parts []string
	for _, e := range env["timeline"].([]any) {
		m := e.(map[string]any)
		d, _ := m["detail"].(string)
		parts = append(parts, m["state"].(string)+":"+d)
	}
	return strings.Join(parts, " → ")
}

// The list pages with page/limit and has_next, and filters by state.
func TestListPaging(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var made []string
	for i := 0; i < 3; i++ {
		id, _ := h.create("acme", "pages", map[string]any{"task_ref": "versioned@1.0.0"})
		made = append(made, id)
	}
	p1 := h.do("acme", "GET", envPath("acme", "pages", "?page=1&limit=2"), nil).JSON(t)
	p2 := h.do("acme", "GET", envPath("acme", "pages", "?page=2&limit=2"), nil).JSON(t)
	e1, e2 := p1["environments"].([]any), p2["environments"].([]any)
	if len(e1) != 2 || p1["has_next"] != true || len(e2) != 1 || p2["has_next"] != false {
		t.Fatalf("pages: %v / %v", p1, p2)
	}
	if e1[0].(map[string]any)["id"] != made[0] || e2[0].(map[string]any)["id"] != made[2] {
		t.Fatal("pages are not in creation order")
	}
	h.do("acme", "DELETE", envPath("acme", "pages", "/", made[1]), nil)
	td := h.do("acme", "GET", envPath("acme", "pages", "?state=torn_down"), nil).JSON(t)["environments"].([]any)
	if len(td) != 1 || td[0].(map[string]any)["id"] != made[1] {
		t.Fatalf("state filter: %v", td)
	}
	live := h.do("acme", "GET", envPath("acme", "pages", "?state=building,provisioning,ready"), nil).JSON(t)["environments"].([]any)
	if len(live) != 2 {
		t.Fatalf("state list filter: %v", live)
	}
}

// Config.Admit refuses creates (e.g. an org without credits) before anything
// is stored; an Idempotency-Key replay is not asked again.
func TestAdmit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *tasks.Config) {
		c.Admit = func(_ context.Context, org string) error {
			if org == "other" {
				return httpx.NewError(http.StatusPaymentRequired, "insufficient_credits", "organization other has no credits left")
			}
			return nil
		}
	})
	r := h.do("other", "POST", envPath("other", "ws"), map[string]any{"task_ref": "versioned"})
	if r.Code != 402 || !strings.Contains(string(r.Body), "credits") {
		t.Fatalf("admission: %d %s", r.Code, r.Body)
	}
	if l := h.do("other", "GET", envPath("other", "ws"), nil).JSON(t); len(l["environments"].([]any)) != 0 {
		t.Fatal("a refused create stored an environment")
	}
	if r := h.do("acme", "POST", envPath("acme", "ws"), map[string]any{"task_ref": "versioned"}); r.Code != 201 {
		t.Fatalf("admitted org: %d", r.Code)
	}
}
