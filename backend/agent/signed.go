package agent

import (
	"errors"
	"net/http"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdsign"
)

// fileRoute: GET and POST /files, which envd authorises itself (signed),
// so a download or upload URL can be handed to a client without the token.
func fileRoute(r *http.Request) bool {
	return r.URL.Path == "/files" && (r.Method == http.MethodGet || r.Method == http.MethodPost)
}

// signed authorises a /files request as E2B's envd does (validateSigning):
// a token in X-Access-Token must be the agent's (envd lets every request
// pass when it has no token; this agent never serves without one, see
// Main); without one, the query's signature for operation, made
// with the agent's token (package envdsign), must be valid and unexpired.
// The answers are envd's, to the byte of its messages.
func (s *Server) signed(operation string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get(TokenHeader); got != "" {
			if !s.authorized(r) {
				writeError(w, http.StatusUnauthorized, "access token present in header but does not match")
				return
			}
			next(w, r)
			return
		}
		if s.cfg.Token == "" {
			// Given only the token's SHA-256 (the Docker provider's way), the
			// agent cannot check a signature made with the token: the
			// router checks it and sends the token (lifecycle's
			// signedFileURL). A request without the token is refused here,
			// never served (it once was: any process of the sandbox could
			// then read and write files as root).
			writeError(w, http.StatusUnauthorized, "the access token in "+TokenHeader+" is missing")
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
