package tasks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// A handler failing because its client left answers 499 (for metrics and
// access logs); it once returned a nil *httpx.Error, which panicked.
func TestHandlerClientThatLeftIs499(t *testing.T) {
	s := &Service{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h := s.handler(func(w http.ResponseWriter, r *http.Request) error {
		return r.Context().Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil).WithContext(ctx))
	if rec.Code != httpx.StatusClientClosedRequest {
		t.Fatalf("status %d, want %d: %s", rec.Code, httpx.StatusClientClosedRequest, rec.Body)
	}
	// An *httpx.Error is answered as itself, wrapped or not.
	h = s.handler(func(w http.ResponseWriter, r *http.Request) error {
		return errors.Join(httpx.Conflict("busy"))
	})
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d, want 409: %s", rec.Code, rec.Body)
	}
}
