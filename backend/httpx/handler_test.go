package httpx

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
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
