package agent

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// An agent with no token serves nothing but /health, and one given only
// its token's SHA-256 (the Docker provider's way) refuses /files without
// the token: it cannot check a signature, so it once served every /files
// request, and any process of the sandbox could read and write files as
// root through it.
func TestAgentFailsClosed(t *testing.T) {
	probe := func(t *testing.T, s *Server) map[string]int {
		t.Helper()
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		got := map[string]int{}
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/health"},
			{http.MethodGet, "/envs"},
			{http.MethodGet, "/files?path=" + url.QueryEscape("/etc/hostname")},
			{http.MethodPost, "/files?path=" + url.QueryEscape(t.TempDir()+"/written")},
			{http.MethodPost, "/process.Process/List"},
		} {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
			if c.method == http.MethodPost && !strings.HasPrefix(c.path, "/files") {
				req.Header.Set("Content-Type", "application/json")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got[c.method+" "+strings.SplitN(c.path, "?", 2)[0]] = res.StatusCode
		}
		return got
	}
	sum := sha256.Sum256([]byte("the-token"))
	for name, cfg := range map[string]Config{"no token": {}, "sha256 only": {TokenSHA256: sum[:]}} {
		t.Run(name, func(t *testing.T) {
			s := New(cfg, sharedReaper())
			t.Cleanup(s.Close)
			for route, code := range probe(t, s) {
				want := http.StatusUnauthorized
				if route == "GET /health" {
					want = http.StatusNoContent
				}
				if code != want {
					t.Errorf("%s without a token: %d, want %d", route, code, want)
				}
			}
		})
	}
}

// Main refuses to start without a token of any kind (it once served every
// request, as envd does before /init).
func TestMainRefusesWithoutToken(t *testing.T) {
	if _, err := os.Stat(DefaultTokenFile); err == nil {
		t.Fatalf("%s exists on this host; the test needs it absent", DefaultTokenFile)
	}
	for _, k := range []string{EnvToken, EnvTokenFile, EnvTokenSHA256} {
		t.Setenv(k, "")
	}
	t.Setenv(EnvListen, "127.0.0.1:0")
	t.Setenv(EnvReadyFile, "")
	done := make(chan int, 1)
	go func() { done <- Main(nil) }()
	select {
	case code := <-done:
		if code != 2 {
			t.Fatalf("Main without a token exited %d, want 2", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("Main without a token is serving (it did not exit within a minute)")
	}
}
