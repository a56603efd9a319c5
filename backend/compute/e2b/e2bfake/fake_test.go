package e2bfake_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdpb/process/processconnect"
)

func send(t *testing.T, f *e2bfake.Server, method, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := f.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func wantViolation(t *testing.T, f *e2bfake.Server, contains string) {
	t.Helper()
	v := f.TakeViolations()
	for _, s := range v {
		if strings.Contains(s, contains) {
			return
		}
	}
	t.Fatalf("no violation mentioning %q; got %q", contains, v)
}

// The fake must notice a client that strays from openapi.yml, or it proves
// nothing about the provider.
func TestFakeCatchesRequestViolations(t *testing.T) {
	t.Parallel()
	f := e2bfake.New(t)
	key := map[string]string{"X-API-Key": f.APIKey}

	if st, body := send(t, f, "POST", f.URL+"/sandboxes", `{"templateID":"base","timeout":60}`, key); st != 201 {
		t.Fatalf("a valid create: %d %s", st, body)
	}
	if v := f.TakeViolations(); len(v) != 0 {
		t.Fatalf("a valid create was flagged: %q", v)
	}

	send(t, f, "POST", f.URL+"/sandboxes", `{"timeout":60}`, key)
	wantViolation(t, f, "templateID")

	send(t, f, "POST", f.URL+"/sandboxes", `{"templateID":"base","allowInternetAccess":false}`, key)
	wantViolation(t, f, "body.allowInternetAccess is not a field")

	send(t, f, "POST", f.URL+"/sandboxes", `{"templateID":"base","timeout":"60"}`, key)
	wantViolation(t, f, "timeout")

	send(t, f, "POST", f.URL+"/sandboxes", `{"templateID":"base","network":{"allowOutt":[]}}`, key)
	wantViolation(t, f, "body.network.allowOutt")

	if st, _ := send(t, f, "GET", f.URL+"/v2/sandboxes?limit=1", "", nil); st != 401 {
		t.Fatalf("no key: %d", st)
	}
	wantViolation(t, f, "X-API-Key")

	send(t, f, "GET", f.URL+"/v2/sandboxes?limit=500", "", key)
	wantViolation(t, f, "limit")

	send(t, f, "GET", f.URL+"/v2/sandboxes?state=stopped", "", key)
	wantViolation(t, f, "state")

	send(t, f, "POST", f.URL+"/sandboxes/abc/connect", `{}`, key)
	wantViolation(t, f, "timeout")

	send(t, f, "POST", f.URL+"/sandboxes/abc/resumee", `{}`, key)
	wantViolation(t, f, "matches no operation")

	send(t, f, "PATCH", f.URL+"/sandboxes/abc", `{}`, key)
	wantViolation(t, f, "matches no operation")

	send(t, f, "POST", f.URL+"/sandboxes/abc/refreshes", `{"duration":7200}`, key)
	wantViolation(t, f, "duration")
}

func TestFakeCatchesResponseViolations(t *testing.T) {
	t.Parallel()
	f := e2bfake.New(t)
	key := map[string]string{"X-API-Key": f.APIKey}
	// 409 is not documented for POST /sandboxes/{id}/timeout, nor sent by E2B.
	f.FailNext(e2bfake.RouteTimeout, 1, e2bfake.Fault{Status: 409})
	send(t, f, "POST", f.URL+"/sandboxes/abc/timeout", `{"timeout":5}`, key)
	wantViolation(t, f, "answered 409, which the spec does not document")

	// 429 is not in openapi.yml for GET /sandboxes/{id} but E2B sends it: a
	// note, as long as the body is an Error.
	f.FailNext(e2bfake.RouteGet, 1, e2bfake.Fault{Status: 429})
	send(t, f, "GET", f.URL+"/sandboxes/abc", "", key)
	if v := f.TakeViolations(); len(v) != 0 {
		t.Fatalf("violations %q", v)
	}
	if n := f.Notes(); len(n) != 1 || !strings.Contains(n[0], "429") {
		t.Fatalf("notes %q", n)
	}
}

func TestFakeValidatesEnvdFiles(t *testing.T) {
	t.Parallel()
	f := e2bfake.New(t)
	key := map[string]string{"X-API-Key": f.APIKey}
	st, body := send(t, f, "POST", f.URL+"/sandboxes", `{"templateID":"base","secure":true}`, key)
	if st != 201 {
		t.Fatal(st, body)
	}
	id := between(body, `"sandboxID":"`, `"`)
	token := between(body, `"envdAccessToken":"`, `"`)
	sb, _ := f.Sandbox(id)
	if sb.EnvdAccessToken != token || token == "" {
		t.Fatalf("token %q vs %q", token, sb.EnvdAccessToken)
	}
	envd := f.EnvdURL(id)

	if st, _ := send(t, f, "POST", envd+"/files?path=/a", "raw", map[string]string{"X-Access-Token": token, "Content-Type": "application/octet-stream"}); st != 200 {
		t.Fatalf("octet-stream upload: %d", st)
	}
	if st, b := send(t, f, "GET", envd+"/files?path=/a", "", map[string]string{"X-Access-Token": token}); st != 200 || b != "raw" {
		t.Fatalf("download: %d %q", st, b)
	}
	if st, _ := send(t, f, "GET", envd+"/files?path=/a", "", map[string]string{"X-Access-Token": "wrong"}); st != 401 {
		t.Fatalf("wrong token: %d", st)
	}
	if v := f.TakeViolations(); len(v) != 0 {
		t.Fatalf("violations %q", v)
	}
	send(t, f, "POST", envd+"/files?path=/a", "text", map[string]string{"X-Access-Token": token, "Content-Type": "text/plain"})
	wantViolation(t, f, "envd.yaml")
	send(t, f, "GET", envd+"/filez?path=/a", "", map[string]string{"X-Access-Token": token})
	wantViolation(t, f, "matches no operation")
}

func between(s, a, b string) string {
	_, rest, ok := strings.Cut(s, a)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, b)
	return v
}

func TestFakeProcessStream(t *testing.T) {
	t.Parallel()
	f := e2bfake.New(t, e2bfake.WithExec(func(ctx context.Context, e *e2bfake.Exec) int {
		fmt.Fprint(e.Stdout, "out")
		fmt.Fprint(e.Stderr, "err")
		return 3
	}, nil))
	id := f.AddSandbox(e2bfake.SandboxSpec{})
	sb, _ := f.Sandbox(id)
	client := processconnect.NewProcessClient(f.HTTPClient(), f.EnvdURL(id))
	req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "anything"}})
	req.Header().Set("X-Access-Token", sb.EnvdAccessToken)
	stream, err := client.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	var kinds []string
	var code int32
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().GetEvent().(type) {
		case *process.ProcessEvent_Start:
			kinds = append(kinds, "start")
		case *process.ProcessEvent_Data:
			out.Write(ev.Data.GetStdout())
			errOut.Write(ev.Data.GetStderr())
		case *process.ProcessEvent_End:
			kinds = append(kinds, "end")
			code = ev.End.GetExitCode()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(kinds, ",") != "start,end" || out.String() != "out" || errOut.String() != "err" || code != 3 {
		t.Fatalf("events %v out %q err %q code %d", kinds, out.String(), errOut.String(), code)
	}

	bad := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "x"}})
	bad.Header().Set("X-Access-Token", "wrong")
	stream, err = client.Start(context.Background(), bad)
	if err == nil {
		for stream.Receive() {
		}
		err = stream.Err()
	}
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("wrong token: %v", err)
	}
}

// recordingTB captures what New reports at cleanup.
type recordingTB struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func TestViolationsFailTheTestAtCleanup(t *testing.T) {
	t.Parallel()
	rec := &recordingTB{TB: t}
	f := e2bfake.New(rec)
	send(t, f, "POST", f.URL+"/sandboxes", `{"timeout":60}`, map[string]string{"X-API-Key": f.APIKey})
	for i := len(rec.cleanups) - 1; i >= 0; i-- {
		rec.cleanups[i]()
	}
	if len(rec.errors) == 0 || !strings.Contains(rec.errors[0], "spec violation") {
		t.Fatalf("cleanup reported %q", rec.errors)
	}
}

func TestSpecDirFailsLoudly(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := e2bfake.SpecDir()
	if err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Fatalf("SpecDir outside the repository: %v", err)
	}
}

func TestSpecDirFindsTheSpecs(t *testing.T) {
	t.Parallel()
	dir, err := e2bfake.SpecDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(dir, "/shared/e2b") {
		t.Fatal(dir)
	}
}
