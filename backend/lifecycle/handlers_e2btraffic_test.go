package lifecycle

import (
	"net/http/httptest"
	"testing"
)

// The router answers a browser's navigation with a page and everything
// else with JSON, as E2B's proxy decides (its template.go wantsHtml): a
// script's fetch carries the browser's User-Agent but says what it is.
func TestWantsHTML(t *testing.T) {
	const ua = "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0"
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"a browser", map[string]string{"User-Agent": ua}, true},
		{"a navigation", map[string]string{"User-Agent": ua, "Sec-Fetch-Mode": "navigate", "X-Requested-With": "x"}, true},
		{"an SDK", map[string]string{"User-Agent": "e2b-go-sdk/1.0"}, false},
		{"no User-Agent", nil, false},
		{"a fetch asking for JSON", map[string]string{"User-Agent": ua, "Accept": "application/json"}, false},
		{"Accept naming both", map[string]string{"User-Agent": ua, "Accept": "text/html, application/json"}, true},
		{"a script's fetch", map[string]string{"User-Agent": ua, "Sec-Fetch-Mode": "cors"}, false},
		{"a websocket", map[string]string{"User-Agent": ua, "Sec-Fetch-Mode": "websocket"}, false},
		{"an old XHR", map[string]string{"User-Agent": ua, "X-Requested-With": "XMLHttpRequest"}, false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		if got := wantsHTML(r); got != c.want {
			t.Errorf("%s: wantsHTML = %v, want %v", c.name, got, c.want)
		}
	}
}
