package app

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const worldJobs = "/api/v1/org/org1/worlds/jobs"

// waitJob polls a job until done says so of its state, with a deadline (a
// start on a loaded machine can take a while).
func (ta *testApp) waitJob(id string, done func(state string) bool) map[string]any {
	ta.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		r := ta.req("GET", worldJobs+"/"+id, nil)
		if r.code != http.StatusOK {
			ta.t.Fatalf("get job: %d %s", r.code, r.body)
		}
		j := r.json(ta.t)
		if done(j["state"].(string)) {
			return j
		}
		if time.Now().After(deadline) {
			ta.t.Fatalf("job %s still %v after 4 minutes: %s", id, j["state"], r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the output is not a tar: %v", err)
		}
		body, _ := io.ReadAll(tr)
		switch h.Typeflag {
		case tar.TypeSymlink:
			out[strings.TrimPrefix(h.Name, "./")] = "-> " + h.Linkname
		default:
			out[strings.TrimPrefix(h.Name, "./")] = string(body)
		}
	}
}

// A job runs its command to its end as a world record, keeps the files of
// its output directory (symlinks as names, never followed), removes its
// container, and is listed by the ledger as kind world.
func TestWorldJobRunsToCompletionAndKeepsItsOutput(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	r := ta.req("POST", worldJobs, map[string]any{
		"command":  []string{"sh", "-c", "mkdir -p /output/sub && echo hello > /output/result.txt && echo deep > /output/sub/x && ln -s /etc/passwd /output/link && echo job-done"},
		"metadata": map[string]string{"run": "t1"},
	})
	if r.code != http.StatusCreated {
		t.Fatalf("start: %d %s", r.code, r.body)
	}
	id := r.json(t)["id"].(string)
	j := ta.waitJob(id, func(s string) bool { return s == "completed" || s == "failed" || s == "terminated" })
	if j["state"] != "completed" || j["exitCode"] != float64(0) || j["endedAt"] == nil {
		t.Fatalf("job ended as %v", j)
	}
	// The download waits for the stop that keeps the output; the job's
	// view shows what was kept from then on.
	o := ta.req("GET", worldJobs+"/"+id+"/output", nil)
	j = ta.req("GET", worldJobs+"/"+id, nil).json(t)
	out, _ := j["output"].(map[string]any)
	if out == nil || out["files"].(float64) < 3 || out["truncated"] != false {
		t.Fatalf("job output summary: %v", j["output"])
	}
	if o.code != http.StatusOK || o.hdr.Get("Content-Type") != "application/x-tar" || o.hdr.Get("X-Output-Truncated") != "false" {
		t.Fatalf("output: %d %v %s", o.code, o.hdr, o.body)
	}
	files := untar(t, o.body)
	if files["result.txt"] != "hello\n" || files["sub/x"] != "deep\n" || files["link"] != "-> /etc/passwd" {
		t.Fatalf("output files: %q", files)
	}
	if cs := ta.containersOf(id); len(cs) != 0 {
		t.Errorf("the job's container is still there: %v", cs)
	}
	l := ta.req("GET", worldJobs+"/"+id+"/logs", nil)
	if l.code != http.StatusOK || !strings.Contains(string(l.body), "job-done") {
		t.Errorf("logs: %d %s", l.code, l.body)
	}
	led := ta.req("GET", "/api/v1/org/org1/sandboxes/"+id, nil)
	if led.code != http.StatusOK || led.json(t)["sandbox_kind"] != "world" {
		t.Errorf("ledger: %d %s", led.code, led.body)
	}
	list := ta.req("GET", worldJobs+"?limit=10", nil)
	if list.code != http.StatusOK || !strings.Contains(string(list.body), id) {
		t.Fatalf("list: %d %s", list.code, list.body)
	}
	// The list reads the page's outputs in one query: the job's summary is there too.
	for _, it := range list.json(t)["items"].([]any) {
		if it := it.(map[string]any); it["id"] == id {
			if lo, _ := it["output"].(map[string]any); lo == nil || lo["files"] != out["files"] {
				t.Errorf("listed job's output: %v, want %v", it["output"], out)
			}
		}
	}
}

// A command that fails ends the job failed with its exit code; a job that
// is stopped ends terminated; neither offers its output before it ended.
func TestWorldJobFailsAndStops(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	failed := ta.req("POST", worldJobs, map[string]any{"command": []string{"sh", "-c", "exit 3"}})
	long := ta.req("POST", worldJobs, map[string]any{"command": []string{"sleep", "600"}, "outputDir": "/tmp/out"})
	if failed.code != http.StatusCreated || long.code != http.StatusCreated {
		t.Fatalf("start: %d %s / %d %s", failed.code, failed.body, long.code, long.body)
	}
	fid, lid := failed.json(t)["id"].(string), long.json(t)["id"].(string)

	j := ta.waitJob(fid, func(s string) bool { return s == "completed" || s == "failed" || s == "terminated" })
	if j["state"] != "failed" || j["exitCode"] != float64(3) || !strings.Contains(j["diagnostic"].(string), "code 3") {
		t.Fatalf("failing job: %v", j)
	}
	if o := ta.req("GET", worldJobs+"/"+fid+"/output", nil); o.code != http.StatusOK || len(untar(t, o.body)) != 0 {
		t.Errorf("a job without an output directory has an empty output: %d %s", o.code, o.body)
	}

	ta.waitJob(lid, func(s string) bool { return s == "running" })
	if o := ta.req("GET", worldJobs+"/"+lid+"/output", nil); o.code != http.StatusConflict || !strings.Contains(string(o.body), "has not ended") {
		t.Errorf("output of a running job: %d %s", o.code, o.body)
	}
	if d := ta.req("DELETE", worldJobs+"/"+lid, nil); d.code != http.StatusOK || d.json(t)["state"] != "terminated" {
		t.Fatalf("stop: %d %s", d.code, d.body)
	}
	j = ta.waitJob(lid, func(s string) bool { return s == "terminated" })
	deadline := time.Now().Add(2 * time.Minute)
	for ta.req("GET", worldJobs+"/"+lid+"/output", nil).code != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("a stopped job's output never became available: %v", j)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Bad requests name the field; a sandbox of another kind is no job.
func TestWorldJobBadInput(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{}, "command"},
		{map[string]any{"command": []string{}}, "command"},
		{map[string]any{"command": []string{""}}, "command.0"},
		{map[string]any{"command": []string{"true", "a\x00b"}}, "command.1"},
		{map[string]any{"command": []string{"true"}, "outputDir": "out"}, "outputDir"},
		{map[string]any{"command": []string{"true"}, "outputDir": "/"}, "outputDir"},
		{map[string]any{"command": []string{"true"}, "outputDir": "/a/../b"}, "outputDir"},
		{map[string]any{"command": []string{"true"}, "timeout": 0}, "timeout"},
		{map[string]any{"command": []string{"true"}, "timeout": 86401}, "timeout"},
		{map[string]any{"command": []string{"true"}, "cpuCount": 0}, "cpuCount"},
		{map[string]any{"command": []string{"true"}, "memoryMB": 1}, "memoryMB"},
		{map[string]any{"command": []string{"true"}, "image": "x"}, "image"},
	} {
		r := ta.req("POST", worldJobs, c.body)
		if r.code != http.StatusBadRequest || !strings.Contains(string(r.body), c.field) {
			t.Errorf("%v: %d %s (want 400 naming %s)", c.body, r.code, r.body, c.field)
		}
	}
	id, _ := ta.create(map[string]any{})
	defer ta.req("DELETE", "/sandboxes/"+id, nil)
	if r := ta.req("GET", worldJobs+"/"+id, nil); r.code != http.StatusNotFound {
		t.Errorf("a runtime sandbox read as a job: %d %s", r.code, r.body)
	}
	if r := ta.req("GET", worldJobs+"/no-such-job/output", nil); r.code != http.StatusNotFound {
		t.Errorf("unknown job: %d %s", r.code, r.body)
	}
}
