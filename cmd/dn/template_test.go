package main_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

// dn template build|ls|logs|rm against a real backend building on the real
// engine: a build from flags waits and prints its log; one from a YAML file
// builds on it (fromTemplate); a failing build exits 1 with its error and
// its log shows the step's output; ls lists them; rm deletes them and
// their images.
func TestDNTemplate(t *testing.T) {
	b := backendproc.Start(t, backendproc.Options{})
	d := newDN(t, map[string]string{"DREADNODE_API_URL": b.URL, "DREADNODE_API_KEY": b.APIKey, "DREADNODE_ORG": b.Org})
	name := fmt.Sprintf("dn-tpl-%d", rand.Uint32())

	r := d.must("template", "build", "--name", name, "--from-image", "dreadnode/base:latest", "--cpu", "1", "--memory-mb", "256",
		"--step", "RUN echo built-by-dn > /dn.txt", "--step", "ENV GREETING=hello OTHER=x", "--step", "WORKDIR /srv", "--wait")
	t.Logf("build --wait: %s", r)
	expect(t, r, 0, r.stdout, "[1]", "Status:    ready", "1 CPU, 256 MiB")

	// A YAML file, building on the first (its name as fromTemplate).
	file := filepath.Join(t.TempDir(), "child.yaml")
	child := name + "-child"
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`name: %s
fromTemplate: %s
steps:
  - {type: RUN, args: ["test \"$GREETING\" = hello && test -f /dn.txt && echo child-ok"]}
`, child, name)), 0o600); err != nil {
		t.Fatal(err)
	}
	r = d.must("template", "build", "-f", file, "--wait", "--json")
	var built map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &built); err != nil || built["status"] != "ready" {
		t.Fatalf("build --json: %v: %s", err, r)
	}
	expect(t, r, 0, r.stderr, "child-ok") // the log goes to stderr with --json

	// A failing build: exit 1 with the error; its log has the step's output.
	bad := name + "-bad"
	r = d.run("template", "build", "--name", bad, "--from-image", "dreadnode/base:latest", "--step", "RUN echo dn-marker-before-failure; exit 9", "--wait")
	t.Logf("failing build: %s", r)
	expect(t, r, 1, r.stdout, "dn-marker-before-failure")
	expect(t, r, 1, r.stderr, "failed", "dn template logs")
	r = d.run("template", "logs", bad)
	expect(t, r, 0, r.stdout, "dn-marker-before-failure")
	expect(t, r, 0, r.stderr, "failed")

	// Usage errors: exit 2, naming what is wrong.
	r = d.run("template", "build", "--from-image", "x", "--step", "COPY a /b")
	expect(t, r, 2, r.stderr, "COPY")
	r = d.run("template", "build", "--name", "x")
	expect(t, r, 2, r.stderr, "exactly one of --from-image")
	badFile := filepath.Join(t.TempDir(), "typo.json")
	_ = os.WriteFile(badFile, []byte(`{"fromImage": "x", "stpes": []}`), 0o600)
	r = d.run("template", "build", "-f", badFile)
	expect(t, r, 2, r.stderr, `unknown field "stpes"`)
	// The server's refusal names the field.
	r = d.run("template", "build", "--from-image", "dreadnode/base:latest", "--cpu", "3")
	expect(t, r, 1, r.stderr, "CPU count must be 1 or an even number")

	r = d.must("template", "ls")
	t.Logf("ls: %s", r)
	expect(t, r, 0, r.stdout, name, child, bad, "ready", "error")
	r = d.must("template", "ls", "--json")
	var items []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &items); err != nil || len(items) != 3 {
		t.Fatalf("ls --json: %v: %s", err, r)
	}
	ids := map[string]string{}
	for _, it := range items {
		names, _ := it["names"].([]any)
		if len(names) == 1 {
			ids[names[0].(string)] = it["templateID"].(string)
		}
	}

	d.must("template", "rm", child, bad, name)
	r = d.must("template", "ls")
	if strings.Contains(r.stdout, name) {
		t.Fatalf("ls after rm: %s", r)
	}
	for n, id := range ids {
		if err := dockerNone("image", "dev.dreadnode.template="+id); err != nil {
			t.Fatalf("template %s: %v", n, err)
		}
	}
	r = d.run("template", "rm", name)
	expect(t, r, 1, r.stderr, "HTTP 404")
}

// dockerNone polls (30 s) until no Docker object of kind carries label.
func dockerNone(kind, label string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("docker", kind, "ls", "-q", "--filter", "label="+label).CombinedOutput()
		if err != nil {
			return fmt.Errorf("docker %s ls: %v: %s", kind, err, out)
		}
		ids := strings.Fields(string(out))
		if len(ids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%ss %v with %s are left", kind, ids, label)
		}
		time.Sleep(200 * time.Millisecond) // polling interval, bounded by the deadline
	}
}
