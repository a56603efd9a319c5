package agent

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b/envdsign"
)

// fileRoute: GET and POST /files, which envd authorises itself (signed),
// so a download or upload URL can be handed to a client without the token.
func fileRoute(r *http.Request) bool {
	return r.URL.Path == "/files" && (r.Method == http.MethodGet || r.Method == http.MethodPost)
}

// signed authorises a /files request as E2B's envd does (validateSigning):
// with no token every request passes; a token in X-Access-Token must be
// the agent's; without one, the query's signature for operation, made
// with the agent's token (package envdsign), must be valid and unexpired.
// The answers are envd's, to the byte of its messages.
func (s *Server) signed(operation string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Token == "" {
			next(w, r)
			return
		}
		if got := r.Header.Get(TokenHeader); got != "" {
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) != 1 {
				writeError(w, http.StatusUnauthorized, "access token present in header but does not match")
				return
			}
			next(w, r)
			return
		}
		if err := envdsign.Check(r.URL.Query(), operation, s.cfg.Token, time.Now()); err != nil {
			var bad *envdsign.BadParam
			if errors.As(err, &bad) {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			writeError(w, http.StatusUnauthorized, err.Error())
			return
		}
		next(w, r)
	}
}
