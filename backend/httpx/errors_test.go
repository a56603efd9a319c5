package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
)

// Every domain error a service returns has one answer on the wire: its
// status, its envelope (code, type, detail, errors) and headers. The map is
// the only place that knows them; this table is the wire contract it keeps.
// Retry-After is whole seconds, rounded up, never below 1.
func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", -time.Second: "1", time.Millisecond: "1", time.Second: "1",
		1001 * time.Millisecond: "2", 30 * time.Second: "30"} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestDomainErrorMap(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		typ    string
		detail string
		errs   any // the envelope's "errors" as decoded JSON
		header http.Header
	}{
		{name: "not found", err: domain.NotFound("runtime", "rt1"), status: 404, typ: "not_found",
			detail: `runtime "rt1" was not found`},
		{name: "not found with a detail", err: &domain.NotFoundError{Kind: "template", ID: "x", Detail: `unknown template "x"; available: base`},
			status: 404, typ: "not_found", detail: `unknown template "x"; available: base`},
		{name: "conflict", err: domain.ConflictIn("paused", "sandbox s1 is paused"), status: 409, typ: "conflict",
			detail: "sandbox s1 is paused"},
		{name: "invalid body field", err: domain.Invalid("resources.cpuCount", "must be between 1 and 16"), status: 400,
			typ: "validation_error", detail: "resources.cpuCount: must be between 1 and 16",
			errs: []any{map[string]any{"loc": []any{"body", "resources", "cpuCount"}, "msg": "must be between 1 and 16", "type": "value_error"}}},
		{name: "invalid body as a whole", err: domain.Invalid("body", "must be a JSON object"), status: 400,
			typ: "validation_error", detail: "body: must be a JSON object",
			errs: []any{map[string]any{"loc": []any{"body"}, "msg": "must be a JSON object", "type": "value_error"}}},
		{name: "invalid query parameter", err: &domain.InvalidError{In: domain.InQuery, Field: "a.b", Msg: "bad"}, status: 400,
			typ: "validation_error", detail: "a.b: bad",
			errs: []any{map[string]any{"loc": []any{"query", "a.b"}, "msg": "bad", "type": "value_error"}}},
		{name: "invalid list item, by parts", err: &domain.InvalidError{Field: "secret_ids.3", Msg: "empty", Path: []any{"secret_ids", 3}},
			status: 400, typ: "validation_error", detail: "secret_ids.3: empty",
			errs: []any{map[string]any{"loc": []any{"body", "secret_ids", float64(3)}, "msg": "empty", "type": "value_error"}}},
		{name: "invalid header", err: &domain.InvalidError{In: domain.InHeader, Field: "Idempotency-Key", Msg: "too long"}, status: 400,
			typ: "validation_error", detail: "Idempotency-Key: too long",
			errs: []any{map[string]any{"loc": []any{"header", "Idempotency-Key"}, "msg": "too long", "type": "value_error"}}},
		{name: "rejected by the provider", err: &domain.RejectedError{Detail: "could not run"}, status: 400, typ: "invalid_request",
			detail: "could not run"},
		{name: "quota", err: &domain.QuotaExceededError{Detail: "max_running: 0"}, status: 400, typ: "quota_exceeded",
			detail: "max_running: 0"},
		{name: "insufficient credits", err: &domain.InsufficientCreditsError{Org: "o1"}, status: 402, typ: "insufficient_credits",
			detail: "organization o1 has no credits left, so no new compute can start; ask an operator to grant credits (dreadnode-backend credits grant -org o1 -amount N, or POST /admin/orgs/o1/credits)"},
		{name: "queue full", err: &domain.QueueFullError{Detail: "queue full", RetryAfter: 30 * time.Second}, status: 429,
			typ: "queue_full", detail: "queue full", header: http.Header{"Retry-After": {"30"}}},
		{name: "unavailable", err: &domain.UnavailableError{Detail: "docker is down"}, status: 503, typ: "provider_unavailable",
			detail: "docker is down", header: http.Header{"Retry-After": {"1"}}},
		{name: "unavailable with a retry", err: fmt.Errorf("exec: %w", &domain.UnavailableError{Detail: "cannot reach the agent", RetryAfter: 2500 * time.Millisecond}),
			status: 503, typ: "provider_unavailable", detail: "cannot reach the agent", header: http.Header{"Retry-After": {"3"}}},
		{name: "provider", err: &domain.ProviderError{Detail: "refused"}, status: 502, typ: "provider_error", detail: "refused"},
		{name: "start failed", err: &domain.StartFailedError{Detail: "no start"}, status: 502, typ: "start_failed", detail: "no start"},
		{name: "timeout", err: &domain.TimeoutError{Detail: "too slow"}, status: 504, typ: "timeout", detail: "too slow"},
		{name: "wrapped", err: fmt.Errorf("starting: %w", domain.Conflict("busy")), status: 409, typ: "conflict", detail: "busy"},
		{name: "anything else", err: errors.New("disk on fire"), status: 500, typ: "internal_error",
			detail: "the server failed to handle the request; it has been logged, retry later"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Handler(func(w http.ResponseWriter, r *http.Request) error { return c.err })
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.status, rec.Body)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body is not JSON: %v: %s", err, rec.Body)
			}
			want := map[string]any{"code": float64(c.status), "type": c.typ, "detail": c.detail, "errors": c.errs}
			if !reflect.DeepEqual(body, want) {
				t.Fatalf("envelope\n got %v\nwant %v", body, want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			for k, v := range c.header {
				if got := rec.Header().Values(k); !reflect.DeepEqual(got, v) {
					t.Errorf("header %s = %v, want %v", k, got, v)
				}
			}
			if c.header == nil && rec.Header().Get("Retry-After") != "" {
				t.Errorf("unexpected Retry-After %q", rec.Header().Get("Retry-After"))
			}
			// The same envelope is what AsError gives streams (ndjson).
			if e := AsError(c.err); (e == nil) != (c.status == 500) || (e != nil && (e.Code != c.status || e.Detail != c.detail)) {
				t.Errorf("AsError = %+v", e)
			}
		})
	}
}
