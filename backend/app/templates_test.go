package app

import (
	"net/http"
	"strings"
	"testing"
)

// GET /templates/{id} lets clients (the Terraform provider at plan) check a
// templateID; the sandbox view reports the timeout last set, so an imported
// sandbox's timeout is known.
func TestTemplateLookupAndTimeoutInView(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	if r := ta.req("GET", "/templates/base", nil); r.code != http.StatusOK || r.json(t)["templateID"] != "base" {
		t.Fatalf("GET /templates/base: %d %s", r.code, r.body)
	}
	r := ta.req("GET", "/templates/nope", nil)
	if r.code != http.StatusNotFound || !strings.Contains(string(r.body), `unknown template \"nope\"`) {
		t.Fatalf("GET /templates/nope: want 404 naming the template, got %d %s", r.code, r.body)
	}

	c := ta.req("POST", "/sandboxes", map[string]any{"timeout": 120})
	if c.code != http.StatusCreated || c.json(t)["timeout"] != float64(120) {
		t.Fatalf("create: want timeout 120 in the answer, got %d %s", c.code, c.body)
	}
	id := c.json(t)["sandboxID"].(string)
	defer ta.req("DELETE", "/sandboxes/"+id, nil)
	if x := ta.req("POST", "/sandboxes/"+id+"/timeout", map[string]any{"timeout": 900}); x.code != http.StatusNoContent {
		t.Fatalf("timeout: %d %s", x.code, x.body)
	}
	if g := ta.req("GET", "/sandboxes/"+id, nil); g.json(t)["timeout"] != float64(900) {
		t.Fatalf("GET after POST /timeout: want timeout 900, got %s", g.body)
	}
}
