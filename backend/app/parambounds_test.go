package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
)

// The query parameters' bounds the server enforces are the ones the served
// document declares: for each listed parameter the document's maximum is
// accepted and maximum+1 (and minimum-1) is refused with a 400 naming the
// parameter in the query. A bound written by hand in a handler that drifts
// from the document fails here (the handlers read apitypes' Param*
// constants, generated from the document by boundsgen).
func TestQueryParamBoundsFollowDocument(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(apitypes.OpenAPIYAML)
	if err != nil {
		t.Fatal(err)
	}
	ta := newTestApp(t, nil)
	cases := []struct {
		route, url, param string // route: the document's path; url: what is requested
	}{
		{"/sandboxes", "/sandboxes?", "limit"},
		{"/api/v1/org/{org}/sandboxes", "/api/v1/org/org1/sandboxes?", "limit"},
		{"/api/v1/org/{org}/ws/{workspace}/runtimes", "/api/v1/org/org1/ws/default/runtimes?", "limit"},
		{"/api/v1/org/{org}/ws/{workspace}/environments", "/api/v1/org/org1/ws/default/environments?", "limit"},
		{"/api/v1/org/{org}/ws/{workspace}/environments", "/api/v1/org/org1/ws/default/environments?", "page"},
		{"/events", "/events?", "limit"},
		{"/e2b/v2/sandboxes", "/e2b/v2/sandboxes?", "limit"},
		{"/e2b/events/sandboxes", "/e2b/events/sandboxes?", "limit"},
		{"/e2b/events/sandboxes", "/e2b/events/sandboxes?", "offset"},
	}
	for _, c := range cases {
		t.Run(c.url+c.param, func(t *testing.T) {
			s := paramSchema(t, doc, c.route, c.param)
			if s.Max == nil || s.Min == nil {
				t.Fatalf("%s %s: the document declares no minimum/maximum", c.route, c.param)
			}
			lo, hi := int(*s.Min), int(*s.Max)
			if r := ta.req("GET", fmt.Sprintf("%s%s=%d", c.url, c.param, hi), nil); r.code != http.StatusOK {
				t.Fatalf("%s=%d (the document's maximum): %d %s, want 200", c.param, hi, r.code, r.body)
			}
			if r := ta.req("GET", fmt.Sprintf("%s%s=%d", c.url, c.param, lo), nil); r.code != http.StatusOK {
				t.Fatalf("%s=%d (the document's minimum): %d %s, want 200", c.param, lo, r.code, r.body)
			}
			for _, bad := range []int{hi + 1, lo - 1} {
				r := ta.req("GET", fmt.Sprintf("%s%s=%d", c.url, c.param, bad), nil)
				// The native envelope names it in loc; E2B's (code,
				// message) starts the message with it.
				var env struct {
					Message string `json:"message"`
					Errors  []struct {
						Loc []any `json:"loc"`
					} `json:"errors"`
				}
				named := json.Unmarshal(r.body, &env) == nil &&
					(len(env.Errors) == 1 && slices.Equal(env.Errors[0].Loc, []any{"query", c.param}) ||
						strings.HasPrefix(c.route, "/e2b/") && strings.HasPrefix(env.Message, c.param+": "))
				if r.code != http.StatusBadRequest || !named {
					t.Fatalf("%s=%d (outside the document's %d..%d): %d %s, want 400 naming query parameter %s", c.param, bad, lo, hi, r.code, r.body, c.param)
				}
				if !strings.Contains(string(r.body), fmt.Sprint(hi)) {
					t.Fatalf("%s=%d: the message does not name the document's maximum %d: %s", c.param, bad, hi, r.body)
				}
			}
		})
	}
}

// paramSchema is the schema of GET route's query parameter name.
func paramSchema(t *testing.T, doc *openapi3.T, route, name string) *openapi3.Schema {
	t.Helper()
	item := doc.Paths.Value(route)
	if item == nil || item.Get == nil {
		t.Fatalf("the document has no GET %s", route)
	}
	for _, ps := range []openapi3.Parameters{item.Parameters, item.Get.Parameters} {
		if p := ps.GetByInAndName(openapi3.ParameterInQuery, name); p != nil && p.Schema != nil {
			return p.Schema.Value
		}
	}
	t.Fatalf("GET %s has no query parameter %s", route, name)
	return nil
}
