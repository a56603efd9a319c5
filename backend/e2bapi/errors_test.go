package e2bapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// A 503 through the edge is E2B's {code, message} with Retry-After: the
// one httpx set for an unavailable dependency, or the default on a 503
// written without one.
func TestE2BUnavailableCarriesRetryAfter(t *testing.T) {
	cases := []struct {
		name, want string
		h          http.Handler
	}{
		{"domain error", "3", httpx.Handler(func(http.ResponseWriter, *http.Request) error {
			return fmt.Errorf("exec: %w", &domain.UnavailableError{Detail: "cannot reach the sandbox agent", RetryAfter: 3 * time.Second})
		})},
		{"written by hand", "1", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			httpx.WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"detail": "cannot reach the sandbox agent"})
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Errors(c.h).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/sandboxes/sb1/connect", nil))
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != c.want {
				t.Fatalf("status %d Retry-After %q, want 503 and %q: %s", rec.Code, rec.Header().Get("Retry-After"), c.want, rec.Body)
			}
			var body e2btypes.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != 503 || body.Message != "cannot reach the sandbox agent" {
				t.Fatalf("body %s (%v), want E2B's error naming the cause", rec.Body, err)
			}
		})
	}
}
