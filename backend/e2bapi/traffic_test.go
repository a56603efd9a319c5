package e2bapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/e2bapi/internal/e2bclient"
)

// sandboxAnswer is what create answered, as E2B's Sandbox.
type sandboxAnswer struct {
	SandboxID          string  `json:"sandboxID"`
	EnvdAccessToken    *string `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
}

func (e *edge) create(body map[string]any) sandboxAnswer {
	e.t.Helper()
	r := e.env.Req("POST", "/e2b/sandboxes", body)
	var sb sandboxAnswer
	if r.Code != 201 || json.Unmarshal(r.Body, &sb) != nil || sb.SandboxID == "" {
		e.t.Fatalf("POST /e2b/sandboxes %v: %s", body, r)
	}
	return sb
}

type portAnswer struct {
	code int
	ct   string
	body string
}

func (a portAnswer) String() string { return fmt.Sprintf("%d %s %s", a.code, a.ct, a.body) }

// port requests GET / on port of sandbox id through the traffic router, by
// host as E2B's clients do ({port}-{id}.localhost), with the headers hdr
// (name, value pairs).
func (e *edge) port(id string, port int, hdr ...string) portAnswer {
	e.t.Helper()
	return e.hostGet(id, port, "/", hdr...)
}

// hostGet is port's request for path.
func (e *edge) hostGet(id string, port int, path string, hdr ...string) portAnswer {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.env.Srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = fmt.Sprintf("%d-%s.localhost", port, id)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return portAnswer{code: res.StatusCode, ct: res.Header.Get("Content-Type"), body: string(b)}
}

// refusal asserts a is E2B's proxy's JSON 403 for sandbox id with message.
func refusal(t *testing.T, what string, a portAnswer, id, message string) {
	t.Helper()
	var m struct {
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Code      int    `json:"code"`
	}
	if a.code != 403 || a.ct != "application/json; charset=utf-8" || json.Unmarshal([]byte(a.body), &m) != nil ||
		m.SandboxID != id || m.Message != message || m.Code != 403 {
		t.Errorf("%s: want E2B's JSON 403 %q for %s, got %s", what, message, id, a)
	}
}

const browserUA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"

// The README's row "a sandbox port other than envd's": a sandbox created
// through /e2b with allowPublicTraffic false answers trafficAccessToken and
// takes it on its ports, refusing with E2B's 403s (JSON, or a page for a
// browser, as E2B's TestSandboxWithEnabledTrafficAccessToken* read them);
// one with public traffic answers none and takes none; a native sandbox
// keeps the access token on every port (401 without it).
// Seen failing without the protection (the router's check skipped): the
// private sandbox's port 8080 without a token answered 502 (closed port),
// not 403.
func TestE2BTrafficToken(t *testing.T) {
	e := newEdge(t)
	private := e.create(map[string]any{"templateID": "base", "timeout": 120, "secure": true,
		"network": map[string]any{"allowPublicTraffic": false}})
	public := e.create(map[string]any{"templateID": "base", "timeout": 120, "secure": true})
	if private.TrafficAccessToken == nil || *private.TrafficAccessToken == "" || private.EnvdAccessToken == nil {
		t.Fatalf("a sandbox without public traffic: want a trafficAccessToken and an envdAccessToken, got %+v", private)
	}
	if public.TrafficAccessToken != nil {
		t.Errorf("a sandbox with public traffic answered trafficAccessToken %q; E2B answers none", *public.TrafficAccessToken)
	}
	id, tok := private.SandboxID, *private.TrafficAccessToken

	refusal(t, "no token", e.port(id, 8080), id, "Sandbox is secured with traffic access token. Token header 'e2b-traffic-access-token' is missing")
	refusal(t, "a wrong token", e.port(id, 8080, "E2b-Traffic-Access-Token", "abcd"), id,
		"Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid")
	refusal(t, "the envd token as traffic token", e.port(id, 8080, "E2b-Traffic-Access-Token", *private.EnvdAccessToken), id,
		"Sandbox is secured with traffic access token. Provided token in header 'e2b-traffic-access-token' is invalid")
	for _, c := range []struct{ title, hdr, val string }{{"Missing Traffic Access Token", "", ""}, {"Invalid Traffic Access Token", "E2b-Traffic-Access-Token", "abcd"}} {
		a := e.port(id, 8080, "User-Agent", browserUA, c.hdr, c.val)
		if a.code != 403 || a.ct != "text/html; charset=utf-8" || !strings.HasPrefix(a.body, "<html") || !strings.HasSuffix(a.body, "</html>") ||
			!strings.Contains(a.body, c.title) || !strings.Contains(a.body, id) {
			t.Errorf("a browser, %s: want E2B's HTML 403, got %s", c.title, a)
		}
	}
	// A script's request (Sec-Fetch-Mode cors) gets JSON, as from E2B's proxy.
	if a := e.port(id, 8080, "User-Agent", browserUA, "Sec-Fetch-Mode", "cors"); a.code != 403 || a.ct != "application/json; charset=utf-8" {
		t.Errorf("a browser's script without a token: want the JSON 403, got %s", a)
	}
	closed := "The sandbox is running but port is not open"
	for _, hdr := range []string{"E2b-Traffic-Access-Token", "X-Access-Token"} {
		if a := e.port(id, 8080, hdr, tok); a.code != 502 || !strings.Contains(a.body, closed) {
			t.Errorf("the traffic token in %s: want the 502 of a closed port, got %s", hdr, a)
		}
	}
	// Public traffic: no token, and nothing refused before the port.
	if a := e.port(public.SandboxID, 8080); a.code != 502 || !strings.Contains(a.body, closed) {
		t.Errorf("port 8080 of a sandbox with public traffic, no token: want the 502 of a closed port, got %s", a)
	}
	// The native contract is unchanged: a token on every router request.
	r := e.env.Req("POST", "/sandboxes", map[string]any{"waitReady": true, "timeout": 120})
	var native struct {
		ID string `json:"sandboxID"`
	}
	if r.Code != 201 || json.Unmarshal(r.Body, &native) != nil || native.ID == "" {
		t.Fatalf("native create: %s", r)
	}
	if a := e.port(native.ID, 8080); a.code != 401 {
		t.Errorf("a native sandbox's port without a token: want 401, got %s", a)
	}
}

// A private sandbox's trafficAccessToken is the same in create's, connect's
// and resume's answers, and create's still opens its ports after them, as
// on E2B: a second client connecting does not lock the first out. (E2B's
// tests use create's token after pauses and resumes and never connect's.)
// Seen failing with the token rotated on connect: "connect answered
// trafficAccessToken sbx_at_… , create's was sbx_at_…" and create's token
// answered 403 invalid_access_token after the connect.
func TestE2BTrafficTokenStable(t *testing.T) {
	e := newEdge(t)
	sb := e.create(map[string]any{"templateID": "base", "timeout": 120, "secure": true,
		"network": map[string]any{"allowPublicTraffic": false}})
	if sb.TrafficAccessToken == nil {
		t.Fatalf("create answered no trafficAccessToken: %+v", sb)
	}
	id, tok := sb.SandboxID, *sb.TrafficAccessToken
	for i := 0; i < 2; i++ {
		res, err := e.c.PostSandboxesSandboxIDConnectWithResponse(e.ctx, id, e2bclient.ConnectSandbox{Timeout: 300})
		if err != nil {
			t.Fatal(err)
		}
		e.status("POST /connect", res.HTTPResponse, res.Body, 200)
		if got := res.JSON200.TrafficAccessToken; got == nil || *got != tok {
			t.Errorf("connect %d answered %s; create's trafficAccessToken was %s", i+1, res.Body, tok)
		}
	}
	closed := "The sandbox is running but port is not open"
	if a := e.port(id, 8080, "E2b-Traffic-Access-Token", tok); a.code != 502 || !strings.Contains(a.body, closed) {
		t.Errorf("create's traffic token after two connects: want the 502 of a closed port, got %s", a)
	}
}
