package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	if strict {
		// encoding/json matches keys to fields case-insensitively, so
		// {"timeoutMS": 1} would fill timeoutMs; the contract names fields
		// exactly, so such a key is refused like any unknown one.
		if loc, want := misCased(body, reflect.TypeOf(v), nil); loc != nil {
			msg := fmt.Sprintf("unknown field; field names are case-sensitive: did you mean %q?", want)
			return &Error{Code: 400, Type: "unknown_field", Detail: dotted(loc) + ": " + msg,
				Errors: []FieldError{{Loc: append([]any{"body"}, loc...), Msg: msg, Type: "unknown_field"}}}
		}
		// The document's bounds, after the decoder's checks so that
		// malformed JSON, unknown fields and wrong types keep their own,
		// more precise answers.
		if check := bodyCheckOf(r); check != nil {
			return check(body)
		}
	}
	return nil
}

// misCased returns where in body (a JSON value decoded into a t) a key names
// a field of t only case-insensitively, and the field's exact name; nil when
// every key is spelled exactly. Types that decode themselves (json.Unmarshaler:
// time.Time, json.RawMessage, ...) and interfaces are not looked into.
func misCased(body []byte, t reflect.Type, at []any) ([]any, string) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil, ""
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return nil, ""
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(obj) {
			if ft, ok := fields[k]; ok {
				if loc, want := misCased(obj[k], ft, append(slices.Clip(at), k)); loc != nil {
					return loc, want
				}
				continue
			}
			for name := range fields {
				if strings.EqualFold(name, k) {
					return append(slices.Clip(at), k), name
				}
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			return nil, ""
		}
		for _, k := range sortedKeys(obj) {
			if loc, want := misCased(obj[k], t.Elem(), append(slices.Clip(at), k)); loc != nil {
				return loc, want
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil, ""
		}
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) != nil {
			return nil, ""
		}
		for i, e := range arr {
			if loc, want := misCased(e, t.Elem(), append(slices.Clip(at), strconv.Itoa(i))); loc != nil {
				return loc, want
			}
		}
	}
	return nil, ""
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	fieldCache      sync.Map // reflect.Type -> map[string]reflect.Type
)

// jsonFields maps the JSON names of struct t's fields (as encoding/json
// names them, embedded structs' fields promoted) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(t, m)
	fieldCache.Store(t, m)
	return m
}

func addFields(t reflect.Type, m map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(ft, m)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func dotted(loc []any) string {
	parts := make([]string, len(loc))
	for i, p := range loc {
		parts[i] = fmt.Sprint(p)
	}
	return strings.Join(parts, ".")
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
