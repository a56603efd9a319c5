package templates_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/appenv"
)

// buildByAPI follows E2B's flow on the real backend and engine: request a
// build (/e2b/v3/templates), upload the COPY step's files by hash through
// the link the backend answers, start the build with body and wait for
// its end. It returns the build's final status answer.
func buildByAPI(t *testing.T, env *appenv.Env, name string, files []byte, body map[string]any) map[string]any {
	t.Helper()
	created := env.Must(202, "POST", "/e2b/v3/templates", map[string]any{"name": name, "cpuCount": 2, "memoryMB": 1024})
	tid, bid := created["templateID"].(string), created["buildID"].(string)
	if files != nil {
		sum := sha256.Sum256(files)
		hash := hex.EncodeToString(sum[:])
		st := env.Must(201, "GET", "/e2b/templates/"+tid+"/files/"+hash, nil)
		link, err := url.Parse(st["url"].(string))
		if err != nil || st["present"] == true {
			t.Fatalf("files status: %v (%v)", st, err)
		}
		if r := env.ReqKey("", "PUT", link.RequestURI(), files); r.Code >= 300 {
			t.Fatalf("upload: %s", r)
		}
		for _, s := range body["steps"].([]map[string]any) {
			if s["type"] == "COPY" {
				s["filesHash"] = hash
			}
		}
	}
	env.Must(202, "POST", "/e2b/v2/templates/"+tid+"/builds/"+bid, body)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		st := env.Must(200, "GET", "/e2b/templates/"+tid+"/builds/"+bid+"/status", nil)
		if s := st["status"]; s == "ready" || s == "error" {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the build did not end: %v", st)
		}
		time.Sleep(time.Second) // the build's status is polled, as E2B's SDK does
	}
}

// TestBuiltTemplateSandbox: a template built through the API (E2B's
// routes: ENV, WORKDIR, COPY of uploaded files, RUN, a start and a ready
// command) starts a sandbox (the native create) whose processes see the
// variables, start in the WORKDIR, find the copied and the built files,
// and whose start command already ran when the create answered. A RUN
// step past the build's memory fails the build with the memory limit
// named in its reason.
func TestBuiltTemplateSandbox(t *testing.T) {
	env := appenv.New(t, appenv.Opts{})
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	content := "Hello from COPY!"
	if err := tw.WriteHeader(&tar.Header{Name: "hello.txt", Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(content))
	_ = tw.Close()
	_ = gz.Close()

	st := buildByAPI(t, env, "seen", buf.Bytes(), map[string]any{
		"fromImage": "dreadnode/base:latest",
		"steps": []map[string]any{
			{"type": "ENV", "args": []string{"GREETING", "hi there"}},
			{"type": "WORKDIR", "args": []string{"/app"}},
			{"type": "COPY", "args": []string{".", "/app/"}},
			{"type": "RUN", "args": []string{"cat hello.txt > built.txt"}},
		},
		"startCmd": "sleep 2; echo started > /tmp/started; exec sleep infinity",
		"readyCmd": "test -s /tmp/started",
	})
	if st["status"] != "ready" {
		t.Fatalf("the build failed: %v", st)
	}

	r := env.Must(201, "POST", "/sandboxes", map[string]any{"templateID": "seen", "waitReady": true, "timeout": 300})
	id, tok := r["sandboxID"].(string), r["accessToken"].(string)
	t.Cleanup(func() { env.Req("DELETE", "/sandboxes/"+id, nil) })
	e := env.Req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"bash", "-c",
		`echo "$GREETING|$(pwd)|$(cat hello.txt)|$(cat built.txt)|$(cat /tmp/started)"`}}, "X-Access-Token", tok)
	var out struct {
		Stdout, Stderr string
		ExitCode       int
	}
	_ = json.Unmarshal(e.Body, &out)
	if want := "hi there|/app|Hello from COPY!|Hello from COPY!|started"; e.Code != 200 || strings.TrimSpace(out.Stdout) != want {
		t.Fatalf("the sandbox sees %q (stderr %q, %s), want %q", out.Stdout, out.Stderr, e, want)
	}

	hog := buildByAPI(t, env, "hog", nil, map[string]any{
		"fromImage": "dreadnode/base:latest",
		"steps":     []map[string]any{{"type": "RUN", "args": []string{`python3 -c "b = bytearray(2 << 30); print(len(b))"`}}},
	})
	reason, _ := hog["reason"].(map[string]any)
	if msg, _ := reason["message"].(string); hog["status"] != "error" || !strings.Contains(msg, "memory limit") {
		t.Fatalf("a memory hog: want an error naming the memory limit, got %v", hog)
	}
}
