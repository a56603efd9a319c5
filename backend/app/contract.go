package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// requestContract enforces the API document on the requests it describes:
// every route whose operation declares a JSON body gets that body's schema
// checked (httpx.WithBodyCheck) after the handler's strict decoding, so the
// bounds written once in the document (timeout, resources, env and metadata
// sizes, ...) are the server's. Routes are found by the gorilla/mux route
// that matched (its path template and method), a map lookup per request.
type requestContract struct {
	bodies map[string]*openapi3.Schema // "METHOD /path/{var}" -> the body's schema
	// served is the document as /openapi.json serves it: the one the checks
	// use, so a client reads the bounds this deployment enforces.
	served []byte
}

// newRequestContract reads the document. minTimeout is the deployment's
// lowest sandbox timeout (DREADNODE_MIN_TIMEOUT_SEC), which replaces the
// document's default minimum of every sandbox and task environment timeout
// field (the document states the default deployment's).
func newRequestContract(minTimeout int) (*requestContract, error) {
	doc, err := openapi3.NewLoader().LoadFromData(apitypes.OpenAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	c := &requestContract{bodies: map[string]*openapi3.Schema{}}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			mt := op.RequestBody.Value.Content.Get("application/json")
			if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
				continue
			}
			c.bodies[method+" "+path] = mt.Schema.Value
		}
	}
	lo := float64(minTimeout)
	for _, f := range []struct{ schema, prop string }{
		{"CreateSandbox", "timeout"}, {"SetSandboxTimeout", "timeout"}, {"ConnectSandbox", "timeout"},
		{"CreateTaskEnvironment", "timeout_sec"},
	} {
		s := doc.Components.Schemas[f.schema]
		if s == nil || s.Value == nil || s.Value.Properties[f.prop] == nil {
			return nil, fmt.Errorf("openapi: schema %s has no %s", f.schema, f.prop)
		}
		// A copy: the schema is shared with whatever else refers to it.
		t := *s.Value.Properties[f.prop].Value
		t.Min = &lo
		s.Value.Properties[f.prop] = openapi3.NewSchemaRef("", &t)
	}
	if c.served, err = doc.MarshalJSON(); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return c, nil
}

// routeVar is a mux path variable with its pattern ({id:[0-9]+}), which
// the document writes {id}.
var routeVar = regexp.MustCompile(`\{([^{}:]+):[^{}]*(\{[^{}]*\}[^{}]*)*\}`)

// middleware installs the body check of the matched route's operation.
func (c *requestContract) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			if route := mux.CurrentRoute(r); route != nil {
				if tpl, err := route.GetPathTemplate(); err == nil {
					if strings.Contains(tpl, ":") {
						tpl = routeVar.ReplaceAllString(tpl, "{$1}")
					}
					if s := c.bodies[r.Method+" "+tpl]; s != nil {
						r = httpx.WithBodyCheck(r, func(body []byte) error { return checkBody(s, body) })
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// checkBody validates body (JSON the handler decoded strictly) against s;
// the first violation is a 400 naming its field.
func checkBody(s *openapi3.Schema, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil // the handler's decoder has answered this already
	}
	err := s.VisitJSON(dropNulls(v), openapi3.VisitAsRequest())
	if err == nil {
		return nil
	}
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return httpx.Invalid("body", err.Error())
	}
	return httpx.InvalidBodyAt(se.JSONPointer(), schemaMsg(se))
}

// dropNulls removes object members whose value is null: the handlers'
// decoders read them as absent (Go's nil), and so does the contract.
func dropNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			x[k] = dropNulls(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropNulls(e)
		}
	}
	return v
}

// schemaMsg says what the value must be, in the words of the handlers'
// own checks ("must be between 1 and 16").
func schemaMsg(se *openapi3.SchemaError) string {
	s := se.Schema
	num := func(p *float64) string { return fmt.Sprintf("%g", *p) }
	switch se.SchemaField {
	case "minimum", "maximum":
		switch {
		case s.Min != nil && s.Max != nil:
			return fmt.Sprintf("must be between %s and %s", num(s.Min), num(s.Max))
		case s.Min != nil:
			return "must be at least " + num(s.Min)
		case s.Max != nil:
			return "must be at most " + num(s.Max)
		}
	case "required":
		return "is required"
	case "maxLength":
		return fmt.Sprintf("must be at most %d characters", *s.MaxLength)
	case "minLength":
		return fmt.Sprintf("must be at least %d characters", s.MinLength)
	case "maxItems":
		return fmt.Sprintf("must have at most %d items", *s.MaxItems)
	case "minItems":
		return fmt.Sprintf("must have at least %d items", s.MinItems)
	case "maxProperties":
		return fmt.Sprintf("at most %d entries", *s.MaxProps)
	case "enum":
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = fmt.Sprint(e)
		}
		return "must be one of " + strings.Join(vals, ", ")
	case "pattern":
		return "must match " + s.Pattern
	}
	return se.Reason
}
