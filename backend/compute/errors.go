package compute

import (
	"errors"
	"fmt"
)

// Kind classifies a provider failure so the API can answer with the right
// status and the reconciler can write a diagnostic a user understands.
type Kind string

const (
	KindNotFound      Kind = "not_found"      // the instance (or file) does not exist
	KindConflict      Kind = "conflict"       // wrong state for the operation (e.g. pause of a paused one)
	KindImageMissing  Kind = "image_missing"  // the template's image is not available
	KindResourceLimit Kind = "resource_limit" // CPU/memory/quota limits refused the instance
	KindEntrypoint    Kind = "entrypoint"     // the main process could not start
	KindNetwork       Kind = "network_policy" // the network policy could not be applied
	KindUnavailable   Kind = "unavailable"    // provider unreachable, capacity exhausted, rate limited
	KindAuth          Kind = "auth"           // provider credentials refused
	KindInvalid       Kind = "invalid"        // the request was invalid for the provider
	KindTimeout       Kind = "timeout"        // the operation exceeded its deadline
	KindInternal      Kind = "internal"
)

// Error is the error type every provider returns.
type Error struct {
	Kind Kind
	Op   string // e.g. "create", "pause"
	Msg  string // a sentence for the user
	Err  error  // the underlying cause
}

func (e *Error) Error() string {
	s := e.Msg
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if e.Err != nil && e.Msg == "" {
		s += e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error.
func Errorf(kind Kind, op string, cause error, format string, args ...any) *Error {
	return &Error{Kind: kind, Op: op, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// KindOf returns the Kind of err, KindInternal when it is not an *Error.
func KindOf(err error) Kind {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	var be *TemplateBuildError
	if errors.As(err, &be) {
		return be.Kind
	}
	return KindInternal
}

// IsNotFound reports whether err means the instance does not exist.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

// AtCapacity reports whether the provider refused for want of room on its
// side (E2B's concurrency limit, its 429): nothing was made, and the create
// can wait in the admission queue and try again instead of failing.
func AtCapacity(err error) bool {
	var c interface{ AtCapacity() bool }
	return errors.As(err, &c) && c.AtCapacity()
}
