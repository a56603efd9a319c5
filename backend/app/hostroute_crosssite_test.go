package app

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/poll"
)

// postServer answers GET and POST with 200 and the method; a POST also
// tries to set a cookie for the parent domain given in ?d=.
const postServer = `import http.server
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        if n: self.rfile.read(n)
        b = method.encode()
        self.send_response(200)
        if "?d=" in self.path:
            self.send_header("Set-Cookie", "parent=1; Path=/; Domain=" + self.path.split("?d=", 1)[1])
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self): self.answer("GET")
    def do_POST(self): self.answer("POST")
http.server.ThreadingHTTPServer(("", 8080), H).serve_forever()
`

// TestHostRoutingRefusesCrossSandboxPosts: every {port}-{id}.{domain}
// host is one site, so a browser sends a sandbox's traffic cookie on a
// POST that another sandbox's page makes. The router refuses such a
// state-changing request (403 naming the origin) when Origin or
// Sec-Fetch-Site says another origin made it, and lets through the
// sandbox's own pages (any of its ports), safe methods and requests whose
// token is in a header; a sandbox's answer to a POST cannot set a cookie
// for the parent domain either.
func TestHostRoutingRefusesCrossSandboxPosts(t *testing.T) {
	t.Parallel()
	const domain = "sb.localhost"
	ta := newTestApp(t, func(c *Config) { c.SandboxDomain = domain })
	a, tokA := ta.create(map[string]any{"waitReady": true, "timeout": 300, "command": []string{"python3", "-c", postServer}})
	hostA := "8080-" + a + "." + domain
	jar, _ := cookiejar.New(nil)
	browser := hostClient(ta, jar)
	poll.Until(t, 60*time.Second, 100*time.Millisecond, func() error { // the server is starting
		if r := hostDo(t, browser, "GET", "http://"+hostA+"/?dreadnode_access_token="+tokA, ""); r.code != http.StatusOK {
			return fmt.Errorf("the browser's link: %s", r)
		}
		return nil
	})

	other := "http://8080-" + strings.Repeat("z", 20) + "." + domain
	for _, tc := range []struct {
		name   string
		method string
		hdr    []string
		want   int
	}{
		{"POST from another sandbox's page", "POST", []string{"Origin", other}, http.StatusForbidden},
		{"DELETE from another sandbox's page", "DELETE", []string{"Origin", other}, http.StatusForbidden},
		{"POST from an opaque origin", "POST", []string{"Origin", "null"}, http.StatusForbidden},
		{"POST said same-site, no Origin", "POST", []string{"Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"POST from the sandbox's own page", "POST", []string{"Origin", "http://" + hostA, "Sec-Fetch-Site", "same-origin"}, http.StatusOK},
		{"POST from another port of the same sandbox", "POST", []string{"Origin", "http://3000-" + a + "." + domain, "Sec-Fetch-Site", "same-site"}, http.StatusOK},
		{"POST the user typed (Sec-Fetch-Site: none)", "POST", []string{"Sec-Fetch-Site", "none"}, http.StatusOK},
		{"GET from another sandbox's page", "GET", []string{"Origin", other, "Sec-Fetch-Site", "same-site"}, http.StatusOK},
	} {
		r := hostDo(t, browser, tc.method, "http://"+hostA+"/act", "", tc.hdr...)
		if r.code != tc.want {
			t.Errorf("%s: want %d, got %s", tc.name, tc.want, r)
			continue
		}
		if tc.want == http.StatusForbidden && (!strings.Contains(string(r.body), "cross_origin_request") || !strings.Contains(string(r.body), a) ||
			!strings.Contains(string(r.body), "X-Access-Token")) {
			t.Errorf("%s: the 403 must name the sandbox and the way out (X-Access-Token), got %s", tc.name, r)
		}
		if tc.want == http.StatusOK && string(r.body) != tc.method {
			t.Errorf("%s: the sandbox answered %q, want %q", tc.name, r.body, tc.method)
		}
	}
	// The token in a header is no browser's ambient credential: it passes
	// whatever the Origin.
	if r := hostDo(t, hostClient(ta, nil), "POST", "http://"+hostA+"/act", "", "Origin", other, "X-Access-Token", tokA); r.code != http.StatusOK {
		t.Errorf("POST with the token in X-Access-Token from another origin: want 200, got %s", r)
	}

	// A POST's answer cannot set a cookie for the parent domain.
	r := hostDo(t, browser, "POST", "http://"+hostA+"/act?d="+domain, "", "Origin", "http://"+hostA)
	if r.code != http.StatusOK || len(r.hdr.Values("Set-Cookie")) != 1 || strings.Contains(strings.ToLower(r.hdr.Get("Set-Cookie")), "domain") {
		t.Errorf("a POST answered with a parent-domain cookie: want it host-only, got %d %q", r.code, r.hdr.Values("Set-Cookie"))
	}
}
