package e2bfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// CheckRequest checks a request (whose body is body) against spec and
// returns the matched route (nil when none matched), the validation input
// for the response, and what it found wrong, one sentence each. The fake
// checks every request it receives with it; Checker, a client's requests.
func CheckRequest(spec *Spec, which string, r *http.Request, body []byte, auth openapi3filter.AuthenticationFunc) (*routers.Route, *openapi3filter.RequestValidationInput, []string) {
	route, params, err := spec.Router.FindRoute(r)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("%s: %s %s matches no operation: %v", which, r.Method, r.URL.Path, err)}
	}
	var problems []string
	in := &openapi3filter.RequestValidationInput{
		Request:    r,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: auth, MultiError: true},
	}
	if err := openapi3filter.ValidateRequest(r.Context(), in); err != nil {
		problems = append(problems, fmt.Sprintf("%s: request %s %s: %v", which, r.Method, r.URL.RequestURI(), err))
	}
	if rb := route.Operation.RequestBody; rb != nil && rb.Value != nil && len(body) > 0 {
		if mt := rb.Value.Content.Get("application/json"); mt != nil && isJSON(r.Header.Get("Content-Type")) {
			var v any
			if err := json.Unmarshal(body, &v); err == nil {
				for _, p := range strictFields(mt.Schema, v, "body") {
					problems = append(problems, fmt.Sprintf("%s: request %s %s: %s", which, r.Method, route.Path, p))
				}
			}
		}
	}
	return route, in, problems
}

func isJSON(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/json"
}

// CheckResponse checks an answer to the request of in; statuses the
// operation does not document are accepted only when allowed (E2B sends
// them in practice) and their body is an Error; note then says so.
func CheckResponse(spec *Spec, which string, in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte, allowed func(status int) bool) (problems []string, note string) {
	if in == nil {
		return nil, ""
	}
	op := in.Route.Operation
	at := fmt.Sprintf("%s %s", in.Route.Method, in.Route.Path)
	if op.Responses.Status(status) == nil && op.Responses.Default() == nil {
		if !allowed(status) {
			return []string{fmt.Sprintf("%s: %s answered %d, which the spec does not document for it", which, at, status)}, ""
		}
		es, err := errorSchema(spec.Doc)
		if err != nil {
			return []string{fmt.Sprintf("%s: %v", which, err)}, ""
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return []string{fmt.Sprintf("%s: %s answered %d with a non-JSON body", which, at, status)}, ""
		}
		if err := es.Value.VisitJSON(v); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %s answered %d with a body that is not an Error: %v", which, at, status, err))
		}
		return problems, fmt.Sprintf("%s answered %d (undocumented for this operation, sent by E2B in practice)", at, status)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(in.Request.Context(), out); err != nil {
		problems = append(problems, fmt.Sprintf("%s: response %d to %s: %v", which, status, at, err))
	}
	if isJSON(header.Get("Content-Type")) {
		if ref := op.Responses.Status(status); ref != nil && ref.Value != nil {
			if mt := ref.Value.Content.Get("application/json"); mt != nil {
				var v any
				if err := json.Unmarshal(body, &v); err == nil {
					for _, p := range strictFields(mt.Schema, v, "body") {
						problems = append(problems, fmt.Sprintf("%s: response %d to %s: %s", which, status, at, p))
					}
				}
			}
		}
	}
	return problems, ""
}

// Checker is an http.RoundTripper that checks every exchange a client has
// with an E2B-compatible server against openapi.yml, as the fake checks its
// own: so a test of another server's E2B API (the backend's /e2b) holds it
// to the same contract. Prefix is stripped from request paths before they
// are matched (the document's paths start at the API root).
type Checker struct {
	Base   http.RoundTripper
	Prefix string
	Spec   *Spec

	mu       sync.Mutex
	problems []string
}

// NewChecker loads openapi.yml and checks the exchanges through base.
func NewChecker(base http.RoundTripper, prefix string) (*Checker, error) {
	spec, err := LoadSpec("openapi.yml")
	if err != nil {
		return nil, err
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &Checker{Base: base, Prefix: prefix, Spec: spec}, nil
}

// RoundTrip sends r and checks it and its answer.
func (c *Checker) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		_ = r.Body.Close()
		r = withBody(r, body, "")
	}
	res, err := c.Base.RoundTrip(r)
	if err != nil {
		return res, err
	}
	answer, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(answer))
	path := r.URL.Path
	if len(path) >= len(c.Prefix) && path[:len(c.Prefix)] == c.Prefix {
		path = path[len(c.Prefix):]
	}
	route, in, problems := CheckRequest(c.Spec, "openapi.yml", withBody(r, body, path), body, APIAuth)
	key := ""
	if route != nil {
		key = route.Method + " " + route.Path
	}
	more, _ := CheckResponse(c.Spec, "openapi.yml", in, res.StatusCode, res.Header, answer, UndocumentedAPI(key))
	c.mu.Lock()
	c.problems = append(c.problems, append(problems, more...)...)
	c.mu.Unlock()
	return res, nil
}

// Problems returns what the checker found so far.
func (c *Checker) Problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.problems...)
}
