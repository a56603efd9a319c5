package httpx

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gorilla/mux"
)

type orgKey struct{}

// WithOrg returns ctx carrying the authenticated org id.
func WithOrg(ctx context.Context, orgID string) context.Context {
	return context.WithValue(ctx, orgKey{}, orgID)
}

// Org is the org the request's API key belongs to ("" if unauthenticated).
func Org(r *http.Request) string {
	s, _ := r.Context().Value(orgKey{}).(string)
	return s
}

type keyKey struct{}

// Key is the API key a request authenticated with.
type Key struct {
	ID    string
	Scope string // "full" or "read"
	// ExpiresAt is when the key stops working (nil: never); a key it
	// makes may not outlive it.
	ExpiresAt *time.Time
	// Hash identifies the key to Watch (never the secret itself).
	Hash string
	// Watch, when set, calls revoked once when the key of hash is revoked
	// (on any replica) until stop is called: KeyContext uses it.
	Watch func(ctx context.Context, hash string, revoked func()) (stop func())
}

// WithKey returns ctx carrying the request's key.
func WithKey(ctx context.Context, k Key) context.Context {
	return context.WithValue(ctx, keyKey{}, k)
}

// RequestKey is the key the request authenticated with (zero if none).
func RequestKey(r *http.Request) Key {
	k, _ := r.Context().Value(keyKey{}).(Key)
	return k
}

// PathOrg checks the {org} path variable against the key's org. Another org's
// path answers 404 so existence does not leak.
func PathOrg(r *http.Request) (string, error) {
	org := Org(r)
	if p := mux.Vars(r)["org"]; p != org {
		return "", NewError(http.StatusNotFound, "not_found", "organization \""+p+"\" was not found")
	}
	return org, nil
}

// OrgHandler serves an org-scoped route (/api/v1/org/{org}/...): it checks
// the {org} path variable against the key's org (404 for another org) and
// passes the org id on.
func OrgHandler(h func(w http.ResponseWriter, r *http.Request, org string) error) Handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		org, err := PathOrg(r)
		if err != nil {
			return err
		}
		return h(w, r, org)
	}
}

// LogServerError logs, once per answer, a 5xx the server answered with the
// detail the client was told and the cause (err, nil when there is none
// beyond the detail), at WARN: the operator's only record of a sandbox's
// agent that could not be reached or a command that timed out. Handler
// calls it for the errors it maps; code that writes its own 5xx (a
// stream's last "error" line, a proxy's 502) calls it itself. An
// un-mapped 500 is logged at ERROR by Handler instead, and a request its
// client abandoned (499) at DEBUG: neither comes here.
func LogServerError(r *http.Request, status int, detail string, err error) {
	// The path names the sandbox (/sandboxes/{id}/exec); the detail says
	// what the client was told.
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", status, "detail", detail}
	if err != nil && err.Error() != detail {
		attrs = append(attrs, "err", err)
	}
	slog.WarnContext(r.Context(), "request failed", attrs...)
}

// Handler adapts a handler that returns an error to http.Handler.
type Handler func(w http.ResponseWriter, r *http.Request) error

func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	err := h(w, r)
	if err == nil {
		return
	}
	switch he := AsError(err); {
	case he != nil: // an *Error or a domain error, wrapped or not
		if he.Code >= 500 {
			LogServerError(r, he.Code, he.Detail, err)
		}
		WriteErr(w, he)
	case r.Context().Err() != nil:
		// The client went away (or its deadline passed): not a server error.
		// Nobody reads the answer; the status is for metrics and access logs.
		slog.Debug("request abandoned by the client", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteErr(w, ClientClosed())
	default: // a 500: the user sees a generic sentence, the operator the cause
		slog.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		WriteErr(w, err)
	}
}
