package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// MaxBody is the largest JSON body accepted (413 above it).
const MaxBody = 1 << 20

// Decode reads a JSON body into v, rejecting unknown fields, trailing data,
// bad JSON and oversized bodies with a 4xx *Error that names the problem. An
// empty body decodes as {}; anything else must be a JSON object (null too is
// refused). A body sent with a Content-Type other than JSON
// (application/json or any +json type) is 415, except none at all and curl
// -d's default application/x-www-form-urlencoded, both read as JSON because
// the documented curl examples and older clients send them. removed maps retired field names to the detail explaining their
// replacement.
func Decode(r *http.Request, v any, removed map[string]string) error {
	return decode(r, v, removed, true)
}

// DecodeLenient is Decode that ignores fields v does not declare, for an edge
// whose clients send fields this backend has no use for (E2B's SDKs under
// /e2b, as E2B's own server ignores them).
func DecodeLenient(r *http.Request, v any) error { return decode(r, v, nil, false) }

func decode(r *http.Request, v any, removed map[string]string, strict bool) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return NewError(http.StatusBadRequest, "invalid_body", "could not read the request body: "+err.Error())
	}
	if len(body) > MaxBody {
		return NewError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the request body exceeds %d bytes", MaxBody))
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		body = []byte("{}")
	} else if err := checkJSONType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	if body[0] != '{' {
		return Invalid("body", fmt.Sprintf("must be a JSON object (or empty), not %s", jsonKindOf(body)))
	}
	if len(removed) > 0 {
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) == nil {
			for name, detail := range removed {
				if _, ok := raw[name]; ok {
					return &Error{Code: 400, Type: "removed_field", Detail: name + ": " + detail,
						Errors: []FieldError{{Loc: []any{"body", name}, Msg: detail, Type: "removed_field"}}}
				}
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return NewError(http.StatusBadRequest, "invalid_json", "the request body holds more than one JSON value")
	}
	return nil
}

func decodeError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return NewError(400, "invalid_json", fmt.Sprintf("the request body is not valid JSON (at byte %d): %v", syn.Offset, syn))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		want := jsonType(typ.Type.Kind().String())
		if num, ok := strings.CutPrefix(typ.Value, "number "); ok && want == "a number" {
			// The JSON type is right; the value does not fit (1e30, 1.5 for a count).
			return Invalid(field, fmt.Sprintf("must be a whole number in the accepted range; %s is out of range or not whole", num))
		}
		return Invalid(field, fmt.Sprintf("must be %s, not a JSON %s", want, typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Code: 400, Type: "unknown_field", Detail: fmt.Sprintf("%s: unknown field; remove it (see /openapi.json for the accepted fields)", name),
			Errors: []FieldError{{Loc: []any{"body", name}, Msg: "unknown field", Type: "unknown_field"}}}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return NewError(400, "invalid_json", "the request body is truncated JSON")
	}
	return NewError(400, "invalid_json", "the request body could not be decoded: "+err.Error())
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	}
	return kind
}

// checkJSONType refuses a Content-Type that is not JSON with a 415. None,
// and curl -d's default form type, are read as JSON (see Decode).
func checkJSONType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-www-form-urlencoded") {
		return nil
	}
	return NewError(http.StatusUnsupportedMediaType, "unsupported_media_type",
		fmt.Sprintf("the request body must be JSON; send it with Content-Type: application/json (got %q)", ct))
}

// jsonKindOf names the JSON value a body starts with, for error messages.
func jsonKindOf(body []byte) string {
	switch c := body[0]; {
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 'n':
		return "null"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	return "valid JSON"
}
