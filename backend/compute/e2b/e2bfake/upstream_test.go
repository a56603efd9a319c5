package e2bfake_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

// With WithEnvd the fake still plays E2B's proxy: a wrong token is 401 and
// a paused sandbox 502 without reaching the real envd; what passes reaches
// it at the same path with the upstream's own token.
func TestWithEnvdProxiesBehindTheChecks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" token="+r.Header.Get("X-Access-Token"))
		mu.Unlock()
		if r.URL.Path == "/health" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"processes":[]}`))
	}))
	defer up.Close()
	f := e2bfake.New(t, e2bfake.WithEnvd(func(string) (string, string, error) { return up.URL, "upstream-token", nil }))
	st, body := send(t, f, "POST", f.URL+"/sandboxes", `{"templateID":"base","timeout":60,"secure":true}`, map[string]string{"X-API-Key": f.APIKey})
	if st != 201 {
		t.Fatalf("create: %d %s", st, body)
	}
	var sb struct{ SandboxID, EnvdAccessToken string }
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.EnvdAccessToken == "" {
		t.Fatalf("create answer %s: %v", body, err)
	}
	envd, good := f.EnvdURL(sb.SandboxID), map[string]string{"X-Access-Token": sb.EnvdAccessToken}
	list := func(h map[string]string) int {
		st, _ := send(t, f, "POST", envd+"/process.Process/List", `{}`, h)
		return st
	}

	if st, body := send(t, f, "GET", envd+"/health", "", good); st != http.StatusNoContent {
		t.Fatalf("/health: %d %s", st, body)
	}
	if st := list(good); st != http.StatusOK {
		t.Fatalf("List: %d", st)
	}
	if st := list(map[string]string{"X-Access-Token": "wrong"}); st != http.StatusUnauthorized {
		t.Fatalf("List with a wrong token: %d, want 401", st)
	}
	f.Pause(sb.SandboxID)
	if st := list(good); st != http.StatusBadGateway {
		t.Fatalf("List of a paused sandbox: %d, want 502", st)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET /health token=upstream-token", "POST /process.Process/List token=upstream-token"}
	if len(seen) != len(want) || seen[0] != want[0] || seen[1] != want[1] {
		t.Fatalf("the real envd saw %q, want %q", seen, want)
	}
}
