package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gorilla/mux"
)

// Each route lands in the class its limit is meant for.
func TestRouteClass(t *testing.T) {
	for _, c := range []struct{ method, tmpl, path, want string }{
		{"POST", "/sandboxes", "/sandboxes", ClassCreate},
		{"POST", "/api/v1/org/{org}/ws/{workspace}/environments", "/api/v1/org/o/ws/w/environments", ClassCreate},
		{"POST", "/api/v1/org/{org}/keys", "/api/v1/org/o/keys", ClassCreate},
		{"POST", "/sandboxes/{id}/pause", "/sandboxes/x/pause", ClassWrite},
		{"DELETE", "/sandboxes/{id}", "/sandboxes/x", ClassWrite},
		{"GET", "/sandboxes/{id}", "/sandboxes/x", ClassRead},
		{"POST", "/sandboxes/{id}/exec", "/sandboxes/x/exec", ClassExec},
		{"GET", "/sandboxes/{id}/files", "/sandboxes/x/files", ClassExec},
		{"PUT", "/sandboxes/{id}/files", "/sandboxes/x/files", ClassExec},
		{"POST", "/sandboxes/{id}/processes/{pid}/stdin", "/sandboxes/x/processes/1/stdin", ClassExec},
		{"POST", "/api/v1/org/{org}/ws/{workspace}/environments/{id}/execute", "/api/v1/org/o/ws/w/environments/e/execute", ClassExec},
	} {
		var got string
		r := mux.NewRouter()
		r.HandleFunc(c.tmpl, func(_ http.ResponseWriter, r *http.Request) { got = routeClass(r) }).Methods(c.method)
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		if got != c.want {
			t.Errorf("%s %s: class %q, want %q", c.method, c.tmpl, got, c.want)
		}
	}
}

// Refused keys are counted per IPv4 address and per IPv6 /64: a client
// with a /64 cannot take a fresh bucket per guess. (Seen failing with the
// whole IPv6 address as the bucket: four buckets for one /64.)
func TestClientAddrBucketsIPv6Per64(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:1234":                "192.0.2.7",
		"[::ffff:192.0.2.7]:1234":       "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:1234":   "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff::1]:9": "2001:db8:1:2::/64",
		"[2001:db8:1:2::1%eth0]:9":      "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:9":           "2001:db8:1:3::/64",
		"[::1]:80":                      "::/64",
		"not-an-address":                "not-an-address",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if got := clientAddr(r); got != want {
			t.Errorf("clientAddr(%q) = %q, want %q", remote, got, want)
		}
	}
}
