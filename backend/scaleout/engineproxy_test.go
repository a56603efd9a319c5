package scaleout_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// engineProxy stands between one replica and the real Docker engine: it
// forwards every call, except that while it holds, container creates wait
// until refused. A replica behind it is caught in the middle of a create
// for as long as a test needs.
type engineProxy struct {
	Host string // the replica's DOCKER_HOST

	mu      sync.Mutex
	holding bool
	held    int
	refuse  chan struct{}
}

func startEngineProxy(t *testing.T) *engineProxy {
	t.Helper()
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp") {
			t.Fatalf("engine proxy: DOCKER_HOST %q is neither unix:// nor tcp://", h)
		}
		network, addr = u.Scheme, u.Host
		if u.Scheme == "unix" {
			addr = u.Path
		}
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("engine proxy: %v", err)
	}
	p := &engineProxy{Host: "unix://" + sock, refuse: make(chan struct{})}
	forward := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
		FlushInterval: -1, // logs and events stream
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/containers/create") && p.wait(r.Context()) {
			http.Error(w, `{"message":"the test's engine proxy refused this create"}`, http.StatusServiceUnavailable)
			return
		}
		forward.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { p.Refuse(); _ = srv.Close() })
	return p
}

// Hold makes container creates wait (until Refuse).
func (p *engineProxy) Hold() {
	p.mu.Lock()
	p.holding = true
	p.mu.Unlock()
}

// Refuse answers the held creates, and any later ones, with 503.
func (p *engineProxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.refuse:
	default:
		close(p.refuse)
	}
}

// Held is how many creates are waiting.
func (p *engineProxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// wait holds a create while holding; true means refuse it.
func (p *engineProxy) wait(ctx context.Context) bool {
	p.mu.Lock()
	if !p.holding {
		p.mu.Unlock()
		return false
	}
	p.held++
	p.mu.Unlock()
	defer func() { p.mu.Lock(); p.held--; p.mu.Unlock() }()
	select {
	case <-p.refuse:
	case <-ctx.Done():
	}
	return true
}
