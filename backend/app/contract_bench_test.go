package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// What the document check costs a request: a create's body decoded (and
// checked) and a get (no body: the route lookup only), through a router
// with and without the contract middleware. Compare the pairs' ns/op.
func BenchmarkContract(b *testing.B) {
	c, err := newRequestContract(60)
	if err != nil {
		b.Fatal(err)
	}
	router := func(withContract bool) *mux.Router {
		r := mux.NewRouter()
		if withContract {
			r.Use(c.middleware)
		}
		r.Handle("/sandboxes", httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
			var body apitypes.CreateSandbox
			if err := httpx.Decode(r, &body, nil); err != nil {
				return err
			}
			w.WriteHeader(http.StatusCreated)
			return nil
		})).Methods(http.MethodPost)
		r.Handle("/sandboxes/{id}", httpx.Handler(func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(http.StatusOK)
			return nil
		})).Methods(http.MethodGet)
		return r
	}
	const body = `{"templateID": "base", "timeout": 600, "envVars": {"A": "1", "B": "2"}, "metadata": {"team": "red"},
		"resources": {"cpuCount": 2, "memoryMB": 1024}, "volumeMounts": [{"name": "work", "path": "/work"}],
		"network": {"allowOut": ["api.example.com"], "denyOut": ["0.0.0.0/0"]}, "command": ["sleep", "60"]}`
	for _, with := range []bool{false, true} {
		h := router(with)
		name := map[bool]string{false: "without", true: "with"}[with]
		b.Run("create/"+name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("POST", "/sandboxes", strings.NewReader(body)))
				if w.Code != http.StatusCreated {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
		b.Run("get/"+name, func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/sandboxes/abc", nil))
				if w.Code != http.StatusOK {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
