package lifecycle

import (
	"crypto/hmac"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Host-based routing, as E2B's proxy does: a request whose Host is
// {port}-{sandboxID}[-{clientID}].{SandboxDomain} (or that form under any
// other domain, for a known sandbox id: foreignHost), or whose Host is
// localhost, an IP address or sandbox.{SandboxDomain} and which carries
// E2b-Sandbox-Id and E2b-Sandbox-Port, goes to that port of the sandbox
// (the same route, token check and dialing as /sandboxes/{id}/proxy/{port}).
// Each sandbox port is then an origin of its own, so a cookie one sets is
// never sent to another (the router also keeps sandboxes from setting
// cookies for a wider domain: hostOnlyCookies).

// The headers E2B's SDKs send when one URL (E2B_SANDBOX_URL) serves every
// sandbox, and the one carrying the traffic token of a sandbox whose
// traffic is not public.
const (
	sandboxIDHeader    = "E2b-Sandbox-Id"
	sandboxPortHeader  = "E2b-Sandbox-Port"
	trafficTokenHeader = "E2b-Traffic-Access-Token"
)

// routingHeaders address the router, not the sandbox: never forwarded.
var routingHeaders = []string{sandboxIDHeader, sandboxPortHeader}

// RegisterHostRouter adds the host-based router. Its routes match on the
// Host (or E2B's routing headers), before any path, so a sandbox's own
// /healthz or /metrics is the sandbox's: register it first.
func (s *Service) RegisterHostRouter(r *mux.Router) {
	r.MatcherFunc(func(req *http.Request, _ *mux.RouteMatch) bool {
		_, matched := s.hostTarget(req)
		return matched
	}).Name("{port}-{sandboxID}.{domain}").Handler(httpx.Handler(s.handleHostRoute))
}

// hostAddress is a sandbox port named by a request's Host or headers.
type hostAddress struct {
	id   string
	port int
	err  error // the request addresses a sandbox, but not well (a 400)
}

// hostTarget reads the sandbox port a request addresses; matched is false
// when it addresses the backend itself.
func (s *Service) hostTarget(r *http.Request) (hostAddress, bool) {
	host := hostOf(r.Host)
	domain := hostOf(s.cfg.SandboxDomain)
	if label, rest, ok := strings.Cut(host, "."); ok && rest == domain {
		// {port}-{sandboxID}[-{clientID}]; any other name under the
		// domain (sandbox.<domain>, www.<domain>) is not a sandbox's.
		p, rest, ok := strings.Cut(label, "-")
		port, err := strconv.Atoi(p)
		if ok && err == nil && rest != "" {
			id, _, _ := strings.Cut(rest, "-")
			if port < 1 || port > 65535 {
				return hostAddress{err: invalidHeader("Host", fmt.Sprintf("port %d is not a port (1..65535); address a sandbox as {port}-{sandboxID}.%s", port, domain))}, true
			}
			return hostAddress{id: id, port: port}, true
		}
	} else if a, ok := s.foreignHost(r, host); ok {
		return a, true
	}
	if host != "localhost" && host != "sandbox."+domain && net.ParseIP(host) == nil {
		return hostAddress{}, false
	}
	rawID, rawPort := r.Header.Get(sandboxIDHeader), r.Header.Get(sandboxPortHeader)
	if rawID == "" && rawPort == "" {
		return hostAddress{}, false
	}
	id, _, _ := strings.Cut(strings.TrimSpace(rawID), "-")
	if id == "" {
		return hostAddress{err: invalidHeader(sandboxIDHeader, "is required with "+sandboxPortHeader+": the sandbox's id")}, true
	}
	port, err := strconv.Atoi(strings.TrimSpace(rawPort))
	if err != nil || port < 1 || port > 65535 {
		return hostAddress{err: invalidHeader(sandboxPortHeader, fmt.Sprintf("must be a port (1..65535), got %q", rawPort))}, true
	}
	return hostAddress{id: id, port: port}, true
}

// foreignHost reads {port}-{sandboxID}[-{clientID}].{anything}: E2B's proxy
// routes that form whatever the domain (packages/shared/pkg/proxy/host.go),
// so a sandbox is reachable under a name other than SandboxDomain (another
// DNS name of this listener, a tunnel's). Outside SandboxDomain the host
// may be the backend's own, so it is a sandbox's only when its first label
// is a port (1..65535) and a known sandbox's id; any other host (localhost,
// an IP address, api.example.com) is the API's.
func (s *Service) foreignHost(r *http.Request, host string) (hostAddress, bool) {
	label, rest, ok := strings.Cut(host, ".")
	if !ok || rest == "" {
		return hostAddress{}, false
	}
	p, rest, ok := strings.Cut(label, "-")
	if !ok || rest == "" {
		return hostAddress{}, false
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port < 1 {
		return hostAddress{}, false
	}
	id, _, _ := strings.Cut(rest, "-")
	rec, err := s.db.GetRecord(r.Context(), id)
	if err != nil || !sandbox.AddressedAsSandbox(rec.Kind) {
		return hostAddress{}, false
	}
	return hostAddress{id: id, port: int(port)}, true
}

// invalidHeader is a 400 naming a request header.
func invalidHeader(name, msg string) error {
	return &httpx.Error{Code: http.StatusBadRequest, Type: "validation_error", Detail: name + ": " + msg,
		Errors: []httpx.FieldError{{Loc: []any{"header", name}, Msg: msg, Type: "value_error"}}}
}

// hostOf is the lower-case host of a Host value, without port or final dot.
func hostOf(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
}

// handleHostRoute serves a host-routed request. A sandbox that does not
// exist or has ended answers a JSON 502 naming it, as E2B's proxy does (its
// SDKs read a 502 as "the sandbox is gone"), with E2B's sandboxId and
// message beside this API's error envelope.
func (s *Service) handleHostRoute(w http.ResponseWriter, r *http.Request) error {
	a, _ := s.hostTarget(r)
	if a.err != nil {
		return a.err
	}
	rec, err := s.db.GetRecord(r.Context(), a.id)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && !sandbox.AddressedAsSandbox(rec.Kind)):
		return gone(w, r, a.id, fmt.Sprintf("sandbox %q was not found: no sandbox has this id (check the id in the host name %s or the %s header)",
			a.id, r.Host, sandboxIDHeader))
	case err != nil:
		return err
	case !rec.Phase.Live():
		return gone(w, r, a.id, fmt.Sprintf("sandbox %q is %s: no traffic reaches an ended sandbox; create another", a.id, rec.PublicState()))
	}
	if r.URL.Query().Has(tokenParam) {
		return browserLogin(w, r, rec)
	}
	if err := crossSandbox(r, rec.ID); err != nil {
		return err
	}
	return s.route(w, r, rec, a.port, r.URL.Path, r.URL.RawPath, true)
}

// A browser sends no header: it opens a sandbox port once with the token
// in the query, ?dreadnode_access_token=<token>; the router checks it and
// answers 303 to the same URL without it, setting the token as a cookie of
// that origin alone ({port}-{id}.{domain}: host-only, HttpOnly,
// SameSite=Lax). Later requests of the browser carry it. The cookie, named
// dreadnode*, is never forwarded into the sandbox, nor can the sandbox set
// one of that name (hostOnlyCookies); the path router, where every
// sandbox shares the backend's origin, neither sets nor reads it.
const (
	tokenParam    = "dreadnode_access_token"
	trafficCookie = "dreadnode_traffic_token"
)

func browserLogin(w http.ResponseWriter, r *http.Request, rec *store.Record) error {
	q := r.URL.Query()
	tok := q.Get(tokenParam)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return httpx.InvalidQuery(tokenParam, "is only read on GET (a browser link); send the token in X-Access-Token")
	}
	if !ids.Matches(tok, rec.AccessTokenHash) {
		return httpx.NewError(http.StatusForbidden, "invalid_access_token", "the "+tokenParam+" does not match this sandbox; connect returns a fresh token")
	}
	q.Del(tokenParam)
	u := *r.URL
	u.RawQuery = q.Encode()
	http.SetCookie(w, &http.Cookie{Name: trafficCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
	return nil
}

// gone answers (and logs) the 502 of a sandbox the router cannot reach
// (proxyerrors.go).
func gone(w http.ResponseWriter, r *http.Request, id, detail string) error {
	proxyError(w, r, "sandbox_not_found", id, msgSandboxNotFound, 0, detail, nil)
	return nil
}

// checkTraffic checks the sandbox's access token: X-Access-Token (this
// API's, and what E2B's SDKs send to envd) or E2b-Traffic-Access-Token
// (what E2B's clients send to a sandbox port), or, byHost, a browser's
// traffic cookie. On envd's port (envd) a sandbox created through /e2b
// follows E2B's envd: without secure it takes no token (envdOpen); with
// secure its envdAccessToken (envdTok, EnvdToken) counts beside the
// access token. A native sandbox takes its access token on every port.
func checkTraffic(r *http.Request, rec *store.Record, byHost, envd bool, envdTok string) error {
	if envd && envdOpen(rec) {
		return nil
	}
	tok := r.Header.Get("X-Access-Token")
	if tok == "" {
		tok = r.Header.Get(trafficTokenHeader)
	}
	if c, err := r.Cookie(trafficCookie); tok == "" && byHost && err == nil {
		tok = c.Value
	}
	if tok == "" {
		return httpx.NewError(http.StatusUnauthorized, "missing_access_token",
			"send the sandbox's accessToken (from create or connect; E2B's envdAccessToken or trafficAccessToken) in the X-Access-Token or "+
				trafficTokenHeader+" header; in a browser, open this URL once with ?"+tokenParam+"=TOKEN")
	}
	if envd && envdTok != "" && hmac.Equal([]byte(strings.TrimSpace(tok)), []byte(envdTok)) {
		return nil
	}
	if !ids.Matches(tok, rec.AccessTokenHash) {
		return httpx.NewError(http.StatusForbidden, "invalid_access_token", "the access token does not match this sandbox; connect returns a fresh token")
	}
	return nil
}

// envdPublic are the routes of envd's contract (../shared/e2b/envd.yaml,
// process.proto, filesystem.proto) a client may call through the router.
// Everything else is refused, named: envd.yaml's x-internal routes (/init
// sets the agent's token and environment; /freeze, /unfreeze, /fsfreeze,
// /fsthaw and /collapse stop or thaw the sandbox's processes and
// filesystem) belong to the orchestrator, which here is the backend: a
// pause is the state machine's decision, taken through the API with a key,
// never one a holder of the sandbox's token makes behind its back, and the
// agent's token is the backend's alone. Routes the contract does not name
// are refused too, so a route an agent adds later is internal until listed.
var envdPublic = map[string]bool{"/health": true, "/metrics": true, "/envs": true, "/files": true, "/files/compose": true}

var envdServices = []string{"/process.Process/", "/filesystem.Filesystem/"}

func envdRouteAllowed(p string) error {
	if envdPublic[p] {
		return nil
	}
	for _, prefix := range envdServices {
		if strings.HasPrefix(p, prefix) && len(p) > len(prefix) {
			return nil
		}
	}
	return httpx.NewError(http.StatusForbidden, "envd_route_refused", fmt.Sprintf(
		"%s on port %d is not one of envd's public routes (/health, /metrics, /envs, /files, /files/compose, %s*, %s*); the agent's internal routes are the backend's",
		p, compute.EnvdPort, envdServices[0], envdServices[1]))
}

// cleanPath is p cleaned ("/a/../b" is "/b"), absolute.
func cleanPath(p string) string {
	return path.Clean("/" + p)
}

// hostOnlyCookies drops the cookies a sandbox sets under the backend's
// names (dreadnode*) and removes the Domain attribute of every other: a cookie is then host-only, kept to the sandbox port that set it
// ({port}-{id}.{domain} is an origin of its own). With Domain, a sandbox
// could set a cookie for the parent domain, sent to every other sandbox
// (and to the backend's host): cookie tossing across sandboxes.
func hostOnlyCookies(h http.Header) {
	cookies := h.Values("Set-Cookie")
	if len(cookies) == 0 {
		return
	}
	out := make([]string, 0, len(cookies))
	for _, c := range cookies {
		if name, _, _ := strings.Cut(c, "="); strings.HasPrefix(strings.ToLower(strings.TrimSpace(name)), backendCookiePrefix) {
			continue // the backend's names (its traffic cookie): a sandbox sets none
		}
		parts := strings.Split(c, ";")
		kept := parts[:1] // name=value is never an attribute
		for _, attr := range parts[1:] {
			name, _, _ := strings.Cut(attr, "=")
			if strings.EqualFold(strings.TrimSpace(name), "domain") {
				continue
			}
			kept = append(kept, attr)
		}
		out = append(out, strings.Join(kept, ";"))
	}
	if len(out) == 0 {
		h.Del("Set-Cookie")
		return
	}
	h["Set-Cookie"] = out
}
