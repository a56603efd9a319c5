package app

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/backendproc"
)

// event is one NDJSON line of a process stream.
type event struct {
	Type     string `json:"type"`
	PID      *int   `json:"pid"`
	Data     string `json:"data"`
	DataB64  string `json:"dataB64"`
	ExitCode *int   `json:"exitCode"`
	Path     string `json:"path"`
	Detail   string `json:"detail"`
	Reason   string `json:"reason"`
}

// stream opens an NDJSON stream and returns a line reader; the response is
// closed at cleanup.
func (ta *testApp) stream(ctx context.Context, method, path, token string, body any) (*http.Response, func() (event, bool)) {
	ta.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, ta.srv.URL+path, rd)
	if err != nil {
		ta.t.Fatal(err)
	}
	req.Header.Set("X-API-Key", ta.key)
	req.Header.Set("X-Access-Token", token)
	req.Header.Set("Accept", "application/x-ndjson")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		ta.t.Fatal(err)
	}
	ta.t.Cleanup(func() { res.Body.Close() })
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	return res, func() (event, bool) {
		if !sc.Scan() {
			return event{}, false
		}
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			ta.t.Fatalf("not an NDJSON line: %q", sc.Text())
		}
		return ev, true
	}
}

// drain reads a process stream to its end and returns stdout, stderr and
// the exit code (-1000 without an exit event).
func drain(next func() (event, bool)) (stdout, stderr string, code int) {
	code = -1000
	for ev, ok := next(); ok; ev, ok = next() {
		switch ev.Type {
		case "stdout":
			stdout += ev.Data
		case "stderr":
			stderr += ev.Data
		case "exit":
			code = *ev.ExitCode
		}
	}
	return
}

// sandboxDo returns a request helper for one sandbox's routes that fails
// the test on an unexpected status.
func (ta *testApp) sandboxDo(t *testing.T, base, tok string) func(method, path string, body any, want int, hdr ...string) resp {
	return func(method, path string, body any, want int, hdr ...string) resp {
		t.Helper()
		r := ta.req(method, base+path, body, append([]string{"X-Access-Token", tok}, hdr...)...)
		if r.code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.code, r.body, want)
		}
		return r
	}
}

// A command printing a line every 200 ms is read line by line while it runs.
func TestExecStreamsWhileRunning(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	began := time.Now()
	res, next := ta.stream(context.Background(), "POST", "/sandboxes/"+id+"/exec", tok,
		map[string]any{"cmd": []string{"sh", "-c", "for i in 1 2 3 4 5 6 7 8; do echo line$i; sleep 0.2; done; echo done >&2; exit 3"}})
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("exec stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	ev, _ := next()
	if ev.Type != "start" || ev.PID == nil || *ev.PID <= 0 {
		t.Fatalf("first event: %+v", ev)
	}
	var arrivals []time.Duration
	var stderr string
	code := -1
	for ev, ok := next(); ok; ev, ok = next() {
		switch ev.Type {
		case "stdout":
			arrivals = append(arrivals, time.Since(began))
			if want := fmt.Sprintf("line%d\n", len(arrivals)); ev.Data != want {
				t.Fatalf("stdout event %d: %q, want %q (one event per line)", len(arrivals), ev.Data, want)
			}
		case "stderr":
			stderr += ev.Data
		case "exit":
			code = *ev.ExitCode
		}
	}
	total := time.Since(began)
	if len(arrivals) != 8 || code != 3 || stderr != "done\n" {
		t.Fatalf("lines %d, exit %d, stderr %q", len(arrivals), code, stderr)
	}
	// The command runs >= 1.6 s; the first line must come long before it ends.
	if total < 1600*time.Millisecond || arrivals[0] > total-time.Second {
		t.Fatalf("first line after %s of %s: output was not streamed", arrivals[0], total)
	}
	// Bad input is refused before the stream begins, as plain JSON errors.
	if r := ta.req("POST", "/sandboxes/"+id+"/exec", map[string]any{"cmd": []string{"true"}, "cwd": "rel"},
		"X-Access-Token", tok, "Accept", "application/x-ndjson"); r.code != 400 {
		t.Fatalf("relative cwd: %d %s", r.code, r.body)
	}
}

// A client that leaves a stream (exec, process output, watch) ends it: the
// command and the sandbox-side readers are killed and no goroutine is left
// behind.
func TestStreamClientDisconnect(t *testing.T) {
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	// Warm up connection pools so they do not count as leaks.
	ta.req("POST", base+"/exec", map[string]any{"cmd": []string{"true"}}, "X-Access-Token", tok)
	r := ta.req("POST", base+"/processes", map[string]any{"cmd": []string{"sh", "-c", "echo up; exec sleep 600"}}, "X-Access-Token", tok)
	p, ok := r.json(t)["pid"].(float64)
	if !ok {
		t.Fatalf("start a process: %d %s (the sandbox: %s)", r.code, r.body, ta.req("GET", base, nil).body)
	}
	pid := int(p)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	_, next := ta.stream(ctx, "POST", base+"/exec", tok, map[string]any{"cmd": []string{"sh", "-c", "echo up; exec sleep 313"}})
	for ev, ok := next(); ok && ev.Type != "stdout"; ev, ok = next() {
	}
	_, output := ta.stream(ctx, "GET", fmt.Sprintf("%s/processes/%d/output", base, pid), tok, nil)
	for ev, ok := output(); ok && ev.Type != "stdout"; ev, ok = output() {
	}
	_, watch := ta.stream(ctx, "GET", base+"/fs/watch?path=/tmp", tok, nil)
	if ev, _ := watch(); ev.Type != "ready" {
		t.Fatalf("watch: %+v", ev)
	}
	// What the streams run in the sandbox: the sleep of the exec (following
	// output and watching run inside the sandbox's agent, no process each).
	count := func() string {
		script := `n=0; for p in /proc/[0-9]*; do c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null); case "$c" in "sleep 313 ") n=$((n+1));; esac; done; echo $n`
		r := ta.req("POST", base+"/exec", map[string]any{"cmd": []string{"sh", "-c", script}}, "X-Access-Token", tok)
		return strings.TrimSpace(r.json(t)["stdout"].(string))
	}
	if n := count(); n != "1" {
		t.Fatalf("while the clients listen, %s stream processes run in the sandbox, want 1 (the sandbox: %s)", n, ta.req("GET", base, nil).body)
	}
	cancel()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := count()
		n := runtime.NumGoroutine()
		if left == "0" && n <= before+2 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("after the clients left: %s stream processes left in the sandbox, goroutines %d > %d:\n%s", left, n, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Background processes: a server answers through the traffic router, stdin
// round-trips through cat, SIGTERM ends a sleep, and output replays.
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	start := func(body map[string]any) int {
		t.Helper()
		r := ta.req("POST", base+"/processes", body, "X-Access-Token", tok)
		if r.code != 201 {
			t.Fatalf("start %v: %d %s", body, r.code, r.body)
		}
		m := r.json(t)
		if m["tag"] != body["tag"] && body["tag"] != nil {
			t.Fatalf("tag: %v", m)
		}
		return int(m["pid"].(float64))
	}

	// A server started in the background answers through the router.
	srv := start(map[string]any{"cmd": []string{"python3", "-m", "http.server", "8080", "--directory", "/etc"}, "tag": "web"})
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := ta.reqKey("", "GET", base+"/proxy/8080/hostname", nil, "X-Access-Token", tok)
		if r.code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the background server does not answer through the router: %d %s", r.code, r.body)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// stdin round-trips through cat.
	cat := start(map[string]any{"cmd": []string{"cat"}, "stdin": true, "tag": "cat"})
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/stdin", base, cat), "hello ", "X-Access-Token", tok); r.code != 204 {
		t.Fatalf("stdin: %d %s", r.code, r.body)
	}
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/stdin?eof=true", base, cat), "world\n", "X-Access-Token", tok); r.code != 204 {
		t.Fatalf("stdin eof: %d %s", r.code, r.body)
	}
	_, next := ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output", base, cat), tok, nil)
	if out, _, code := drain(next); out != "hello world\n" || code != 0 {
		t.Fatalf("cat printed %q, exit %d", out, code)
	}
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/stdin", base, cat), "late", "X-Access-Token", tok); r.code != 409 {
		t.Fatalf("stdin after eof: %d %s", r.code, r.body)
	}

	// SIGTERM ends a sleep; a follower sees the exit.
	sleep := start(map[string]any{"cmd": []string{"sh", "-c", "echo sleeping; exec sleep 600"}, "tag": "sleep"})
	_, next = ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output", base, sleep), tok, nil)
	if ev, _ := next(); ev.Type != "start" || *ev.PID != sleep {
		t.Fatalf("output starts with %+v", ev)
	}
	if ev, _ := next(); ev.Data != "sleeping\n" {
		t.Fatalf("first output %+v", ev)
	}
	if r := ta.req("POST", fmt.Sprintf("%s/processes/%d/signal", base, sleep), map[string]any{"signal": "SIGTERM"}, "X-Access-Token", tok); r.code != 204 {
		t.Fatalf("signal: %d %s", r.code, r.body)
	}
	if _, _, code := drain(next); code != 128+15 {
		t.Fatalf("sleep after SIGTERM: exit %d, want 143", code)
	}

	// The list shows every process with its state.
	var list []struct {
		PID      int      `json:"pid"`
		Tag      string   `json:"tag"`
		Cmd      []string `json:"cmd"`
		Running  bool     `json:"running"`
		ExitCode *int     `json:"exitCode"`
	}
	r := ta.req("GET", base+"/processes", nil, "X-Access-Token", tok)
	if err := json.Unmarshal(r.body, &list); err != nil || r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	byTag := map[string]int{}
	for i, p := range list {
		byTag[p.Tag] = i
	}
	if p := list[byTag["web"]]; p.PID != srv || !p.Running || p.ExitCode != nil || p.Cmd[0] != "python3" {
		t.Fatalf("web: %+v", p)
	}
	if p := list[byTag["sleep"]]; p.Running || p.ExitCode == nil || *p.ExitCode != 143 {
		t.Fatalf("sleep: %+v", p)
	}

	// Output so far without following; stdout and stderr keep their order.
	chatty := start(map[string]any{"cmd": []string{"sh", "-c", "echo a; echo b >&2; echo c; exec sleep 600"}, "env": map[string]string{"X": "1"}})
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, next = ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output?follow=false", base, chatty), tok, nil)
		out, errOut, code := drain(next)
		if out == "a\nc\n" && errOut == "b\n" && code == -1000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follow=false: %q %q %d", out, errOut, code)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A long output keeps (at least) its last MiB.
	long := start(map[string]any{"cmd": []string{"python3", "-c", "import sys\nfor i in range(400000): sys.stdout.write('%07d\\n' % i)"}})
	_, next = ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output", base, long), tok, nil)
	drain(next) // until it exits
	_, next = ta.stream(context.Background(), "GET", fmt.Sprintf("%s/processes/%d/output?follow=false", base, long), tok, nil)
	var full strings.Builder
	for i := range 400000 {
		fmt.Fprintf(&full, "%07d\n", i)
	}
	if out, _, code := drain(next); len(out) < 1<<20 || !strings.HasSuffix(full.String(), out) || code != 0 {
		t.Fatalf("replay of a 3 MiB output: %d bytes, a suffix of it: %v, exit %d", len(out), strings.HasSuffix(full.String(), out), code)
	}

	// Errors.
	for _, c := range []struct {
		method, path string
		body         any
		code         int
	}{
		{"GET", base + "/processes/999999/output", nil, 404},
		{"POST", base + "/processes/abc/signal", map[string]any{"signal": "SIGTERM"}, 400},
		{"POST", fmt.Sprintf("%s/processes/%d/signal", base, srv), map[string]any{"signal": "SIGSTOP"}, 400},
		{"POST", fmt.Sprintf("%s/processes/%d/signal", base, sleep), map[string]any{"signal": "SIGTERM"}, 409},
		{"POST", base + "/processes", map[string]any{"cmd": []string{}}, 400},
		{"POST", base + "/processes", map[string]any{"cmd": []string{"true"}, "cwd": "tmp"}, 400},
		{"POST", base + "/processes", map[string]any{"cmd": []string{"no-such-program"}}, 400},
		{"POST", base + "/processes", map[string]any{"cmd": []string{"true"}, "bogus": 1}, 400},
	} {
		if r := ta.req(c.method, c.path, c.body, "X-Access-Token", tok); r.code != c.code {
			t.Errorf("%s %s %v: %d %s, want %d", c.method, c.path, c.body, r.code, r.body, c.code)
		}
	}
	if r := ta.req("GET", base+"/processes", nil); r.code != 401 {
		t.Errorf("no access token: %d", r.code)
	}
	// A paused sandbox answers 409.
	if r := ta.req("POST", base+"/pause", nil); r.code != 204 {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	if r := ta.req("GET", base+"/processes", nil, "X-Access-Token", tok); r.code != 409 {
		t.Fatalf("processes of a paused sandbox: %d %s", r.code, r.body)
	}
}

// patterned is a deterministic, incompressible stream of n bytes.
type patterned struct {
	rng *rand.ChaCha8
	n   int64
}

func (p *patterned) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n {
		b = b[:p.n]
	}
	_, _ = p.rng.Read(b)
	p.n -= int64(len(b))
	return len(b), nil
}

func newPatterned(n int64) *patterned { return &patterned{rng: rand.NewChaCha8([32]byte{7}), n: n} }

// peakHeap samples the heap until stop is called and returns the peak.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak.Load() }
}

// A 300 MiB file round-trips byte-exact through PUT and GET, streamed
// (the backend never holds it), and Range reads a slice of it.
// Not parallel: the heap is measured for the whole test process, and
// parallel tests (E2B flows, hostile output) would count in it.
func TestLargeFileRoundTrip(t *testing.T) {
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	const size = 300 << 20
	url := ta.srv.URL + "/sandboxes/" + id + "/files?path=/tmp/big/blob.bin"
	stop := peakHeap()
	want := sha256.New()
	req, _ := http.NewRequest("PUT", url, io.TeeReader(newPatterned(size), want))
	req.ContentLength = size
	req.Header.Set("X-API-Key", ta.key)
	req.Header.Set("X-Access-Token", tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	req, _ = http.NewRequest("GET", url, nil)
	req.Header.Set("X-API-Key", ta.key)
	req.Header.Set("X-Access-Token", tok)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, err := io.Copy(got, res.Body)
	res.Body.Close()
	peak := stop()
	if err != nil || res.StatusCode != 200 || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("GET: %d, %d bytes (%v), same content: %v", res.StatusCode, n, err, bytes.Equal(got.Sum(nil), want.Sum(nil)))
	}
	if peak > 120<<20 {
		t.Fatalf("the heap peaked at %d MiB while moving a %d MiB file: it was buffered", peak>>20, size>>20)
	}
	// Range: bytes 1000..1999 are the pattern's.
	pattern := make([]byte, 2000)
	_, _ = io.ReadFull(newPatterned(2000), pattern)
	r := ta.req("GET", "/sandboxes/"+id+"/files?path=/tmp/big/blob.bin", nil, "X-Access-Token", tok, "Range", "bytes=1000-1999")
	if r.code != 206 || !bytes.Equal(r.body, pattern[1000:]) || r.hdr.Get("Content-Range") != fmt.Sprintf("bytes 1000-1999/%d", size) {
		t.Fatalf("range: %d %d bytes %q", r.code, len(r.body), r.hdr.Get("Content-Range"))
	}
	if r := ta.req("GET", "/sandboxes/"+id+"/files?path=/tmp/big/blob.bin", nil, "X-Access-Token", tok, "Range", fmt.Sprintf("bytes=%d-", size)); r.code != 416 {
		t.Fatalf("range past the end: %d", r.code)
	}
}

// The filesystem routes: list, stat, mkdir, move, remove, tar round trip,
// watch, and their errors.
func TestFilesystem(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true})
	base := "/sandboxes/" + id
	do := ta.sandboxDo(t, base, tok)
	// Watch first, so the changes below are seen.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	do("POST", "/fs/mkdir", map[string]any{"path": "/work/watched"}, 204)
	_, watch := ta.stream(ctx, "GET", base+"/fs/watch?path=/work/watched", tok, nil)
	if ev, _ := watch(); ev.Type != "ready" {
		t.Fatalf("watch starts with %+v", ev)
	}
	// waitEvent skips other events (a create may be followed by a write).
	waitEvent := func(typ, path string) {
		t.Helper()
		var seen []event
		for ev, ok := watch(); ok; ev, ok = watch() {
			if ev.Type == typ && ev.Path == path {
				return
			}
			seen = append(seen, ev)
		}
		t.Fatalf("the watch ended without %s %s; saw %+v", typ, path, seen)
	}
	timer := time.AfterFunc(30*time.Second, cancel) // the deadline of the watch
	do("PUT", "/files?path=/work/watched/new.txt", "x", 204)
	waitEvent("create", "/work/watched/new.txt")
	do("DELETE", "/files?path=/work/watched/new.txt", nil, 204)
	waitEvent("remove", "/work/watched/new.txt")
	timer.Stop()
	cancel()

	do("POST", "/fs/mkdir", map[string]any{"path": "/work/src/deep/er"}, 204)
	do("POST", "/fs/mkdir", map[string]any{"path": "/work/src/deep/er"}, 204) // exists: fine
	do("PUT", "/files?path=/work/src/a.txt", "alpha", 204)
	do("PUT", "/files?path=/work/src/deep/b.txt", "bravo", 204)
	do("PUT", "/files?path=/work/src/deep/er/c.bin", []byte{0, 1, 2, 255}, 204)
	var list []struct {
		Name, Path, Type string
		Size             int64
		Mode             uint32
		ModifiedAt       time.Time
	}
	names := func(r resp) []string {
		list = nil
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatalf("listing: %s", r.body)
		}
		var out []string
		for _, e := range list {
			out = append(out, e.Path+":"+e.Type)
		}
		sort.Strings(out)
		return out
	}
	if got := names(do("GET", "/fs?path=/work/src", nil, 200)); strings.Join(got, ",") != "/work/src/a.txt:file,/work/src/deep:dir" {
		t.Fatalf("depth 1: %v", got)
	}
	if got := names(do("GET", "/fs?path=/work/src&depth=3", nil, 200)); len(got) != 5 {
		t.Fatalf("depth 3: %v", got)
	}
	if names(do("GET", "/fs?path=/work/src/a.txt", nil, 200)); len(list) != 1 || list[0].Size != 5 || list[0].Mode != 0o644 || list[0].Name != "a.txt" ||
		time.Since(list[0].ModifiedAt) > time.Hour {
		t.Fatalf("stat: %+v", list)
	}

	// Ranges: a suffix, and nothing of an empty file.
	if r := do("GET", "/files?path=/work/src/deep/er/c.bin", nil, 206, "Range", "bytes=-2"); !bytes.Equal(r.body, []byte{2, 255}) || r.hdr.Get("Content-Range") != "bytes 2-3/4" {
		t.Fatalf("suffix range: %q %q", r.body, r.hdr.Get("Content-Range"))
	}
	do("PUT", "/files?path=/work/empty", "", 204)
	if r := do("GET", "/files?path=/work/empty", nil, 200); len(r.body) != 0 {
		t.Fatalf("empty file: %q", r.body)
	}
	do("GET", "/files?path=/work/empty", nil, 416, "Range", "bytes=0-")

	// The directory round-trips as tar.
	r := do("GET", "/archive?path=/work/src", nil, 200)
	tr := tar.NewReader(bytes.NewReader(r.body))
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(tr)
		files[strings.TrimPrefix(h.Name, "./")] = string(data)
	}
	if files["a.txt"] != "alpha" || files["deep/b.txt"] != "bravo" || files["deep/er/c.bin"] != "\x00\x01\x02\xff" {
		t.Fatalf("archive entries: %v", files)
	}
	do("PUT", "/archive?path=/work/copy", r.body, 204)
	if got := do("GET", "/files?path=/work/copy/deep/er/c.bin", nil, 200); !bytes.Equal(got.body, []byte{0, 1, 2, 255}) {
		t.Fatalf("extracted file: %q", got.body)
	}
	if got := names(do("GET", "/fs?path=/work/copy&depth=3", nil, 200)); len(got) != 5 {
		t.Fatalf("extracted tree: %v", got)
	}

	do("POST", "/fs/move", map[string]any{"from": "/work/copy/a.txt", "to": "/work/moved/a.txt"}, 204)
	if got := do("GET", "/files?path=/work/moved/a.txt", nil, 200); string(got.body) != "alpha" {
		t.Fatalf("moved file: %q", got.body)
	}
	do("DELETE", "/files?path=/work/copy", nil, 204)
	do("GET", "/fs?path=/work/copy", nil, 404)

	// Errors: 404 missing, 400 relative or bad, 409 not running.
	do("GET", "/files?path=/nope/x", nil, 404)
	do("DELETE", "/files?path=/nope/x", nil, 404)
	do("GET", "/fs?path=/nope", nil, 404)
	do("GET", "/archive?path=/nope", nil, 404)
	do("POST", "/fs/move", map[string]any{"from": "/nope", "to": "/x"}, 404)
	do("GET", "/fs?path=work", nil, 400)
	do("GET", "/fs?path=/work&depth=0", nil, 400)
	do("POST", "/fs/mkdir", map[string]any{"path": "rel"}, 400)
	do("POST", "/fs/move", map[string]any{"from": "/work/src", "to": "x"}, 400)
	do("GET", "/files?path=/work/src", nil, 400) // a directory
	do("PUT", "/archive?path=/work/bad", "not a tar", 400)
	do("GET", "/fs/watch?path=/nope", nil, 404)
	do("POST", "/pause", nil, 204)
	do("GET", "/fs?path=/work", nil, 409)
	do("GET", "/files?path=/work/src/a.txt", nil, 409)
}

// A process's output lives in the sandbox: a restarted backend replays it.
func TestProcessOutputSurvivesBackendRestart(t *testing.T) {
	t.Parallel()
	b := backendproc.Start(t, backendproc.Options{})
	res, err := b.Do(context.Background(), "POST", "/sandboxes", strings.NewReader(`{"waitReady": true}`))
	if err != nil {
		t.Fatal(err)
	}
	var sb struct{ SandboxID, AccessToken string }
	_ = json.NewDecoder(res.Body).Decode(&sb)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("create: %d", res.StatusCode)
	}
	t.Cleanup(func() {
		if res, err := b.Do(context.Background(), "DELETE", "/sandboxes/"+sb.SandboxID, nil); err == nil {
			res.Body.Close()
		}
	})
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, b.URL+path, strings.NewReader(body))
		req.Header.Set("X-API-Key", b.APIKey)
		req.Header.Set("X-Access-Token", sb.AccessToken)
		req.Header.Set("Accept", "application/x-ndjson")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		return res.StatusCode, data
	}
	code, body := do("POST", "/sandboxes/"+sb.SandboxID+"/processes", `{"cmd": ["sh", "-c", "for i in 1 2 3; do echo before-$i; done; read x; echo after-$x"], "stdin": true}`)
	if code != 201 {
		t.Fatalf("start: %d %s", code, body)
	}
	var p struct{ PID int }
	_ = json.Unmarshal(body, &p)
	out := fmt.Sprintf("/sandboxes/%s/processes/%d/output", sb.SandboxID, p.PID)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(string(body), "before-3") {
		if time.Now().After(deadline) {
			t.Fatalf("output before the restart: %s", body)
		}
		_, body = do("GET", out+"?follow=false", "")
	}
	b.Kill()
	b.Restart(t)
	code, body = do("GET", out+"?follow=false", "")
	if code != 200 || !strings.Contains(string(body), "before-1") || !strings.Contains(string(body), "before-3") || strings.Contains(string(body), `"exit"`) {
		t.Fatalf("output after the restart: %d %s", code, body)
	}
	// The process still runs and takes stdin from the new backend.
	if code, body := do("POST", fmt.Sprintf("/sandboxes/%s/processes/%d/stdin?eof=true", sb.SandboxID, p.PID), "restart\n"); code != 204 {
		t.Fatalf("stdin: %d %s", code, body)
	}
	_, body = do("GET", out, "")
	if !strings.Contains(string(body), "after-restart") || !strings.Contains(string(body), `"exitCode":0`) {
		t.Fatalf("followed output: %s", body)
	}
}
