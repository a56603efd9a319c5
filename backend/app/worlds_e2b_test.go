package app

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// jobExec is the fake envd's command runner for Worlds jobs: "job CODE"
// leaves files in /output, prints a line and exits with CODE; the rest are
// the fake's builtins (sleep runs until signalled).
func jobExec(ctx context.Context, e *e2bfake.Exec) int {
	if e.Cmd != "job" {
		if e.Cmd == "sleep" {
			<-ctx.Done()
			return 137
		}
		return 0
	}
	e.WriteFile("/output/result.txt", []byte("hello\n"))
	e.WriteFile("/output/sub/x", []byte("deep\n"))
	fmt.Fprintln(e.Stdout, "job-done")
	code, _ := strconv.Atoi(e.Args[0])
	return code
}

// A Worlds job on E2B: the sandbox outlives its command there (E2B has no
// main process), so the provider follows the command to its end; the job
// ends with its exit code, its output directory is kept (envd has no
// archive route: listed and read file by file), its sandbox is removed and
// the ledger lists it as world. A failing command ends it failed; a stopped
// job ends terminated.
func TestWorldJobOnE2B(t *testing.T) {
	t.Parallel()
	fake := e2bfake.New(t, e2bfake.WithExec(jobExec, nil))
	ta := newTestApp(t, func(c *Config) {
		c.Provider = "e2b"
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
	})
	ended := func(s string) bool { return s == "completed" || s == "failed" || s == "terminated" }

	ok := ta.req("POST", worldJobs, map[string]any{"command": []string{"job", "0"}})
	bad := ta.req("POST", worldJobs, map[string]any{"command": []string{"job", "3"}})
	long := ta.req("POST", worldJobs, map[string]any{"command": []string{"sleep", "600"}})
	if ok.code != http.StatusCreated || bad.code != http.StatusCreated || long.code != http.StatusCreated {
		t.Fatalf("start: %d %s / %d %s / %d %s", ok.code, ok.body, bad.code, bad.body, long.code, long.body)
	}
	id, bid, lid := ok.json(t)["id"].(string), bad.json(t)["id"].(string), long.json(t)["id"].(string)

	j := ta.waitJob(id, ended)
	if j["state"] != "completed" || j["exitCode"] != float64(0) || j["endedAt"] == nil {
		t.Fatalf("job ended as %v", j)
	}
	o := ta.req("GET", worldJobs+"/"+id+"/output", nil)
	if o.code != http.StatusOK || o.hdr.Get("Content-Type") != "application/x-tar" || o.hdr.Get("X-Output-Truncated") != "false" {
		t.Fatalf("output: %d %v %s", o.code, o.hdr, o.body)
	}
	if files := untar(t, o.body); files["result.txt"] != "hello\n" || files["sub/x"] != "deep\n" {
		t.Fatalf("output files: %q", files)
	}
	if l := ta.req("GET", worldJobs+"/"+id+"/logs", nil); l.code != http.StatusOK || !strings.Contains(string(l.body), "job-done") {
		t.Errorf("logs: %d %s", l.code, l.body)
	}
	if led := ta.req("GET", "/api/v1/org/org1/sandboxes/"+id, nil); led.code != http.StatusOK || led.json(t)["sandbox_kind"] != "world" {
		t.Errorf("ledger: %d %s", led.code, led.body)
	}

	j = ta.waitJob(bid, ended)
	if j["state"] != "failed" || j["exitCode"] != float64(3) || !strings.Contains(j["diagnostic"].(string), "code 3") {
		t.Fatalf("failing job: %v", j)
	}

	ta.waitJob(lid, func(s string) bool { return s == "running" })
	if d := ta.req("DELETE", worldJobs+"/"+lid, nil); d.code != http.StatusOK || d.json(t)["state"] != "terminated" {
		t.Fatalf("stop: %d %s", d.code, d.body)
	}
	deadline := time.Now().Add(time.Minute)
	for ta.req("GET", worldJobs+"/"+lid+"/output", nil).code != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("a stopped job's output never became available")
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
	for len(fake.Sandboxes()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandboxes left on E2B: %+v", fake.Sandboxes())
		}
		time.Sleep(20 * time.Millisecond) // poll interval within the deadline
	}
}
