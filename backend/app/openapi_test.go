package app

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gorilla/mux"
)

// The served document is valid OpenAPI and documents every route the server
// registers (and nothing it does not serve).
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI: %v", err)
	}
	ta := newTestApp(t, nil)
	if r := ta.req("GET", "/openapi.json", nil); r.code != 200 || !strings.Contains(string(r.body), `"openapi":"3.0.3"`) {
		t.Fatalf("/openapi.json: %d", r.code)
	}
	regexVar := regexp.MustCompile(`\{(\w+):[^}]*\}`)
	served := map[string]bool{}
	err = ta.app.Handler.(*mux.Router).Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tmpl, err := route.GetPathTemplate()
		if err != nil {
			return nil // a subrouter without its own path
		}
		methods, err := route.GetMethods()
		tmpl = regexVar.ReplaceAllString(tmpl, "{$1}")
		if strings.HasSuffix(tmpl, "/proxy/{port}") { // a path prefix for every method
			tmpl, methods, err = tmpl+"/{path}", []string{http.MethodGet}, nil
		}
		if err != nil {
			return nil // a path prefix (e.g. /admin) holding other routes
		}
		for _, m := range methods {
			served[m+" "+tmpl] = true
			item := doc.Paths.Find(tmpl)
			if item == nil || item.GetOperation(m) == nil {
				t.Errorf("route %s %s is served but not documented in openapi.yaml", m, tmpl)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			if !served[m+" "+path] {
				t.Errorf("openapi.yaml documents %s %s, which the server does not serve", m, path)
			}
		}
	}
}
