package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// RegisterRouter adds the traffic router. It authenticates with the
// sandbox's access token alone (a browser or agent reaching a preview URL has
// no API key), so it must be registered outside the API-key middleware.
func (s *Service) RegisterRouter(r *mux.Router) {
	r.PathPrefix("/sandboxes/{id}/proxy/{port:[0-9]+}").Handler(httpx.Handler(s.handleProxy))
}

func (s *Service) handleProxy(w http.ResponseWriter, r *http.Request) error {
	vars := mux.Vars(r)
	id := vars["id"]
	// No API key here: the access token, checked next, is the credential.
	rec, err := s.find(r, func(ctx context.Context, _, id string) (*store.Record, error) { return s.db.GetRecord(ctx, id) })
	if err != nil {
		return err
	}
	if err := checkAccess(r, rec); err != nil {
		return err
	}
	port, _ := strconv.Atoi(vars["port"])
	if rec.Phase == sandbox.PhasePaused || rec.Phase == sandbox.PhasePausing {
		if !rec.AutoResume {
			return httpx.Conflict(fmt.Sprintf("sandbox %s is paused and autoResume is off; POST /sandboxes/%s/connect to resume it", id, id))
		}
		if rec, _, err = s.Resume(r.Context(), rec); err != nil {
			return err
		}
	}
	if rec.Phase.Starting() {
		if rec, err = s.WaitStarted(r.Context(), id); err != nil {
			return err
		}
	}
	if rec.Phase != sandbox.PhaseRunning {
		return httpx.Conflict(fmt.Sprintf("sandbox %s is %s; no traffic can reach it", id, rec.Phase.PublicState()))
	}
	ep, ok := rec.Endpoints[port]
	if !ok {
		ports := make([]string, 0, len(rec.Endpoints))
		for p := range rec.Endpoints {
			ports = append(ports, strconv.Itoa(p))
		}
		return httpx.NewError(http.StatusNotFound, "port_not_exposed",
			fmt.Sprintf("port %d of sandbox %s is not exposed; its template exposes [%s]", port, id, strings.Join(ports, ", ")))
	}
	target, err := url.Parse(ep.URL)
	if err != nil || ep.URL == "" {
		target = &url.URL{Scheme: "http", Host: ep.Host + ":" + strconv.Itoa(ep.Port)}
	}
	prefix := "/sandboxes/" + id + "/proxy/" + vars["port"]
	strip := s.credentialStripper(r, rec)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = "/" + strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
			pr.Out.URL.RawPath = ""
			strip(pr.Out.Header)
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			httpx.WriteErr(w, httpx.NewError(http.StatusBadGateway, "upstream_unreachable",
				fmt.Sprintf("nothing answered on port %d of sandbox %s: %v", port, id, err)))
		},
	}
	proxy.ServeHTTP(w, r)
	return nil
}

// Credentials of ours that the traffic router never forwards into a sandbox
// (the code in it is untrusted):
//   - X-Access-Token and X-API-Key, always;
//   - Authorization, when its credential (after the scheme, e.g. "Bearer ")
//     is an API key of any organization or this sandbox's access token; an
//     Authorization the sandbox's own application issued passes through;
//   - cookies whose name starts with "dreadnode" (reserved for the backend,
//     which sets none today) or whose value is one of those credentials.
const backendCookiePrefix = "dreadnode"

// maxKeyLookups bounds the database lookups one proxied request may cause
// (each distinct cookie value or Authorization credential the key cache
// does not know costs one): without it, a request with 50,000 cookies
// cost 50,000 queries. Values past the budget are treated as ours and
// dropped: losing an application cookie beats leaking a key, and no real
// application sends this many distinct unknown cookies.
const maxKeyLookups = 32

// credentialStripper decides, once per request, which headers carry our
// credentials, and returns the function that removes them from the
// outgoing request.
func (s *Service) credentialStripper(r *http.Request, rec *store.Record) func(http.Header) {
	checked := map[string]bool{} // value -> ours, so repeats cost nothing
	lookups := 0
	ours := func(secret string) bool {
		secret = strings.TrimSpace(secret)
		if secret == "" {
			return false
		}
		if v, ok := checked[secret]; ok {
			return v
		}
		v := true
		switch {
		case ids.Matches(secret, rec.AccessTokenHash) || secret == r.Header.Get("X-API-Key") || secret == r.Header.Get("X-Access-Token"):
		case lookups >= maxKeyLookups: // over budget: ours, unchecked
		default:
			lookups++
			_, err := s.db.OrgForKey(r.Context(), secret)
			// Unsure (database error): treat it as ours; dropping a
			// header is safer than leaking a key.
			v = !errors.Is(err, store.ErrNotFound)
		}
		checked[secret] = v
		return v
	}
	dropAuth := false
	if a := r.Header.Get("Authorization"); a != "" {
		cred := a
		if scheme, rest, ok := strings.Cut(strings.TrimSpace(a), " "); ok && scheme != "" {
			cred = rest
		}
		dropAuth = ours(cred)
	}
	var keep []*http.Cookie
	// The Cookie header is always rebuilt from the cookies that parsed and
	// passed, never forwarded as sent: net/http's parser skips what it
	// cannot parse (a name that is not a token) and parses nothing at all
	// past 3,000 cookies, and either way the raw header would carry a key
	// the loop below never saw.
	cookiesChanged := len(r.Header.Values("Cookie")) > 0
	for _, c := range r.Cookies() {
		if strings.HasPrefix(strings.ToLower(c.Name), backendCookiePrefix) || ours(c.Value) {
			cookiesChanged = true
			continue
		}
		keep = append(keep, c)
	}
	return func(h http.Header) {
		h.Del("X-Access-Token")
		h.Del("X-API-Key")
		if dropAuth {
			h.Del("Authorization")
		}
		if cookiesChanged {
			h.Del("Cookie")
			if len(keep) > 0 {
				parts := make([]string, len(keep))
				for i, c := range keep {
					parts[i] = c.String()
				}
				h.Set("Cookie", strings.Join(parts, "; "))
			}
		}
	}
}
