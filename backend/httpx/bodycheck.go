package httpx

import (
	"context"
	"net/http"
)

// BodyCheck checks a request body, already decoded strictly (well-formed
// JSON, known field names, right JSON types), against what the API
// document declares for it (bounds, lengths, counts, enums, patterns); the
// error is an *Error naming the field. The server installs one per route
// (WithBodyCheck) from the document, so a bound is declared once there and
// enforced from it.
type BodyCheck func(body []byte) error

type bodyCheckKey struct{}

// WithBodyCheck returns r whose Decode also runs check on the body.
func WithBodyCheck(r *http.Request, check BodyCheck) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), bodyCheckKey{}, check))
}

func bodyCheckOf(r *http.Request) BodyCheck {
	check, _ := r.Context().Value(bodyCheckKey{}).(BodyCheck)
	return check
}

// InvalidBodyAt is a 400 naming the body field at path (its keys and list
// indexes from the body's top, e.g. ["volumeMounts", "0", "path"]); unlike
// Invalid it keeps a key with a dot in it (a metadata key) one element.
func InvalidBodyAt(path []string, msg string) *Error {
	loc := make([]any, 0, len(path)+1)
	loc = append(loc, "body")
	for _, p := range path {
		loc = append(loc, p)
	}
	field := dotted(loc[1:])
	if field == "" {
		field = "body"
	}
	return &Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: field + ": " + msg,
		Errors: []FieldError{{Loc: loc, Msg: msg, Type: "value_error"}}}
}
