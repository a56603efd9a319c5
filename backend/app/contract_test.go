package app

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// The document's bounds are the server's: a body the decoder accepted is
// checked against the operation's schema, and the first violation is a 400
// naming the field where it was sent (loc body, ...), in the envelope's words.
func TestContractBoundsFromTheDocument(t *testing.T) {
	c, err := newRequestContract(30)
	if err != nil {
		t.Fatal(err)
	}
	create := c.bodies["POST /sandboxes"]
	if create == nil {
		t.Fatal("no body schema for POST /sandboxes")
	}
	cases := []struct {
		name, body string
		loc        []any // nil: accepted
		msg        string
	}{
		{"defaults", `{}`, nil, ""},
		{"null is absent", `{"timeout": null, "resources": null}`, nil, ""},
		{"the configured minimum", `{"timeout": 30}`, nil, ""},
		{"below the minimum", `{"timeout": 29}`, []any{"body", "timeout"}, "must be between 30 and 86400"},
		{"above the maximum", `{"timeout": 86401}`, []any{"body", "timeout"}, "must be between 30 and 86400"},
		{"cpu", `{"resources": {"cpuCount": 17}}`, []any{"body", "resources", "cpuCount"}, "must be between 1 and 16"},
		{"memory", `{"resources": {"memoryMB": 63}}`, []any{"body", "resources", "memoryMB"}, "must be between 64 and 65536"},
		{"env value", `{"envVars": {"A": "` + strings.Repeat("x", 40<<10) + `"}}`, []any{"body", "envVars", "A"}, "at most 32768"},
		{"metadata value", `{"metadata": {"a.b": "` + strings.Repeat("x", 513) + `"}}`, []any{"body", "metadata", "a.b"}, "at most 512"},
		{"mount path", `{"volumeMounts": [{"name": "v", "path": "/` + strings.Repeat("x", 1024) + `"}]}`, []any{"body", "volumeMounts", "0", "path"}, "at most 1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkBody(create, []byte(tc.body))
			if tc.loc == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var he *httpx.Error
			if !errors.As(err, &he) || he.Code != 400 || len(he.Errors) != 1 || !slices.Equal(he.Errors[0].Loc, tc.loc) || !strings.Contains(he.Detail, tc.msg) {
				t.Fatalf("got %#v, want a 400 at %v saying %q", err, tc.loc, tc.msg)
			}
		})
	}
	// The timeout's minimum is the deployment's, on /timeout too.
	if err := checkBody(c.bodies["POST /sandboxes/{id}/timeout"], []byte(`{"timeout": 30}`)); err != nil {
		t.Fatalf("POST /timeout at the configured minimum: %v", err)
	}
	if err := checkBody(c.bodies["POST /sandboxes/{id}/timeout"], []byte(`{"timeout": 29}`)); err == nil {
		t.Fatal("POST /timeout below the configured minimum accepted")
	}
	env := c.bodies["POST /api/v1/org/{org}/ws/{workspace}/environments"]
	if err := checkBody(env, []byte(`{"task_ref": "t", "timeout_sec": 30}`)); err != nil {
		t.Fatalf("an environment at the configured minimum: %v", err)
	}
	if err := checkBody(env, []byte(`{"task_ref": "t", "timeout_sec": 29}`)); err == nil {
		t.Fatal("an environment below the configured minimum accepted")
	}
	// The document served at /openapi.json says the same minimum.
	served, err := openapi3.NewLoader().LoadFromData(c.served)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ schema, prop string }{{"CreateSandbox", "timeout"}, {"CreateTaskEnvironment", "timeout_sec"}} {
		if m := served.Components.Schemas[f.schema].Value.Properties[f.prop].Value.Min; m == nil || *m != 30 {
			t.Errorf("the served document's %s.%s minimum is %v, want the deployment's 30", f.schema, f.prop, m)
		}
	}
}

// Every operation of the document with a JSON body is found from the
// gorilla/mux route that serves it (its path template, variables' patterns
// dropped), so no route escapes the contract by being spelled differently.
func TestOpenAPIContractCoversRoutes(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, withAdmin)
	c, err := newRequestContract(1)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	err = ta.app.Handler.(*mux.Router).Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil // a host or prefix route without a path of its own
		}
		methods, _ := route.GetMethods()
		for _, m := range methods {
			served[m+" "+routeVar.ReplaceAllString(tpl, "{$1}")] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for op := range c.bodies {
		if !served[op] {
			t.Errorf("the document's %s has no route of that template: its body would go unchecked", op)
		}
	}
	// And a route the document bounds answers from it: an exec's timeoutMs.
	id, tok := ta.create(map[string]any{})
	r := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"true"}, "timeoutMs": 600001}, "X-Access-Token", tok)
	if r.code != 400 || !strings.Contains(string(r.body), "timeoutMs: must be between 1 and 600000") {
		t.Fatalf("exec with timeoutMs 600001: %d %s", r.code, r.body)
	}
}
