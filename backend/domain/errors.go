// Package domain holds what the backend's services share without HTTP or
// SQL: the errors they return. Each error says what went wrong in the
// user's terms; the HTTP edge (httpx.Handler) maps it to a status code and
// the error envelope in one place, so no service knows status codes.
package domain

import (
	"fmt"
	"time"
)

// NotFoundError: the object the caller named does not exist, or is not
// theirs (the two are not told apart, so existence does not leak).
type NotFoundError struct {
	Kind string // "sandbox", "runtime", "organization", ...
	ID   string
	// Detail replaces the default sentence when set.
	Detail string
}

func (e *NotFoundError) Error() string {
	if e.Detail != "" {
		return e.Detail
	}
	return e.Kind + " \"" + e.ID + "\" was not found"
}

// NotFound is the error for an unknown object of kind with id.
func NotFound(kind, id string) error { return &NotFoundError{Kind: kind, ID: id} }

// ConflictError: the operation does not apply to the object's current
// state; Detail says why and what to do instead.
type ConflictError struct {
	// State is the object's current (public) state, when known.
	State  string
	Detail string
}

func (e *ConflictError) Error() string { return e.Detail }

// Conflict is a ConflictError with a detail and no known state.
func Conflict(detail string) error { return &ConflictError{Detail: detail} }

// ConflictIn is a ConflictError of an object that is in state.
func ConflictIn(state, detail string) error { return &ConflictError{State: state, Detail: detail} }

// Where an invalid field was sent.
const (
	InBody  = "body"
	InQuery = "query"
	InPath  = "path"
	// InHeader is a request header (e.g. Idempotency-Key).
	InHeader = "header"
)

// InvalidError: the input is refused; Field names the offending field as a
// dotted path ("resources.cpuCount", "env_vars.1X"), "" or "body" for the
// body as a whole.
type InvalidError struct {
	In    string // InBody (default), InQuery, InPath or InHeader
	Field string
	Msg   string
	// Path, when set, is Field part by part, for a location a dotted
	// path cannot spell: a list index (an int) or a map key with a dot in it.
	Path []any
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// Invalid refuses the body field with msg.
func Invalid(field, msg string) error { return &InvalidError{In: InBody, Field: field, Msg: msg} }

// RejectedError: a dependency (the compute provider) refused the request as
// invalid; no single field of ours is to blame.
type RejectedError struct{ Detail string }

func (e *RejectedError) Error() string { return e.Detail }

// QuotaExceededError: the organization's quota forbids the operation
// outright (e.g. max_running 0); retrying does not help.
type QuotaExceededError struct{ Detail string }

func (e *QuotaExceededError) Error() string { return e.Detail }

// InsufficientCreditsError: the organization has no credits left, so no new
// compute may start.
type InsufficientCreditsError struct{ Org string }

func (e *InsufficientCreditsError) Error() string {
	return fmt.Sprintf("organization %s has no credits left, so no new compute can start; ask an operator to grant credits (dreadnode-backend credits grant -org %s -amount N, or POST /admin/orgs/%s/credits)", e.Org, e.Org, e.Org)
}

// QueueFullError: the organization's admission queue is full; RetryAfter is
// when trying again makes sense.
type QueueFullError struct {
	Detail     string
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string { return e.Detail }

// UnavailableError: a dependency (the compute provider, a sandbox's agent)
// cannot answer now; retrying later may succeed.
type UnavailableError struct {
	Detail string
	// RetryAfter is when trying again makes sense (the answer's
	// Retry-After, in whole seconds rounded up). Zero means
	// DefaultUnavailableRetry: most of these failures are brief (a sandbox's
	// agent restarting, a network under churn).
	RetryAfter time.Duration
}

// DefaultUnavailableRetry is the Retry-After of an UnavailableError that
// sets none: soon, since most such failures pass within seconds, yet not
// at once, so a busy dependency is not hammered.
const DefaultUnavailableRetry = time.Second

func (e *UnavailableError) Error() string { return e.Detail }

// ProviderError: the compute provider failed or refused an operation in a
// way the caller cannot fix by changing the request.
type ProviderError struct{ Detail string }

func (e *ProviderError) Error() string { return e.Detail }

// StartFailedError: compute was asked for but never started; Detail says
// what the provider reported.
type StartFailedError struct{ Detail string }

func (e *StartFailedError) Error() string { return e.Detail }

// TimeoutError: an operation on compute did not finish in time.
type TimeoutError struct{ Detail string }

func (e *TimeoutError) Error() string { return e.Detail }
