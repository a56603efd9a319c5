package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/e2bfake"
)

func newE2BApp(t *testing.T) (*testApp, *e2bfake.Server) {
	t.Helper()
	fake := e2bfake.New(t)
	ta := newTestApp(t, func(c *Config) {
		c.Provider = "e2b"
		c.E2B = &e2b.Config{APIKey: fake.APIKey, APIURL: fake.URL, Domain: fake.Domain, HTTPClient: fake.HTTPClient(),
			EnvdURL: fake.EnvdURL, Retry: e2b.RetryConfig{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}}
	})
	return ta, fake
}

// §6 processes on E2B, through envd's process service (the spec-checked
// fake): streamed exec, background processes with stdin, list, signals.
func TestProcessesOnE2B(t *testing.T) {
	t.Parallel()
	ta, fake := newE2BApp(t)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id

	_, next := ta.stream(context.Background(), "POST", base+"/exec", tok, map[string]any{"cmd": []string{"echo", "hello"}})
	if ev, _ := next(); ev.Type != "start" || ev.PID == nil || *ev.PID == 0 {
		t.Fatalf("first event: %+v", ev)
	}
	if out, _, code := drain(next); out != "hello\n" || code != 0 {
		t.Fatalf("exec stream: %q %d", out, code)
	}

	// cat with stdin: follow its output (envd has no replay), then feed it.
	r := ta.req("POST", base+"/processes", map[string]any{"cmd": []string{"cat"}, "stdin": true, "tag": "cat"}, "X-Access-Token", tok)
	if r.code != 201 {
		t.Fatalf("start: %d %s", r.code, r.body)
	}
	cat := int(r.json(t)["pid"].(float64))
	_, next = ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output", base, cat), tok, nil)
	if ev, _ := next(); ev.Type != "start" || *ev.PID != cat {
		t.Fatalf("output starts with %+v", ev)
	}
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/stdin?eof=true", base, cat), "hello stdin", "X-Access-Token", tok); r.code != 204 {
		t.Fatalf("stdin: %d %s", r.code, r.body)
	}
	if out, _, code := drain(next); out != "hello stdin" || code != 0 {
		t.Fatalf("cat: %q %d", out, code)
	}

	// A tagged sleep is listed and ends on SIGTERM.
	r = ta.req("POST", base+"/processes", map[string]any{"cmd": []string{"sleep", "600"}, "tag": "sleeper"}, "X-Access-Token", tok)
	sleep := int(r.json(t)["pid"].(float64))
	var list []struct {
		PID     int
		Tag     string
		Cmd     []string
		Running bool
	}
	lr := ta.req("GET", base+"/processes", nil, "X-Access-Token", tok)
	if err := json.Unmarshal(lr.body, &list); err != nil || len(list) != 1 || list[0].PID != sleep || list[0].Tag != "sleeper" || list[0].Cmd[1] != "600" || !list[0].Running {
		t.Fatalf("list: %d %s", lr.code, lr.body)
	}
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/signal", base, sleep), map[string]any{"signal": "SIGINT"}, "X-Access-Token", tok); r.code != 400 {
		t.Fatalf("SIGINT on E2B: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/signal", base, sleep), map[string]any{"signal": "SIGTERM"}, "X-Access-Token", tok); r.code != 204 {
		t.Fatalf("SIGTERM: %d %s", r.code, r.body)
	}
	if got := fake.Signals(); len(got) != 1 || int(got[0].PID) != sleep {
		t.Fatalf("signals the fake received: %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for fake.Running() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes still run", fake.Running())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, c := range []struct {
		method, path string
		body         any
		code         int
	}{
		{"GET", base + "/processes/424242/output", nil, 404},
		{"POST", base + "/processes/424242/stdin", "x", 404},
		{"POST", base + "/processes/424242/signal", map[string]any{"signal": "SIGKILL"}, 404},
		{"POST", base + "/processes", map[string]any{"cmd": []string{"no-such-program"}}, 400},
	} {
		if r := ta.req(c.method, c.path, c.body, "X-Access-Token", tok); r.code != c.code {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.code, r.body, c.code)
		}
	}
	if r := ta.req("GET", base+"/processes", nil); r.code != http.StatusUnauthorized {
		t.Errorf("without the access token: %d", r.code)
	}
}

// §6 files on E2B, through envd's /files routes and filesystem service (the
// spec-checked fake).
func TestFilesOnE2B(t *testing.T) {
	t.Parallel()
	ta, fake := newE2BApp(t)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	do := ta.sandboxDo(t, base, tok)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	do("POST", "/fs/mkdir", map[string]any{"path": "/home/user/w"}, 204)
	do("POST", "/fs/mkdir", map[string]any{"path": "/home/user/w"}, 204)
	_, watch := ta.stream(ctx, "GET", base+"/fs/watch?path=/home/user/w", tok, nil)
	if ev, _ := watch(); ev.Type != "ready" {
		t.Fatalf("watch starts with %+v", ev)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 256<<10) // 4 MiB
	do("PUT", "/files?path=/home/user/w/blob", data, 204)
	if ev, _ := watch(); ev.Type != "create" || ev.Path != "/home/user/w/blob" {
		t.Fatalf("watch after a create: %+v", ev)
	}
	if got, ok := fake.File(fake.Sandboxes()[0].ID, "/home/user/w/blob"); !ok || !bytes.Equal(got, data) {
		t.Fatalf("the fake holds %d bytes", len(got))
	}
	if r := do("GET", "/files?path=/home/user/w/blob", nil, 200); !bytes.Equal(r.body, data) {
		t.Fatalf("GET: %d bytes", len(r.body))
	}
	if r := do("GET", "/files?path=/home/user/w/blob", nil, 206, "Range", "bytes=16-31"); string(r.body) != "0123456789abcdef" ||
		r.hdr.Get("Content-Range") != fmt.Sprintf("bytes 16-31/%d", len(data)) {
		t.Fatalf("range: %q %q", r.body, r.hdr.Get("Content-Range"))
	}
	do("PUT", "/files?path=/home/user/w/sub/deeper/x.txt", "x", 204)
	var list []struct{ Path, Type string }
	_ = json.Unmarshal(do("GET", "/fs?path=/home/user/w&depth=3", nil, 200).body, &list)
	if len(list) != 4 || list[0].Path != "/home/user/w/blob" || list[1].Type != "dir" {
		t.Fatalf("listing: %+v", list)
	}
	_ = json.Unmarshal(do("GET", "/fs?path=/home/user/w/blob", nil, 200).body, &list)
	if len(list) != 1 || list[0].Type != "file" {
		t.Fatalf("stat: %+v", list)
	}
	do("POST", "/fs/move", map[string]any{"from": "/home/user/w/sub", "to": "/home/user/moved"}, 204)
	if r := do("GET", "/files?path=/home/user/moved/deeper/x.txt", nil, 200); string(r.body) != "x" {
		t.Fatalf("moved: %q", r.body)
	}
	do("DELETE", "/files?path=/home/user/w/blob", nil, 204)
	for ev, ok := watch(); ; ev, ok = watch() {
		if !ok {
			t.Fatalf("the watch ended before the remove")
		}
		if ev.Type == "remove" && ev.Path == "/home/user/w/blob" {
			break
		}
	}
	cancel()
	do("GET", "/files?path=/home/user/w/blob", nil, 404)
	do("DELETE", "/files?path=/nope", nil, 404)
	do("GET", "/fs?path=/nope", nil, 404)
	do("POST", "/fs/move", map[string]any{"from": "/nope", "to": "/x"}, 404)
	do("GET", "/fs?path=rel", nil, 400)
	do("GET", "/files?path=/home/user/moved", nil, 400)
	do("GET", "/archive?path=/home/user", nil, 400)
}
