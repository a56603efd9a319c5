package tasks_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gorilla/mux"
)

// No response of the task API carries the value of a secret input: every
// route the service registers is called (a route missing from the table
// fails the test, so a new one cannot be forgotten) on web-login, whose flag
// and admin_password are secret, and no answer holds either value or their
// defaults. POST …/check compares without revealing.
func TestSecretInputsNeverAnswered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const flag, password = "FLAG{secret-never-shown-7f3a}", "pw-never-shown-91c2"
	secrets := []string{flag, password, "FLAG{demo-sqli-login-bypass}", "correct-horse-battery-staple", "FLAG{demo-ssrf-private-network}"}
	var answers []string
	seen := map[string]bool{}
	call := func(route, method, path string, body any, want int, headers ...string) *response {
		t.Helper()
		seen[route] = true
		r := h.do("acme", method, path, body, headers...)
		if r.Code != want {
			t.Fatalf("%s %s: %d %s (want %d)", method, path, r.Code, r.Body, want)
		}
		answers = append(answers, method+" "+path+": "+string(r.Body))
		return r
	}
	envs, env := envPath("acme", "ws"), "/api/v1/org/{org}/ws/{workspace}/environments/{id}"

	created := call("POST /api/v1/org/{org}/ws/{workspace}/environments", http.MethodPost, envs, map[string]any{
		"task_ref": "web-login", "timeout_sec": 600, "inputs": map[string]string{"flag": flag, "admin_password": password}},
		http.StatusCreated).JSON(t)
	id, token := created["id"].(string), created["execute_token"].(string)
	if got := created["secret_inputs"]; !slices.Equal(toStrings(got), []string{"admin_password", "flag"}) {
		t.Errorf("secret_inputs: %v", got)
	}
	h.waitState("acme", "ws", id, readyTimeout, "ready")
	one := envPath("acme", "ws", "/", id)
	call("GET /api/v1/org/{org}/tasks", http.MethodGet, "/api/v1/org/acme/tasks", nil, http.StatusOK)
	call("GET /api/v1/org/{org}/tasks/{ref:.+}", http.MethodGet, "/api/v1/org/acme/tasks/"+url.PathEscape("web-login"), nil, http.StatusOK)
	call("GET /api/v1/org/{org}/tasks/{ref:.+}", http.MethodGet, "/api/v1/org/acme/tasks/ssrf-vault", nil, http.StatusOK)
	call("GET /api/v1/org/{org}/ws/{workspace}/environments", http.MethodGet, envs, nil, http.StatusOK)
	call("GET "+env, http.MethodGet, one, nil, http.StatusOK)
	call("GET "+env+"/status", http.MethodGet, one+"/status", nil, http.StatusOK)
	call("POST "+env+"/execute", http.MethodPost, one+"/execute", map[string]any{"command": "echo hello"}, http.StatusOK, "X-Environment-Token", token)
	for _, c := range []struct {
		body  map[string]any
		code  int
		match string
	}{
		{map[string]any{"input": "flag", "value": flag}, http.StatusOK, `"match":true`},
		{map[string]any{"input": "flag", "value": flag + "x"}, http.StatusOK, `"match":false`},
		{map[string]any{"input": "flag", "value": ""}, http.StatusOK, `"match":false`},
		{map[string]any{"input": "admin_password", "value": password}, http.StatusOK, `"match":true`},
		{map[string]any{"input": "nope", "value": flag}, http.StatusBadRequest, `"input"`},
		{map[string]any{"input": "flag"}, http.StatusBadRequest, `"value"`},
	} {
		r := call("POST "+env+"/check", http.MethodPost, one+"/check", c.body, c.code)
		if !strings.Contains(string(r.Body), c.match) {
			t.Fatalf("check %v: %s (want %s)", c.body, r.Body, c.match)
		}
	}
	// This harness gives the service no committer, so a fork answers 503
	// (its error names no input); a fork's environments are answered by the
	// same view as a create's, which names secret inputs only.
	call("POST "+env+"/fork", http.MethodPost, one+"/fork", map[string]any{"count": 1}, http.StatusServiceUnavailable)
	call("POST "+env+"/pause", http.MethodPost, one+"/pause", nil, http.StatusOK)
	call("POST "+env+"/resume", http.MethodPost, one+"/resume", nil, http.StatusOK)
	call("DELETE "+env, http.MethodDelete, one, nil, http.StatusOK)

	for _, a := range answers {
		for _, s := range secrets {
			if strings.Contains(a, s) {
				t.Errorf("an answer carries the secret %q: %s", s, a)
			}
		}
	}
	routes := mux.NewRouter()
	h.svc.Register(routes)
	_ = routes.Walk(func(rt *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, _ := rt.GetPathTemplate()
		methods, _ := rt.GetMethods()
		for _, m := range methods {
			if !seen[m+" "+tpl] {
				t.Errorf("route %s %s is not covered: add it to this test", m, tpl)
			}
		}
		return nil
	})
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
