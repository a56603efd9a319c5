package app

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/envdsign"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/testutil/agentbin"
)

// TestE2BSignedFileURLs: a secure /e2b sandbox's envd takes GET and POST
// /files without a token when the URL is signed with its envdAccessToken,
// as E2B's envd does (E2B's TestDownloadFileWithSigningWhenAuthIsEnabled
// and the three beside it), and refuses a bad, expired or foreign
// signature with envd's own body; a native sandbox's router takes no
// signature (its contract: the access token on every request).
func TestE2BSignedFileURLs(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.AgentBinary = agentbin.Path(t) })
	r := ta.req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "timeout": 120, "secure": true})
	m := r.json(t)
	id, envdTok := fmt.Sprint(m["sandboxID"]), fmt.Sprint(m["envdAccessToken"])
	if r.code != http.StatusCreated || m["envdAccessToken"] == nil {
		t.Fatalf("POST /e2b/sandboxes secure: %d %s", r.code, r.body)
	}
	access := accessTokenOf(ta, id)
	c := hostClient(ta, nil)
	host := "49983-" + id + ".localhost"
	do := func(method string, q url.Values, body string, hdr ...string) hostAnswer {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, ta.srv.URL+"/files?"+q.Encode(), rd)
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return hostAnswer{code: res.StatusCode, hdr: res.Header, body: b}
	}
	const file = "signed.txt"
	signed := func(op, token string, exp *int64) url.Values {
		q := url.Values{"path": {file}, "username": {"user"}, "signature": {envdsign.Sign(file, op, "user", token, exp)}}
		if exp != nil {
			q.Set("signature_expiration", strconv.FormatInt(*exp, 10))
		}
		return q
	}
	if r := do("POST", signed(envdsign.Write, envdTok, nil), "Hello, World!"); r.code != http.StatusOK {
		t.Fatalf("signed upload: %s", r)
	}
	later := time.Now().Add(time.Minute).Unix()
	if r := do("GET", signed(envdsign.Read, envdTok, &later), ""); r.code != http.StatusOK || string(r.body) != "Hello, World!" {
		t.Fatalf("signed download: %s", r)
	}
	past := time.Now().Add(-3 * time.Hour).Unix()
	wrongExp := signed(envdsign.Read, envdTok, nil)
	wrongExp.Set("signature_expiration", strconv.FormatInt(past, 10))
	for _, c := range []struct {
		name string
		q    url.Values
		want string
	}{
		{"expired", signed(envdsign.Read, envdTok, &past), `{"code":401,"message":"signature is already expired"}`},
		{"an expiration it was not signed with", wrongExp, `{"code":401,"message":"invalid signature"}`},
		{"signed with the access token", signed(envdsign.Read, access, nil), `{"code":401,"message":"invalid signature"}`},
		{"a write signature", signed(envdsign.Write, envdTok, nil), `{"code":401,"message":"invalid signature"}`},
	} {
		if r := do("GET", c.q, ""); r.code != http.StatusUnauthorized || strings.TrimSpace(string(r.body)) != c.want {
			t.Errorf("download %s: %s, want 401 %s", c.name, r, c.want)
		}
	}
	// A download without a signature or a token stays refused.
	if r := do("GET", url.Values{"path": {file}, "username": {"user"}}, ""); r.code != http.StatusUnauthorized {
		t.Errorf("download without a token or signature: want 401, got %s", r)
	}

	// A native sandbox: a URL signed with its access token opens nothing.
	native, nativeTok := ta.create(map[string]any{"waitReady": true, "timeout": 120})
	host = "49983-" + native + ".localhost"
	if r := do("GET", url.Values{"path": {"/etc/hostname"}, "signature": {envdsign.Sign("/etc/hostname", envdsign.Read, "", nativeTok, nil)}}, ""); r.code != http.StatusUnauthorized ||
		strings.Contains(string(r.body), "signature") {
		t.Errorf("a signed download from a native sandbox: want the router's 401 (token required), got %s", r)
	}
}

// TestE2BLoopbackListenerReachable: a server an /e2b sandbox binds to
// 127.0.0.1 or ::1 only is reachable through the router, as on E2B (its
// envd re-exposes loopback listeners, and its sandboxes have ::1; E2B's
// TestBindLocalhost).
func TestE2BLoopbackListenerReachable(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.AgentBinary = agentbin.Path(t) })
	r := ta.req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "timeout": 120})
	m := r.json(t)
	id := fmt.Sprint(m["sandboxID"])
	if r.code != http.StatusCreated {
		t.Fatalf("POST /e2b/sandboxes: %d %s", r.code, r.body)
	}
	traffic := accessTokenOf(ta, id)
	c := hostClient(ta, nil)
	for port, bind := range map[string]string{"3210": "127.0.0.1", "3211": "::1"} {
		if r := ta.req("POST", "/sandboxes/"+id+"/processes", map[string]any{"cmd": []string{"python3", "-m", "http.server", port, "--bind", bind, "-d", "/etc"}},
			"X-Access-Token", traffic); r.code != http.StatusCreated {
			t.Fatalf("starting a server on %s port %s: %d %s", bind, port, r.code, r.body)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := hostDo(t, c, "GET", ta.srv.URL+"/hostname", port+"-"+id+".localhost", "E2b-Traffic-Access-Token", traffic)
			if r.code == http.StatusOK {
				break
			}
			if r.code != http.StatusBadGateway || time.Now().After(deadline) {
				t.Fatalf("a server on %s port %s of an E2B sandbox: want 200 once it listens, got %s", bind, port, r)
			}
			time.Sleep(100 * time.Millisecond) // poll interval within the deadline
		}
	}

	// A native sandbox's loopback stays its own: a server on 127.0.0.1:8080
	// (a port its template declares) answers inside, never through the
	// router, over three of the agent's scan periods.
	native, nativeTok := ta.create(map[string]any{"waitReady": true, "timeout": 120})
	if r := ta.req("POST", "/sandboxes/"+native+"/processes", map[string]any{"cmd": []string{"python3", "-m", "http.server", "8080", "--bind", "127.0.0.1", "-d", "/etc"}},
		"X-Access-Token", nativeTok); r.code != http.StatusCreated {
		t.Fatalf("starting a server in the native sandbox: %d %s", r.code, r.body)
	}
	probe := []string{"python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/hostname')"}
	for deadline := time.Now().Add(30 * time.Second); ; {
		r := ta.req("POST", "/sandboxes/"+native+"/exec", map[string]any{"cmd": probe}, "X-Access-Token", nativeTok)
		if r.code == http.StatusOK && r.json(t)["exitCode"] == float64(0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the native sandbox's server never answered inside: %d %s", r.code, r.body)
		}
		time.Sleep(100 * time.Millisecond) // poll interval within the deadline
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if r := hostDo(t, c, "GET", ta.srv.URL+"/hostname", "8080-"+native+".localhost", "X-Access-Token", nativeTok); r.code != http.StatusBadGateway {
			t.Fatalf("a native sandbox's loopback server through the router: want 502, got %s", r)
		}
	}
}

// TestE2BMaskRequestHost: an /e2b sandbox created with
// network.maskRequestHost gets that Host (${PORT} substituted) on its
// ports, and the Host asked for in X-Forwarded-Host, as E2B's proxy does
// (E2B's TestMaskRequestHostAPIParameter); GET shows the mask back.
func TestE2BMaskRequestHost(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.AgentBinary = agentbin.Path(t) })
	r := ta.req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "timeout": 120,
		"network": map[string]any{"maskRequestHost": "masked-host:${PORT}"}})
	m := r.json(t)
	id := fmt.Sprint(m["sandboxID"])
	if r.code != http.StatusCreated {
		t.Fatalf("POST /e2b/sandboxes with maskRequestHost: %d %s", r.code, r.body)
	}
	traffic := accessTokenOf(ta, id)
	if r := ta.req("GET", "/e2b/sandboxes/"+id, nil); !strings.Contains(string(r.body), `"maskRequestHost":"masked-host:${PORT}"`) {
		t.Errorf("GET /e2b/sandboxes/%s does not show the mask: %d %s", id, r.code, r.body)
	}
	server := `import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(s):
        b = (s.headers["Host"] + "|" + str(s.headers["X-Forwarded-Host"])).encode()
        s.send_response(200); s.end_headers(); s.wfile.write(b)
h.HTTPServer(("0.0.0.0", 8081), H).serve_forever()`
	if r := ta.req("POST", "/sandboxes/"+id+"/processes", map[string]any{"cmd": []string{"python3", "-c", server}},
		"X-Access-Token", traffic); r.code != http.StatusCreated {
		t.Fatalf("starting the server: %d %s", r.code, r.body)
	}
	c := hostClient(ta, nil)
	host := "8081-" + id + ".localhost"
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := hostDo(t, c, "GET", ta.srv.URL+"/", host, "E2b-Traffic-Access-Token", traffic)
		if r.code == http.StatusOK {
			if got, want := string(r.body), "masked-host:8081|"+host; got != want {
				t.Fatalf("the sandbox's server saw Host|X-Forwarded-Host %q, want %q", got, want)
			}
			break
		}
		if r.code != http.StatusBadGateway || time.Now().After(deadline) {
			t.Fatalf("port 8081: want 200 once the server listens, got %s", r)
		}
		time.Sleep(100 * time.Millisecond) // poll interval within the deadline
	}
}

// accessTokenOf is the access token of sandbox id, from the native API's
// connect (the key's holder drives its processes; an /e2b sandbox with
// public traffic is answered no trafficAccessToken).
func accessTokenOf(ta *testApp, id string) string {
	ta.t.Helper()
	r := ta.req("POST", "/sandboxes/"+id+"/connect", map[string]any{"timeout": 120})
	tok, ok := r.json(ta.t)["accessToken"].(string)
	if !ok || tok == "" {
		ta.t.Fatalf("connect of %s answered no accessToken: %d %s", id, r.code, r.body)
	}
	return tok
}

// A sandbox made through /e2b runs what names no user as "user" in
// /home/user, as E2B's base does (E2B's envd takes its template's default
// user), processes and files alike; a native sandbox keeps root, the
// native contract. Seen failing without the agent's default user (root in
// /root, the file owned by root).
func TestE2BSandboxDefaultUser(t *testing.T) {
	t.Parallel()
	ta := newTestApp(t, func(c *Config) { c.AgentBinary = agentbin.Path(t) })
	r := ta.req("POST", "/e2b/sandboxes", map[string]any{"templateID": "base", "timeout": 120})
	if r.code != http.StatusCreated {
		t.Fatalf("POST /e2b/sandboxes: %d %s", r.code, r.body)
	}
	e2bID := fmt.Sprint(r.json(t)["sandboxID"])
	e2bTok := accessTokenOf(ta, e2bID)
	native, nativeTok := ta.create(map[string]any{"waitReady": true, "timeout": 120})

	whoami := []string{"sh", "-c", "id -un; pwd; echo x > f; stat -c %U f"}
	for _, c := range []struct{ id, tok, want string }{
		{e2bID, e2bTok, "user\n/home/user\nuser\n"},
		{native, nativeTok, "root\n/root\nroot\n"},
	} {
		r := ta.req("POST", "/sandboxes/"+c.id+"/exec", map[string]any{"cmd": whoami}, "X-Access-Token", c.tok)
		if got := r.json(t); r.code != http.StatusOK || got["stdout"] != c.want {
			t.Errorf("sandbox %s: %d %v; want stdout %q", c.id, r.code, got, c.want)
		}
	}
	// A file written with no user names lands as the default user's.
	if r := ta.req("PUT", "/sandboxes/"+e2bID+"/files?path=/home/user/g", "data", "X-Access-Token", e2bTok); r.code/100 != 2 {
		t.Fatalf("writing a file: %d %s", r.code, r.body)
	}
	r = ta.req("POST", "/sandboxes/"+e2bID+"/exec", map[string]any{"cmd": []string{"stat", "-c", "%U", "/home/user/g"}}, "X-Access-Token", e2bTok)
	if got := r.json(t); got["stdout"] != "user\n" {
		t.Fatalf("a file written with no user belongs to %v; want user", got["stdout"])
	}
}
