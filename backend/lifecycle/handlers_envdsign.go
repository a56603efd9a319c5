package lifecycle

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdsign"
)

// signedFileURL checks a signed /files URL of a sandbox created through
// /e2b with secure (envdTok set): E2B's envd takes GET and POST /files
// without X-Access-Token when the query's signature, made with the envd
// token, is valid (package envdsign), and E2B's SDKs hand such URLs out
// (downloadUrl, uploadUrl). The router holds the derived envd token, the
// agent does not, so the check is here; the request then goes on with
// the agent's own token, as every envd request does.
//
// signed reports whether the request is one (on envd's port, /files, GET
// or POST, a signature or expiration in the query, no token header); ok
// whether it passed. A refused one is answered here with envd's status and
// body ({"code","message"}, its messages to the byte). Any other request
// (a native sandbox's, one without a signature, one with a token header)
// is checkTraffic's.
func signedFileURL(w http.ResponseWriter, r *http.Request, envd bool, path, envdTok string) (signed, ok bool) {
	op := envdsign.Operation(r.Method)
	if !envd || envdTok == "" || path != "/files" || op == "" ||
		r.Header.Get("X-Access-Token") != "" || r.Header.Get(trafficTokenHeader) != "" {
		return false, false
	}
	q := r.URL.Query()
	if !q.Has("signature") && !q.Has("signature_expiration") {
		return false, false
	}
	err := envdsign.Check(q, op, envdTok, time.Now())
	if err == nil {
		return true, true
	}
	code := http.StatusUnauthorized
	var bad *envdsign.BadParam
	if errors.As(err, &bad) {
		code = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": err.Error()})
	return true, false
}
