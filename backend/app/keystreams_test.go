package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openedStream is a stream being read to its end on its own goroutine.
type openedStream struct {
	name  string
	ended chan struct{}
	at    time.Time // when it ended
	last  event     // its last NDJSON line (NDJSON streams)
	text  string    // its last SSE lines (the SSE stream)
}

// follow reads next to the end on a goroutine.
func follow(name string, next func() (event, bool)) *openedStream {
	s := &openedStream{name: name, ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		for ev, ok := next(); ok; ev, ok = next() {
			s.last = ev
		}
		s.at = time.Now()
	}()
	return s
}

// sse opens GET /events/stream with key on ta and reads it on a goroutine.
func sse(t *testing.T, ta *testApp, key string) *openedStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ta.srv.URL+"/events/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /events/stream: %d", res.StatusCode)
	}
	s := &openedStream{name: "events/stream", ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				s.text = sc.Text()
			}
		}
		s.at = time.Now()
	}()
	return s
}

// endsBy waits until s ended, failing when it is still open at deadline
// (plus a grace for the test's own scheduling on a loaded machine); it
// returns how long after since it ended.
func (s *openedStream) endsBy(t *testing.T, since, deadline time.Time) time.Duration {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(time.Until(deadline) + 5*time.Second):
		t.Fatalf("%s is still open %s after its key stopped working", s.name, time.Since(since))
	}
	if s.at.After(deadline) {
		t.Fatalf("%s ended %s after its key stopped working, want within %s", s.name, s.at.Sub(since), deadline.Sub(since))
	}
	return s.at.Sub(since)
}

// Issue 34, item 5, on the real engine: the streams a key opened (SSE
// events, NDJSON exec, process output, a watch) end within a second of the
// key's revocation, with a last line saying so, while a stream of another
// key goes on; and the streams of a key that expires end within a second
// of its expiry.
func TestKeyRevocationAndExpiryEndItsStreams(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, nil)
	id, tok := ta.create(map[string]any{"waitReady": true, "timeout": 600})
	base := "/sandboxes/" + id
	r := ta.req("POST", base+"/processes", map[string]any{"cmd": []string{"sh", "-c", "echo up; exec sleep 600"}}, "X-Access-Token", tok)
	if r.code != http.StatusCreated {
		t.Fatalf("start a process: %d %s", r.code, r.body)
	}
	pid := int(r.json(t)["pid"].(float64))
	newKey := func(body map[string]any) (string, *testApp) {
		r := ta.req("POST", "/api/v1/org/org1/keys", body)
		if r.code != http.StatusCreated {
			t.Fatalf("create a key: %d %s", r.code, r.body)
		}
		with := *ta
		with.key = r.json(t)["key"].(string)
		return r.json(t)["id"].(string), &with
	}
	// open starts every stream kind with the key of k and returns once each
	// is flowing (its first line read).
	open := func(k *testApp) []*openedStream {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		_, exec := k.stream(ctx, "POST", base+"/exec", tok, map[string]any{"cmd": []string{"sh", "-c", "echo up; exec sleep 600"}})
		for ev, ok := exec(); ok && ev.Type != "stdout"; ev, ok = exec() {
		}
		_, output := k.stream(ctx, "GET", fmt.Sprintf("%s/processes/%d/output", base, pid), tok, nil)
		for ev, ok := output(); ok && ev.Type != "stdout"; ev, ok = output() {
		}
		_, watch := k.stream(ctx, "GET", base+"/fs/watch?path=/tmp", tok, nil)
		if ev, _ := watch(); ev.Type != "ready" {
			t.Fatalf("watch: %+v", ev)
		}
		return []*openedStream{sse(t, k, k.key), follow("exec", exec), follow("process output", output), follow("watch", watch)}
	}

	other := sse(t, ta, ta.key)
	keyID, k := newKey(map[string]any{"name": "streams"})
	streams := open(k)
	revoked := time.Now()
	if r := ta.req("DELETE", "/api/v1/org/org1/keys/"+keyID, nil); r.code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.code, r.body)
	}
	for _, s := range streams {
		took := s.endsBy(t, revoked, revoked.Add(time.Second))
		t.Logf("%s ended %s after the revocation was sent", s.name, took)
		if s.name == "events/stream" {
			if !strings.Contains(s.text, "revoked") {
				t.Errorf("the event stream's last line does not say why: %q", s.text)
			}
		} else if s.last.Type != "end" || s.last.Reason != "API key revoked" {
			t.Errorf("%s's last line: %+v, want end, API key revoked", s.name, s.last)
		}
	}
	select {
	case <-other.ended:
		t.Fatal("the stream of another key ended with the revoked one")
	default:
	}

	// A key that expires: its streams end within a second of its expiry.
	expires := time.Now().Add(4 * time.Second)
	_, k = newKey(map[string]any{"name": "short", "expiresAt": expires.UTC().Format(time.RFC3339Nano)})
	streams = open(k)
	if time.Now().After(expires) {
		t.Fatalf("opening the streams outlasted the key (%s); give it longer", time.Since(expires))
	}
	for _, s := range streams {
		took := s.endsBy(t, expires, expires.Add(time.Second))
		t.Logf("%s ended %s after the key expired", s.name, took)
		if s.at.Before(expires) {
			t.Errorf("%s ended %s before its key expired", s.name, expires.Sub(s.at))
		}
		if s.name != "events/stream" && (s.last.Type != "end" || s.last.Reason != "API key expired") {
			t.Errorf("%s's last line: %+v, want end, API key expired", s.name, s.last)
		}
	}
}

// The same on two replicas of one PostgreSQL database: a key revoked on
// replica A ends the event stream it opened on replica B within a second
// (the revocation reaches B as a notification; B asks nothing per event).
func TestKeyRevocationEndsStreamsOnEveryReplica(t *testing.T) {
	eachDatabase(t, func(t *testing.T, a, b *testApp) {
		id, key := adminKey(t, a, "org1", map[string]any{"name": "replicas"})
		s := sse(t, b, key)
		other := sse(t, b, b.key)
		revoked := time.Now()
		if r := a.req("DELETE", "/api/v1/org/org1/keys/"+id, nil); r.code != http.StatusNoContent {
			t.Fatalf("revoke on A: %d %s", r.code, r.body)
		}
		t.Logf("the stream on the other replica ended %s after the revocation was sent", s.endsBy(t, revoked, revoked.Add(time.Second)))
		select {
		case <-other.ended:
			t.Fatal("the stream of another key ended with the revoked one")
		default:
		}
	})
}

// A task environment's streaming execute opened with a key ends, with its
// end line, within a second of the key's revocation.
func TestKeyRevocationEndsTaskExecuteStream(t *testing.T) {
	t.Parallel()
	tasksDir := filepath.Join(t.TempDir(), "tasks")
	writeTask(t, tasksDir, "idle", "name: idle\nversion: 1.0.0\ndescription: One idle service.\ninstruction: none\nexecute_service: app\n",
		"services:\n  app:\n    image: dreadnode/base:latest\n    command: [\"sleep\", \"3600\"]\n")
	ta := newTestApp(t, func(c *Config) { c.TasksDir = tasksDir })
	const envs = "/api/v1/org/org1/ws/main/environments"
	r := ta.req("POST", envs, map[string]any{"task_ref": "idle", "timeout_sec": 600})
	if r.code != http.StatusCreated {
		t.Fatalf("create environment: %d %s", r.code, r.body)
	}
	path, token := envs+"/"+r.json(t)["id"].(string), r.json(t)["execute_token"].(string)
	ta.waitEnv(path, 3*time.Minute, "ready")
	r = ta.req("POST", "/api/v1/org/org1/keys", map[string]any{"name": "task-stream"})
	if r.code != http.StatusCreated {
		t.Fatalf("create a key: %d %s", r.code, r.body)
	}
	keyID, key := r.json(t)["id"].(string), r.json(t)["key"].(string)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", ta.srv.URL+path+"/execute",
		strings.NewReader(`{"command": "echo up; exec sleep 600", "timeout_sec": 600}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("X-Environment-Token", token)
	req.Header.Set("Accept", "application/x-ndjson")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("execute stream: %d", res.StatusCode)
	}
	sc := bufio.NewScanner(res.Body)
	next := func() (event, bool) {
		if !sc.Scan() {
			return event{}, false
		}
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Errorf("not NDJSON: %q", sc.Text()) // on follow's goroutine: no Fatal
			return event{}, false
		}
		return ev, true
	}
	for ev, ok := next(); ok && ev.Type != "stdout"; ev, ok = next() {
	}
	s := follow("task execute", next)
	revoked := time.Now()
	if r := ta.req("DELETE", "/api/v1/org/org1/keys/"+keyID, nil); r.code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.code, r.body)
	}
	t.Logf("the task execute stream ended %s after the revocation was sent", s.endsBy(t, revoked, revoked.Add(time.Second)))
	if s.last.Type != "end" || s.last.Reason != "API key revoked" {
		t.Fatalf("last line: %+v, want end, API key revoked", s.last)
	}
}
