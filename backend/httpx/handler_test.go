package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
)

// A handler failing because its client left answers 499 (for metrics and
// access logs); the task API once turned that into a nil *Error, which
// panicked. An *Error is answered as itself, wrapped or not.
func TestHandlerClientThatLeftIs499(t *testing.T) {
	h := Handler(func(w http.ResponseWriter, r *http.Request) error {
		return r.Context().Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil).WithContext(ctx))
	if rec.Code != StatusClientClosedRequest {
		t.Fatalf("status %d, want %d: %s", rec.Code, StatusClientClosedRequest, rec.Body)
	}
	h = Handler(func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("looking it up: %w", Conflict("busy"))
	})
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d, want 409: %s", rec.Code, rec.Body)
	}
}

// captureLog sends slog's default logger to a buffer (JSON lines, every
// level) for the test's duration.
func captureLog(t *testing.T) func() []map[string]any {
	t.Helper()
	var mu sync.Mutex
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal(line, &rec); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			out = append(out, rec)
		}
		buf.Reset()
		return out
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// Every 5xx is logged exactly once, at WARN or above, with the method, the
// path (which names the sandbox), the status and the cause (issue 33: a
// 503 from an agent that could not be reached left no log line). A 4xx is
// not logged; a client that left is DEBUG.
func TestHandlerLogsEveryServerErrorOnce(t *testing.T) {
	logs := captureLog(t)
	cause := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	cases := []struct {
		name   string
		err    error
		cancel bool
		status int
		level  string // "" for no log line
	}{
		{"unavailable", fmt.Errorf("exec: %w: %w", &domain.UnavailableError{Detail: "cannot reach the sandbox agent in sandbox sb1"}, cause), false, 503, "WARN"},
		{"timeout", &domain.TimeoutError{Detail: "command \"sleep 99\" was killed after 1m0.2s"}, false, 504, "WARN"},
		{"bad gateway", NewError(http.StatusBadGateway, "provider_error", "refused"), false, 502, "WARN"},
		{"internal", errors.New("disk on fire"), false, 500, "ERROR"},
		{"mapped while the client left", &domain.UnavailableError{Detail: "cannot reach the sandbox agent in sandbox sb1"}, true, 503, "WARN"},
		{"client left", context.Canceled, true, StatusClientClosedRequest, "DEBUG"},
		{"conflict", domain.Conflict("sandbox sb1 is paused"), false, 409, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Handler(func(http.ResponseWriter, *http.Request) error { return c.err })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancel {
				cancel()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/sandboxes/sb1/exec", nil).WithContext(ctx))
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
			}
			got := logs()
			if c.level == "" {
				if len(got) != 0 {
					t.Fatalf("a %d was logged: %v", c.status, got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d log lines, want 1: %v", len(got), got)
			}
			l := got[0]
			if l["level"] != c.level || l["method"] != "POST" || l["path"] != "/api/v1/sandboxes/sb1/exec" {
				t.Errorf("log line %v, want %s naming the method and path", l, c.level)
			}
			if c.status >= 500 && c.status != 500 && (l["status"] != float64(c.status) || l["detail"] == "" || l["detail"] == nil) {
				t.Errorf("log line %v does not name the status and detail", l)
			}
			if c.name == "unavailable" && !strings.Contains(fmt.Sprint(l["err"]), "connection refused") {
				t.Errorf("log line %v does not name the cause", l)
			}
		})
	}
}
