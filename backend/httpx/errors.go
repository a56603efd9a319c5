// Package httpx holds the HTTP conventions every route shares (shared/API.md
// §Conventions): the error envelope, strict JSON decoding, and the org the
// request's API key belongs to.
package httpx

import (
	"encoding/json"
	"net/http"
	"strings"
)

// FieldError is one entry of the envelope's "errors" list.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// Error is the envelope every non-2xx answer carries. It is also an error, so
// handlers can return it and let WriteErr render it.
type Error struct {
	Code   int          `json:"code"`
	Detail string       `json:"detail"`
	Type   string       `json:"type"`
	Errors []FieldError `json:"errors"`
	// Header is sent with the answer (e.g. Retry-After on a 429).
	Header http.Header `json:"-"`
}

func (e *Error) Error() string { return e.Detail }

// NewError builds an envelope.
func NewError(code int, typ, detail string) *Error {
	return &Error{Code: code, Type: typ, Detail: detail}
}

// Invalid is a 400 naming the offending field (dotted path, e.g. "resources.cpuCount").
func Invalid(field, msg string) *Error {
	return &Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: field + ": " + msg,
		Errors: []FieldError{{Loc: locOf(field), Msg: msg, Type: "value_error"}}}
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

func locOf(field string) []any {
	loc := []any{"body"}
	if field == "body" { // the body as a whole, not a field named body
		return loc
	}
	for _, p := range strings.Split(field, ".") {
		loc = append(loc, p)
	}
	return loc
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteErr renders err: an *Error as itself, anything else as a 500 whose
// detail does not leak internals (Handler logs the cause).
func WriteErr(w http.ResponseWriter, err error) {
	if e, ok := err.(*Error); ok && e != nil {
		for k, v := range e.Header {
			w.Header()[k] = v
		}
		WriteJSON(w, e.Code, e)
		return
	}
	WriteJSON(w, http.StatusInternalServerError, &Error{Code: 500, Type: "internal_error",
		Detail: "the server failed to handle the request; it has been logged, retry later"})
}
