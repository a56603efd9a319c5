package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// bodyServer answers every POST on 8080 after reading its body.
const bodyServer = `import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
http.server.ThreadingHTTPServer(("", 8080), H).serve_forever()
`

// TestHostRouteBodiesUnderChurn: requests with bodies routed by host
// while sandboxes are created, paused and deleted never make net/http
// panic ("invalid concurrent Body.Read call", issue 34's fuzz). The
// router enables full duplex; when the dial to a sandbox being paused or
// deleted failed, the request's body was left unread, the server read it
// to its end after the handler (starting its background read) and then
// read the connection for the next request while that read ran
// (golang/go#68560). The router now closes the body before it returns.
//
// Seen failing without the close: every POST to a port where nothing
// listens logged "panic serving ...: invalid concurrent Body.Read call".
func TestHostRouteBodiesUnderChurn(t *testing.T) {
	t.Parallel()
	const domain = "sb.localhost"
	ta := newTestApp(t, func(c *Config) { c.SandboxDomain = domain })
	var logs syncBuffer
	a := &App{Log: slog.New(slog.NewTextHandler(&logs, nil))}
	srv := &http.Server{Handler: ta.app.Handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: a.serverLog()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
	api := func(method, path string) (int, map[string]any) {
		var body io.Reader
		if method == http.MethodPost && path == "/sandboxes" {
			b, _ := json.Marshal(map[string]any{"waitReady": true, "timeout": 300, "command": []string{"python3", "-c", bodyServer}})
			body = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, body)
		req.Header.Set("X-API-Key", ta.key)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return 0, nil
		}
		defer res.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode, m
	}
	post := func(id, tok string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://8080-"+id+"."+domain+"/upload", strings.NewReader(strings.Repeat("b", 16<<10)))
		req.Header.Set("X-Access-Token", tok)
		res, err := client.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	panicked := func() bool { return strings.Contains(logs.String(), "panic") }

	// A port where nothing listens: the dial fails on every request.
	quiet, quietTok := ta.create(map[string]any{"waitReady": true, "timeout": 300, "command": []string{"sleep", "infinity"}})
	for i := 0; i < 5; i++ {
		if code := post(quiet, quietTok); code != http.StatusBadGateway {
			t.Fatalf("POST %d to a closed port: %d, want 502 (0: the server dropped the connection); the server's log:\n%s", i, code, logs.String())
		}
	}
	if panicked() {
		t.Fatalf("a POST to a closed port made net/http panic:\n%s", logs.String())
	}

	// Churn: sandboxes serving POSTs are created, paused and deleted while
	// requests with bodies go to them.
	type sb struct{ id, tok string }
	var (
		mu   sync.Mutex
		live []sb
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		wg   sync.WaitGroup
		sent atomic.Int64
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				mu.Lock()
				s := sb{quiet, quietTok}
				if len(live) > 0 {
					s = live[i%len(live)]
				}
				mu.Unlock()
				post(s.id, s.tok)
				sent.Add(1)
			}
		}()
	}
	for round := 0; round < 3 && ctx.Err() == nil; round++ {
		var made []sb
		for i := 0; i < 2; i++ {
			code, m := api(http.MethodPost, "/sandboxes")
			if code != http.StatusCreated {
				t.Errorf("create: %d %v", code, m)
				continue
			}
			made = append(made, sb{m["sandboxID"].(string), m["accessToken"].(string)})
		}
		mu.Lock()
		live = append(live[:0], made...)
		mu.Unlock()
		before := sent.Load()
		poll.Until(t, 2*time.Minute, 20*time.Millisecond, func() error { // requests reach the new sandboxes
			if sent.Load() < before+20 {
				return fmt.Errorf("%d requests since the creates", sent.Load()-before)
			}
			return nil
		})
		if len(made) > 0 {
			api(http.MethodPost, "/sandboxes/"+made[0].id+"/pause")
		}
		for _, s := range made {
			api(http.MethodDelete, "/sandboxes/"+s.id)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("%d requests with bodies sent through the router during the churn", sent.Load())
	if panicked() {
		t.Fatalf("net/http panicked under churn:\n%s", logs.String())
	}
}
