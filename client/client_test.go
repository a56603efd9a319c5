package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestClient(t *testing.T, h http.Handler) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(Config{
		BaseURL:      srv.URL,
		APIKey:       "k-123",
		UserAgent:    "terraform-provider-dreadnode/test",
		RetryMax:     3,
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
		Timeout:      5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func envelope(status int, detail, typ string) map[string]any {
	return map[string]any{"code": status, "detail": detail, "type": typ, "errors": nil}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "  ", "127.0.0.1:8080", "ftp://x", "http://"} {
		if _, err := New(Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) = nil error", u)
		}
	}
}

func TestHeaders(t *testing.T) {
	var got http.Header
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		writeJSON(w, 200, map[string]any{"sandboxID": "sb1", "state": "running"})
	}))
	sb, err := c.GetSandbox(context.Background(), "sb1")
	if err != nil {
		t.Fatal(err)
	}
	if sb.SandboxID != "sb1" || sb.State != "running" {
		t.Fatalf("decoded %+v", sb)
	}
	if got.Get("X-API-Key") != "k-123" {
		t.Errorf("X-API-Key = %q", got.Get("X-API-Key"))
	}
	if got.Get("User-Agent") != "terraform-provider-dreadnode/test" {
		t.Errorf("User-Agent = %q", got.Get("User-Agent"))
	}
}

func TestGetRetriesOn5xxAnd429(t *testing.T) {
	var n atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			writeJSON(w, 503, envelope(503, "warming up", "unavailable"))
		case 2:
			writeJSON(w, 429, envelope(429, "slow down", "rate_limited"))
		default:
			writeJSON(w, 200, map[string]any{"sandboxID": "sb1", "state": "running"})
		}
	}))
	if _, err := c.GetSandbox(context.Background(), "sb1"); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 3 {
		t.Fatalf("attempts = %d, want 3", n.Load())
	}
}

func TestGetGivesUpWithServerDetail(t *testing.T) {
	var n atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		writeJSON(w, 502, envelope(502, "provider is down", "bad_gateway"))
	}))
	_, err := c.GetSandbox(context.Background(), "sb1")
	if err == nil || !strings.Contains(err.Error(), "provider is down") {
		t.Fatalf("err = %v", err)
	}
	if n.Load() != 4 {
		t.Fatalf("attempts = %d, want 4 (1 + 3 retries)", n.Load())
	}
	if StatusOf(err) != 502 {
		t.Fatalf("StatusOf = %d", StatusOf(err))
	}
}

func TestCreateRetriesWithSameIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var bodies []string
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodies = append(bodies, string(b))
		n := len(keys)
		mu.Unlock()
		if n < 3 {
			writeJSON(w, 500, envelope(500, "oops", "internal"))
			return
		}
		writeJSON(w, 201, map[string]any{"sandboxID": "sb1", "state": "starting", "accessToken": "tok"})
	}))
	key := NewIdempotencyKey()
	sb, err := c.CreateSandbox(context.Background(), SandboxCreate{TemplateID: "base"}, key)
	if err != nil {
		t.Fatal(err)
	}
	if sb.AccessToken != "tok" {
		t.Fatalf("token = %q", sb.AccessToken)
	}
	if len(keys) != 3 {
		t.Fatalf("attempts = %d", len(keys))
	}
	for i, k := range keys {
		if k != key {
			t.Errorf("attempt %d key %q, want %q", i, k, key)
		}
		if bodies[i] != bodies[0] || !strings.Contains(bodies[i], `"templateID":"base"`) {
			t.Errorf("attempt %d body %q", i, bodies[i])
		}
	}
	if NewIdempotencyKey() == key {
		t.Error("idempotency keys repeat")
	}
}

func TestNonIdempotentPostNotRetriedOn5xx(t *testing.T) {
	var n atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			writeJSON(w, 500, envelope(500, "boom", "internal"))
			return
		}
		w.WriteHeader(204)
	}))
	err := c.PauseSandbox(context.Background(), "sb1")
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
	if n.Load() != 1 {
		t.Fatalf("attempts = %d, want 1", n.Load())
	}
}

func TestNonIdempotentPostRetriedOn429(t *testing.T) {
	var n atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			writeJSON(w, 429, envelope(429, "slow down", "rate_limited"))
			return
		}
		w.WriteHeader(204)
	}))
	if err := c.PauseSandbox(context.Background(), "sb1"); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("attempts = %d, want 2", n.Load())
	}
}

func TestConnectionErrorRetriedForGet(t *testing.T) {
	var n atomic.Int32
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			hj, ok := w.(http.Hijacker)
			if !ok {
				t.Error("no hijacker")
				return
			}
			conn, _, _ := hj.Hijack()
			_ = conn.Close() // connection reset, no answer
			return
		}
		writeJSON(w, 200, map[string]any{"sandboxID": "sb1", "state": "running"})
	}))
	if _, err := c.GetSandbox(context.Background(), "sb1"); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 2 {
		t.Fatalf("attempts = %d, want 2", n.Load())
	}
}

func TestErrorEnvelope(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 400, map[string]any{
			"code": 400, "detail": "timeoutMs was removed; use timeout (seconds)", "type": "validation_error",
			"errors": []map[string]any{{"loc": []any{"body", "timeoutMs"}, "msg": "unknown field", "type": "extra_forbidden"}},
		})
	}))
	_, err := c.CreateSandbox(context.Background(), SandboxCreate{}, "k")
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %T %v", err, err)
	}
	msg := err.Error()
	for _, want := range []string{"POST /sandboxes", "HTTP 400", "timeoutMs was removed; use timeout (seconds)", "validation_error", "body.timeoutMs: unknown field"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestErrorNotEnvelope(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "plain failure", 404)
	}))
	_, err := c.GetSandbox(context.Background(), "x")
	if !IsNotFound(err) || !strings.Contains(err.Error(), "plain failure") {
		t.Fatalf("err = %v", err)
	}
}

func TestEndpointsDecoding(t *testing.T) {
	var e Environment
	in := `{"id":"e1","service_urls":{"web":{"url":"http://127.0.0.1:49153","host":"127.0.0.1","port":49153},"api":"http://10.0.0.1:8080/x"}}`
	if err := json.Unmarshal([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	if got := e.ServiceURLs["web"]; got.Port != 49153 || got.Host != "127.0.0.1" {
		t.Errorf("web = %+v", got)
	}
	if got := e.ServiceURLs["api"]; got.Port != 8080 || got.Host != "10.0.0.1" || got.URL != "http://10.0.0.1:8080/x" {
		t.Errorf("api = %+v", got)
	}
	var n Environment
	if err := json.Unmarshal([]byte(`{"service_urls":null,"error":"task build failed: exit 3"}`), &n); err != nil {
		t.Fatal(err)
	}
	if n.ServiceURLs != nil || n.ErrorText() != "task build failed: exit 3" {
		t.Errorf("%+v %q", n.ServiceURLs, n.ErrorText())
	}
}

func TestDiagnosticText(t *testing.T) {
	for in, want := range map[string]string{
		`"image missing"`: "image missing",
		`{"kind":"image_missing","message":"no such image foo"}`: "image_missing: no such image foo",
		`null`: "",
	} {
		sb := Sandbox{Diagnostic: json.RawMessage(in)}
		if got := sb.DiagnosticText(); got != want {
			t.Errorf("DiagnosticText(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestListSandboxesFollowsNextToken(t *testing.T) {
	var queries []string
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		if r.URL.Query().Get("nextToken") == "" {
			w.Header().Set("X-Next-Token", "7")
			writeJSON(w, 200, []map[string]any{{"sandboxID": "a", "state": "running"}})
			return
		}
		writeJSON(w, 200, []map[string]any{{"sandboxID": "b", "state": "paused"}})
	}))
	list, err := c.ListSandboxes(context.Background(), []string{"running", "paused"}, map[string]string{"team": "red", "odd": "a&b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].SandboxID != "a" || list[1].SandboxID != "b" {
		t.Fatalf("list %+v", list)
	}
	if len(queries) != 2 || !strings.Contains(queries[1], "nextToken=7") {
		t.Fatalf("queries %v", queries)
	}
	if !strings.Contains(queries[0], "metadata=team%3Dred&") || strings.Contains(queries[0], "odd") || !strings.Contains(queries[0], "state=running%2Cpaused") {
		t.Fatalf("query %q", queries[0])
	}
}

func TestFieldErrorField(t *testing.T) {
	fe := FieldError{Loc: []any{"body", "network", "allowOut", float64(2)}}
	if got := strings.Join(fe.Field(), "."); got != "network.allowOut.2" {
		t.Fatalf("Field() = %q", got)
	}
	if (FieldError{Loc: []any{"body"}}).Field() != nil {
		t.Fatal("a loc without a field names none")
	}
}
