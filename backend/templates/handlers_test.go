package templates_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// The native routes on the real backend: a build request leaves a template
// and a build that ends (ready or error, with its log); tags; another org
// sees none of it; the template quota refuses past its limit, naming it;
// deleting removes it.
func TestNativeTemplates(t *testing.T) {
	env := appenv.New(t, appenv.Opts{})
	other := env.AddOrg("org2", 1_000_000_000)

	// Refusals name the field.
	for body, field := range map[string]map[string]any{
		"fromImage": {"name": "x"},
		"name":      {"name": "Not A Name", "fromImage": "dreadnode/base:latest"},
		"tags":      {"name": "x", "tags": []string{""}, "fromImage": "dreadnode/base:latest"},
	} {
		if r := env.Req("POST", "/templates", field); r.Code != 400 || !strings.Contains(string(r.Body), body) {
			t.Fatalf("%v: want a 400 naming %s, got %s", field, body, r)
		}
	}
	if r := env.Req("POST", "/templates", map[string]any{"name": "x", "cpuCount": 3, "fromImage": "dreadnode/base:latest"}); r.Code != 400 ||
		!strings.Contains(string(r.Body), "CPU count must be 1 or an even number") {
		t.Fatalf("odd cpuCount: %s", r)
	}

	r := env.Req("POST", "/templates", map[string]any{"name": "web:v1", "fromImage": "dreadnode/base:latest",
		"steps": []map[string]any{{"type": "ENV", "args": []string{"A", "1"}}}})
	if r.Code != 202 {
		t.Fatalf("build: %s", r)
	}
	var created struct {
		TemplateID string   `json:"templateID"`
		Names      []string `json:"names"`
		Tags       []string `json:"tags"`
		Build      struct {
			BuildID string `json:"buildID"`
		} `json:"build"`
	}
	_ = json.Unmarshal(r.Body, &created)
	if created.TemplateID == "" || len(created.Names) != 1 || created.Names[0] != "web" || len(created.Tags) != 1 || created.Tags[0] != "v1" {
		t.Fatalf("build answer: %s", r.Body)
	}
	// The build ends, one way or the other, with a log.
	deadline := time.Now().Add(10 * time.Minute)
	var status string
	for {
		b := env.Must(200, "GET", "/templates/web/builds/"+created.Build.BuildID, nil)
		status, _ = b["status"].(string)
		if status == "ready" || status == "error" {
			if logs, _ := b["logs"].([]any); len(logs) == 0 {
				t.Fatalf("a finished build has no log: %v", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the build did not end: %v", b)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("build ended %s", status)

	tags := env.Must(200, "GET", "/templates/web/tags", nil)
	if items, _ := tags["items"].([]any); len(items) != 1 {
		t.Fatalf("tags: %v", tags)
	}
	env.Must(201, "POST", "/templates/web/tags", map[string]any{"tags": []string{"stable"}, "from": "v1"})
	if r := env.Req("DELETE", "/templates/web/tags/default", nil); r.Code != 400 {
		t.Fatalf("deleting the default tag: %s", r)
	}

	// Another org: nothing.
	for _, p := range []string{"/templates/web/tags", "/templates/web/builds"} {
		if r := env.ReqKey(other, "GET", p, nil); r.Code != 404 {
			t.Fatalf("another org read %s: %s", p, r)
		}
	}
	if r := env.ReqKey(other, "DELETE", "/templates/web", nil); r.Code != 404 {
		t.Fatalf("another org deleted: %s", r)
	}
	if l := env.ReqKey(other, "GET", "/templates", nil); l.Code != 200 || strings.Contains(string(l.Body), created.TemplateID) {
		t.Fatalf("another org lists it: %s", l)
	}

	// The quota: one template; a second name is refused naming the limit.
	if r := env.ReqKey(env.AdminKey, "PUT", "/admin/orgs/org1/template-quotas", map[string]any{"max_templates": 1}); r.Code != 200 {
		t.Fatalf("setting the quota: %s", r)
	}
	if r := env.Req("POST", "/templates", map[string]any{"name": "second", "fromImage": "dreadnode/base:latest"}); r.Code != 400 ||
		!strings.Contains(string(r.Body), "max_templates") {
		t.Fatalf("past max_templates: %s", r)
	}

	env.Must(204, "DELETE", "/templates/web:v1", nil)
	if l := env.Must(200, "GET", "/templates", nil); len(l["items"].([]any)) != 0 {
		t.Fatalf("deleted template listed: %v", l)
	}
}
