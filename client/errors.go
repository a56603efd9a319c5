package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// FieldError is one entry of the error envelope's "errors" list: the
// document's FieldError, with Field to read its loc.
type FieldError apitypes.FieldError

// Field returns the request field the error is about: loc without its
// leading "body" (or "query"/"path"), each element as a string. Nil when loc
// does not name a field.
func (fe FieldError) Field() []string {
	if len(fe.Loc) < 2 {
		return nil
	}
	out := make([]string, 0, len(fe.Loc)-1)
	for _, l := range fe.Loc[1:] {
		switch v := l.(type) {
		case float64: // JSON numbers: list indexes
			out = append(out, fmt.Sprint(int64(v)))
		default:
			out = append(out, fmt.Sprint(v))
		}
	}
	return out
}

// APIError is a non-2xx answer of the API: the request, the status and
// the document's error envelope ({"code": <status>, "detail": "...",
// "type": "...", "errors": [...] | null}).
type APIError struct {
	Method     string
	Path       string
	StatusCode int
	// Envelope is the answer's body; zero when it was not an envelope.
	Envelope apitypes.Error
	// Body is the raw body when it was not an error envelope.
	Body string
}

func newAPIError(method, path string, status int, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, StatusCode: status}
	if err := json.Unmarshal(body, &e.Envelope); err != nil || (e.Envelope.Detail == "" && e.Envelope.Type == "") {
		e.Envelope = apitypes.Error{}
		e.Body = strings.TrimSpace(string(body))
		if len(e.Body) > 2048 {
			e.Body = e.Body[:2048] + "…"
		}
	}
	return e
}

// Error renders the server's detail, type and field errors.
func (e *APIError) Error() string {
	env := &e.Envelope
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: HTTP %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	switch {
	case env.Detail != "":
		b.WriteString(": ")
		b.WriteString(env.Detail)
		if env.Type != "" {
			fmt.Fprintf(&b, " (%s)", env.Type)
		}
	case env.Type != "":
		fmt.Fprintf(&b, ": %s", env.Type)
	case e.Body != "":
		b.WriteString(": ")
		b.WriteString(e.Body)
	}
	for _, fe := range env.Errors {
		b.WriteString("\n  - ")
		if len(fe.Loc) > 0 {
			parts := make([]string, len(fe.Loc))
			for i, l := range fe.Loc {
				parts[i] = fmt.Sprint(l)
			}
			b.WriteString(strings.Join(parts, "."))
			b.WriteString(": ")
		}
		b.WriteString(fe.Msg)
	}
	return b.String()
}

// StatusOf returns the HTTP status of an *APIError in err's chain, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.StatusCode
	}
	return 0
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// IsConflict reports whether err is a 409 answer.
func IsConflict(err error) bool { return StatusOf(err) == http.StatusConflict }
