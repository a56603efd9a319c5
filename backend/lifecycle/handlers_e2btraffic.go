package lifecycle

import (
	"crypto/hmac"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"net/http"
	"strings"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// A sandbox created through /e2b (store.Spec.E2BSecure set) keeps E2B's
// traffic contract at the router (E2B's orchestrator proxy, client proxy
// and proxy_grpc.go at 54693ff), where the native API's is stricter:
//   - a port other than envd's takes a token only when the sandbox was
//     created with network.allowPublicTraffic false; then its traffic
//     token (the access token) in E2b-Traffic-Access-Token (or this API's
//     X-Access-Token, or the browser's cookie by host), and a refusal is
//     E2B's 403 ("Sandbox is secured with traffic access token. ...");
//   - envd's port keeps envd's rules (checkTraffic: open without secure);
//   - a paused sandbox with autoResume that a request may not resume (a
//     missing or wrong token where one is needed) answers E2B's 403
//     "can't be resumed with the credentials provided", and stays paused.
// A native sandbox (E2BSecure nil) takes its access token on every port.

// e2bTrafficHeader is how E2B's messages name the traffic token's header.
const e2bTrafficHeader = "e2b-traffic-access-token"

// E2B's words, which its clients and tests compare.
const (
	msgTrafficMissing = "Sandbox is secured with traffic access token. Token header '%s' is missing"
	msgTrafficInvalid = "Sandbox is secured with traffic access token. Provided token in header '%s' is invalid"
	msgResumeDenied   = "This sandbox can't be resumed with the credentials provided. Check your access token and try again."
)

// PrivateTraffic: created with network.allowPublicTraffic false, so a
// sandbox created through /e2b takes its traffic token on its ports (and
// the E2B edge answers trafficAccessToken).
func PrivateTraffic(rec *store.Record) bool {
	p := rec.Spec.Network.AllowPublicTraffic
	return p != nil && !*p
}

// checkE2BTraffic applies E2B's contract to a sandbox created through
// /e2b; written is true when it answered the refusal itself (E2B's 403
// bodies), err is a refusal of this API's (envd's own 401/403).
func checkE2BTraffic(w http.ResponseWriter, r *http.Request, rec *store.Record, byHost, envd bool, envdTok, trafficTok string) (written bool, err error) {
	resumable := rec.AutoResume && (rec.Phase == sandbox.PhasePaused || rec.Phase == sandbox.PhasePausing)
	if envd {
		err := checkTraffic(r, rec, byHost, envd, envdTok)
		if err != nil && resumable {
			e2bRefusal(w, r, rec.ID, "Resume Permission Denied", msgResumeDenied, "resume_denied", err.Error())
			return true, nil
		}
		return false, err
	}
	if !PrivateTraffic(rec) {
		return false, nil
	}
	header, tok := e2bTrafficHeader, r.Header.Get(trafficTokenHeader)
	if tok == "" {
		if tok = r.Header.Get("X-Access-Token"); tok != "" {
			header = "x-access-token"
		}
	}
	if c, err := r.Cookie(trafficCookie); tok == "" && byHost && err == nil {
		header, tok = trafficCookie+" cookie", c.Value
	}
	tok = strings.TrimSpace(tok)
	var title, msg, typ string
	switch {
	case tok == "":
		title, msg, typ = "Missing Traffic Access Token", fmt.Sprintf(msgTrafficMissing, e2bTrafficHeader), "missing_access_token"
	case !ids.Matches(tok, rec.AccessTokenHash) && (trafficTok == "" || !hmac.Equal([]byte(tok), []byte(trafficTok))):
		title, msg, typ = "Invalid Traffic Access Token", fmt.Sprintf(msgTrafficInvalid, header), "invalid_access_token"
	default:
		return false, nil
	}
	detail := msg + "; send the trafficAccessToken create answered (connect and resume answer the same one) in the " + trafficTokenHeader + " header"
	if resumable {
		title, msg, typ = "Resume Permission Denied", msgResumeDenied, "resume_denied"
	}
	e2bRefusal(w, r, rec.ID, title, msg, typ, detail)
	return true, nil
}

// e2bRefusalPage is the browser's page for a 403: E2B's title (which its
// tests look for) and the sandbox's id, starting with <html and ending
// with </html> as E2B's pages do.
var e2bRefusalPage = htmltemplate.Must(htmltemplate.New("e2bRefusal").Parse(
	`<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>` +
		`<body><h1>{{.Title}}</h1><p>The sandbox <code>{{.SandboxID}}</code>: {{.Message}}</p><p>{{.Detail}}</p></body></html>`))

// e2bRefusal writes E2B's proxy's 403 for sandbox id: JSON with its
// sandboxId, message and code beside this API's envelope, or a page for a
// browser (wantsHTML).
func e2bRefusal(w http.ResponseWriter, r *http.Request, id, title, message, typ, detail string) {
	if wantsHTML(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		_ = e2bRefusalPage.Execute(w, struct{ SandboxID, Title, Message, Detail string }{id, title, message, detail})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(struct {
		apitypes.Error
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
	}{httpx.NewError(http.StatusForbidden, typ, detail).Envelope(), id, message})
}

// wantsHTML is E2B's choice of a page over JSON (its template.go): a
// browser's User-Agent, unless the request asks for JSON or a script made
// it (Sec-Fetch-Mode other than navigate, or X-Requested-With).
func wantsHTML(r *http.Request) bool {
	accept := strings.ToLower(r.Header.Get("Accept"))
	if strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html") {
		return false
	}
	switch strings.ToLower(r.Header.Get("Sec-Fetch-Mode")) {
	case "cors", "no-cors", "same-origin", "websocket":
		return false
	case "navigate":
	default:
		if r.Header.Get("X-Requested-With") != "" {
			return false
		}
	}
	return browserAgent.MatchString(r.UserAgent())
}
