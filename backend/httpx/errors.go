// Package httpx holds the HTTP conventions every route shares (shared/API.md
// §Conventions): the error envelope, strict JSON decoding, and the org the
// request's API key belongs to.
package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain"
)

// FieldError is one entry of the envelope's "errors" list (the document's
// FieldError).
type FieldError = apitypes.FieldError

// Error is a non-2xx answer: the envelope it carries (the document's Error,
// see Envelope) and the headers sent with it. It is also an error, so
// handlers can return it and let WriteErr render it.
type Error struct {
	Code   int
	Detail string
	Type   string
	Errors []FieldError
	// Header is sent with the answer (e.g. Retry-After on a 429).
	Header http.Header
}

func (e *Error) Error() string { return e.Detail }

// Envelope is the body e answers with.
func (e *Error) Envelope() apitypes.Error {
	return apitypes.Error{Code: e.Code, Detail: e.Detail, Type: e.Type, Errors: e.Errors}
}

// MarshalJSON writes e as its envelope, wherever it is encoded.
func (e *Error) MarshalJSON() ([]byte, error) { return json.Marshal(e.Envelope()) }

// NewError builds an envelope.
func NewError(code int, typ, detail string) *Error {
	return &Error{Code: code, Type: typ, Detail: detail}
}

// Invalid is a 400 naming the offending field (dotted path, e.g. "resources.cpuCount").
func Invalid(field, msg string) *Error {
	return invalidIn(domain.InBody, field, msg)
}

// InvalidQuery is a 400 naming a query parameter.
func InvalidQuery(param, msg string) *Error {
	return invalidIn(domain.InQuery, param, msg)
}

// InvalidPath is a 400 naming a path variable (e.g. a pid that is not a number).
func InvalidPath(name, msg string) *Error {
	return invalidIn(domain.InPath, name, msg)
}

func invalidIn(in, field, msg string) *Error {
	return &Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: field + ": " + msg,
		Errors: []FieldError{{Loc: locOf(in, field), Msg: msg, Type: "value_error"}}}
}

// NotFound is a 404 for an object of kind with id.
func NotFound(kind, id string) *Error {
	return NewError(http.StatusNotFound, "not_found", kind+" "+quote(id)+" was not found")
}

// StatusClientClosedRequest is nginx's 499: the client closed the request
// (canceled it, disconnected or let its deadline pass) before the answer.
// Metrics count such requests as code="499", never as a 5xx.
const StatusClientClosedRequest = 499

// ClientClosed is the answer to a request its client abandoned.
func ClientClosed() *Error {
	return NewError(StatusClientClosedRequest, "client_closed_request", "the client closed the request before the answer was ready")
}

// Conflict is a 409 explaining why the operation does not apply now.
func Conflict(detail string) *Error { return NewError(http.StatusConflict, "conflict", detail) }

func quote(s string) string { return "\"" + s + "\"" }

// locOf is the envelope's loc of field sent in in (body, query or path).
// A query parameter or path variable is one name, even with dots in it.
func locOf(in, field string) []any {
	if in == "" {
		in = domain.InBody
	}
	loc := []any{in}
	switch {
	case in == domain.InBody && (field == "body" || field == ""): // the body as a whole, not a field named body
		return loc
	case in != domain.InBody:
		return append(loc, field)
	}
	for _, p := range strings.Split(field, ".") {
		loc = append(loc, p)
	}
	return loc
}

// AsError is the envelope err answers with: an *Error (wrapped or not) as
// itself, a domain error through the one map from domain errors to status
// codes and envelopes; nil for anything else (a 500, whose cause is logged,
// never shown).
func AsError(err error) *Error {
	var he *Error
	if errors.As(err, &he) && he != nil {
		return he
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return NewError(http.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("the request body exceeds the server's limit of %d bytes (DREADNODE_MAX_BODY_BYTES); send less", tooBig.Limit))
	}
	var (
		notFound *domain.NotFoundError
		conflict *domain.ConflictError
		invalid  *domain.InvalidError
		rejected *domain.RejectedError
		quota    *domain.QuotaExceededError
		credits  *domain.InsufficientCreditsError
		full     *domain.QueueFullError
		unavail  *domain.UnavailableError
		prov     *domain.ProviderError
		start    *domain.StartFailedError
		timeout  *domain.TimeoutError
	)
	switch {
	case errors.As(err, &notFound):
		return NewError(http.StatusNotFound, "not_found", notFound.Error())
	case errors.As(err, &conflict):
		return Conflict(conflict.Detail)
	case errors.As(err, &invalid):
		e := invalidIn(invalid.In, invalid.Field, invalid.Msg)
		if len(invalid.Path) > 0 { // where, then the parts as given
			e.Errors[0].Loc = append(locOf(invalid.In, "")[:1:1], invalid.Path...)
		}
		return e
	case errors.As(err, &rejected):
		return NewError(http.StatusBadRequest, "invalid_request", rejected.Detail)
	case errors.As(err, &quota):
		return NewError(http.StatusBadRequest, "quota_exceeded", quota.Detail)
	case errors.As(err, &credits):
		return NewError(http.StatusPaymentRequired, "insufficient_credits", credits.Error())
	case errors.As(err, &full):
		e := NewError(http.StatusTooManyRequests, "queue_full", full.Detail)
		e.Header = http.Header{"Retry-After": {strconv.Itoa(int(full.RetryAfter / time.Second))}}
		return e
	case errors.As(err, &unavail):
		d := unavail.RetryAfter
		if d <= 0 {
			d = domain.DefaultUnavailableRetry
		}
		e := NewError(http.StatusServiceUnavailable, "provider_unavailable", unavail.Detail)
		e.Header = http.Header{"Retry-After": {RetryAfterSeconds(d)}}
		return e
	case errors.As(err, &prov):
		return NewError(http.StatusBadGateway, "provider_error", prov.Detail)
	case errors.As(err, &start):
		return NewError(http.StatusBadGateway, "start_failed", start.Detail)
	case errors.As(err, &timeout):
		return NewError(http.StatusGatewayTimeout, "timeout", timeout.Detail)
	}
	return nil
}

// RetryAfterSeconds is d as a Retry-After header's value: whole seconds,
// rounded up (a client that waits less is early), at least 1 (0 invites a
// retry at once).
func RetryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteErr renders err: an *Error as itself, a domain error as AsError maps
// it, anything else as a 500 whose detail does not leak internals (Handler
// logs the cause).
func WriteErr(w http.ResponseWriter, err error) {
	if e := AsError(err); e != nil {
		for k, v := range e.Header {
			w.Header()[k] = v
		}
		WriteJSON(w, e.Code, e.Envelope())
		return
	}
	WriteJSON(w, http.StatusInternalServerError, apitypes.Error{Code: 500, Type: "internal_error",
		Detail: "the server failed to handle the request; it has been logged, retry later"})
}
