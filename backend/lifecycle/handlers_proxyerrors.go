package lifecycle

import (
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"net/http"
	"regexp"

	"github.com/dreadnode/terraform-provider-dreadnode/apitypes"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
)

// The router's own 502s (no such sandbox, nothing on the port) are read by
// E2B's SDKs and by people in browsers, so they take E2B's proxy's shape
// (packages/shared/pkg/proxy/template at 54693ff): JSON with sandboxId,
// E2B's fixed message, port and code, as application/json; charset=utf-8,
// or a small HTML page when the client is a browser. This API's envelope
// (type, detail) rides along in the JSON, where the detail says what to do.

// E2B's messages, which its clients compare.
const (
	msgSandboxNotFound = "The sandbox was not found"
	msgPortClosed      = "The sandbox is running but port is not open"
)

// browserAgent is E2B's test of a browser (its isBrowser).
var browserAgent = regexp.MustCompile(`(?i)mozilla|chrome|safari|firefox|edge|opera|msie`)

// proxyErrorPage is the browser's page: the words E2B's pages carry (its
// clients and tests look for them), starting with <html and ending with
// </html>, as E2B's do.
var proxyErrorPage = htmltemplate.Must(htmltemplate.New("proxyError").Parse(
	`<html><head><meta charset="utf-8"><title>{{.Title}}</title></head>` +
		`<body><h1>{{.Title}}</h1><p>{{if .Port}}The sandbox <code>{{.SandboxID}}</code> is running but there is no service running on port {{.Port}}.` +
		`{{else}}The sandbox <code>{{.SandboxID}}</code> was not found.{{end}}</p><p>{{.Detail}}</p></body></html>`))

// proxyError writes (and logs) the router's 502 for sandbox id: E2B's
// message and fields, this API's envelope with detail, JSON or HTML.
func proxyError(w http.ResponseWriter, r *http.Request, typ, id, message string, port int, detail string, cause error) {
	httpx.LogServerError(r, http.StatusBadGateway, detail, cause) // written here, not by httpx.Handler
	body := struct {
		apitypes.Error
		SandboxID string `json:"sandboxId"`
		Message   string `json:"message"`
		Port      int    `json:"port,omitempty"`
	}{httpx.NewError(http.StatusBadGateway, typ, detail).Envelope(), id, message, port}
	if wantsHTML(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadGateway)
		title := "Sandbox Not Found"
		if port != 0 {
			title = "Closed Port Error"
		}
		_ = proxyErrorPage.Execute(w, struct {
			SandboxID, Title, Detail string
			Port                     int
		}{id, title, detail, port})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	_ = json.NewEncoder(w).Encode(body)
}

// internalRouteMessage is E2B's proxy's (packages/shared/pkg/proxy/template/internal_route.go).
const internalRouteMessage = "This endpoint is reserved for the E2B control plane and is not reachable through the sandbox URL"

// internalRoute answers E2B's 404 for an envd control-plane route: its
// message, path and code beside this API's envelope; the sandbox is not
// named, as E2B's is not.
func internalRoute(w http.ResponseWriter, path string) {
	httpx.WriteJSON(w, http.StatusNotFound, struct {
		apitypes.Error
		Message string `json:"message"`
		Path    string `json:"path"`
	}{httpx.NewError(http.StatusNotFound, "envd_route_internal", fmt.Sprintf("%s: %s", path, internalRouteMessage)).Envelope(),
		internalRouteMessage, path})
}
