package e2bapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes/e2btypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// Errors renders every error answer under the edge (the API-key check's,
// unknown routes' and the handlers' alike) as E2B's {code, message}: the
// shared handlers write the native envelope, and this rewrites it, so the
// two APIs share one map from failures to status codes. Headers (a 503's
// or 429's Retry-After) pass through. It logs nothing: a 5xx was logged
// where it was written (httpx.Handler), once.
func Errors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r)
		if ew.status >= 400 {
			ew.flush()
		}
	})
}

// errorWriter passes success answers through and holds an error answer's
// body until the handler is done, to rewrite it.
type errorWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *errorWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if code < 400 {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *errorWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.status >= 400 {
		if w.body.Len() < 1<<20 { // error bodies are small; never hold more
			w.body.Write(b)
		}
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *errorWriter) flush() {
	var native struct {
		Detail string `json:"detail"`
		Type   string `json:"type"`
	}
	// E2B's Error; error_code only when the native envelope had a type.
	out := e2btypes.Error{Code: int32(w.status), Message: http.StatusText(w.status)}
	if json.Unmarshal(w.body.Bytes(), &native) == nil && native.Detail != "" {
		out.Message = native.Detail
		if native.Type != "" {
			out.ErrorCode = &native.Type
		}
	}
	b, _ := json.Marshal(out)
	h := w.ResponseWriter.Header()
	if w.status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		// httpx sets it on its 503s; one written otherwise still tells an
		// E2B client when to retry, as E2B's own 503s do.
		h.Set("Retry-After", httpx.RetryAfterSeconds(domain.DefaultUnavailableRetry))
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(append(b, '\n'))
}
