package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// RegisterRouter adds the traffic router. It authenticates with the
// sandbox's access token alone (a browser or agent reaching a preview URL has
// no API key), so it must be registered outside the API-key middleware.
// maskPortPlaceholder in store.Spec.E2BMaskRequestHost stands for the
// port a request is routed to (E2B's pool.MaskRequestHostPortPlaceholder).
const maskPortPlaceholder = "${PORT}"

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
	port, _ := strconv.Atoi(vars["port"])
	prefix := "/sandboxes/" + id + "/proxy/" + vars["port"]
	return s.route(w, r, rec, port, "/"+strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/"), "", false)
}

// route forwards r to port of rec's sandbox at path (rawPath, when set, is
// its escaped form): the traffic router's one way in, behind the path
// (/sandboxes/{id}/proxy/{port}) and the host ({port}-{id}.{domain})
// addresses alike. The sandbox's access token is the credential; a paused
// sandbox is resumed first when autoResume is set; port compute.EnvdPort
// reaches the sandbox's envd (the agent), with its own token; there a
// sandbox created through /e2b takes E2B's envd rules (checkTraffic) and
// envd's control-plane routes answer E2B's 404 before any token check
// (envdInternal). byHost: the
// request came by host, on the sandbox port's own origin, where the
// browser's traffic cookie also counts (see handleHostRoute).
func (s *Service) route(w http.ResponseWriter, r *http.Request, rec *store.Record, port int, path, rawPath string, byHost bool) error {
	id := rec.ID
	envd := port == compute.EnvdPort
	if envd {
		// envd's routes only, cleaned, so no "/files/../init" slips through.
		path, rawPath = cleanPath(path), ""
		if envdInternal[path] { // E2B's proxy refuses these before any token check
			internalRoute(w, path)
			return nil
		}
	}
	envdTok, err := s.EnvdToken(r.Context(), rec)
	if err != nil {
		return err
	}
	if signed, ok := signedFileURL(w, r, envd, path, envdTok); signed {
		if !ok {
			return nil // refused with envd's own answer
		}
	} else if rec.Spec.E2BSecure != nil { // created through /e2b: E2B's rules (handlers_e2btraffic.go)
		trafficTok, err := s.TrafficToken(r.Context(), rec)
		if err != nil {
			return err
		}
		if written, err := checkE2BTraffic(w, r, rec, byHost, envd, envdTok, trafficTok); written || err != nil {
			return err
		}
	} else if err := checkTraffic(r, rec, byHost, envd, envdTok); err != nil {
		return err
	}
	if envd {
		if err := envdRouteAllowed(path); err != nil {
			return err
		}
	}
	if rec.Phase == sandbox.PhasePaused || rec.Phase == sandbox.PhasePausing {
		if !rec.AutoResume {
			return httpx.Conflict(fmt.Sprintf("sandbox %s is paused and autoResume is off; POST /sandboxes/%s/connect to resume it", id, id))
		}
		var err error
		if rec, err = s.autoResume(r.Context(), rec); err != nil {
			return err
		}
	}
	if rec.Phase.Starting() {
		var err error
		if rec, err = s.WaitStarted(r.Context(), id); err != nil {
			return err
		}
	}
	if rec.Phase != sandbox.PhaseRunning {
		return httpx.Conflict(fmt.Sprintf("sandbox %s is %s; no traffic can reach it", id, rec.Phase.PublicState()))
	}
	var target *url.URL
	envdToken := ""
	if envd {
		base, token, err := s.envdOf(r.Context(), rec)
		if err != nil {
			return err
		}
		if target, err = url.Parse(base); err != nil {
			return fmt.Errorf("the provider answered envd URL %q: %w", base, err)
		}
		envdToken = token
	} else {
		ep, ok := rec.Endpoints[port]
		if !ok && rec.Spec.E2BSecure != nil {
			// Created through /e2b: E2B's proxy routes every port of a
			// sandbox, whatever its template declares (where the sandbox
			// has an address of its own to dial; not on E2B itself).
			if host, ok2 := s.sandboxAddr(r.Context(), rec); ok2 {
				ep, ok = compute.Endpoint{Host: host, Port: port}, true
			}
		}
		if !ok {
			ports := make([]string, 0, len(rec.Endpoints))
			for p := range rec.Endpoints {
				ports = append(ports, strconv.Itoa(p))
			}
			slices.Sort(ports)
			return httpx.NewError(http.StatusNotFound, "port_not_exposed",
				fmt.Sprintf("port %d of sandbox %s is not exposed; its template exposes [%s]", port, id, strings.Join(ports, ", ")))
		}
		var err error
		target, err = url.Parse(ep.URL)
		if err != nil || ep.URL == "" {
			target = &url.URL{Scheme: "http", Host: ep.Host + ":" + strconv.Itoa(ep.Port)}
		}
	}
	strip := s.credentialStripper(r, rec, envdTok)
	var upgraded atomic.Bool
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, rawPath
			if base := strings.TrimSuffix(target.Path, "/"); base != "" { // envd behind a path (E2B's fake)
				pr.Out.URL.Path, pr.Out.URL.RawPath = base+path, ""
			}
			strip(pr.Out.Header)
			for _, h := range routingHeaders {
				pr.Out.Header.Del(h)
			}
			if envd {
				pr.Out.Header.Set("X-Access-Token", envdToken)
			}
			pr.SetXForwarded()
			if mask := rec.Spec.E2BMaskRequestHost; mask != "" && !envd {
				// E2B's proxy: the Host the sandbox's server expects (one that
				// checks it), the one asked for in X-Forwarded-Host.
				pr.Out.Host = strings.ReplaceAll(mask, maskPortPlaceholder, strconv.Itoa(port))
				pr.Out.Header.Set("X-Forwarded-Host", r.Host)
			}
		},
		ModifyResponse: func(res *http.Response) error {
			if res.StatusCode == http.StatusSwitchingProtocols {
				upgraded.Store(true)
			}
			hostOnlyCookies(res.Header)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client left: nobody reads the answer, and it is not the
				// sandbox's failure (httpx.Handler's 499, logged as it does).
				slog.DebugContext(r.Context(), "request abandoned by the client", "method", r.Method, "path", r.URL.Path, "err", err)
				httpx.WriteErr(w, httpx.ClientClosed())
				return
			}
			proxyError(w, r, "upstream_unreachable", id, msgPortClosed, port,
				fmt.Sprintf("nothing answered on port %d of sandbox %s: %v", port, id, err), err)
		},
	}
	// A streaming client (Connect's server streams over HTTP/1.1) may end
	// its request body after the sandbox has begun answering. Without full
	// duplex the server closes the request body at the first write, the
	// upstream request then fails, and the transport cuts the answer off
	// mid-stream (seen as "use of closed network connection" after a few
	// hundred process starts through the router).
	_ = http.NewResponseController(w).EnableFullDuplex() // unsupported only under HTTP/2, which is duplex
	proxy.ServeHTTP(w, r)
	// The body is closed before the handler returns (Go's HTTP/1 server
	// panics otherwise: golang/go#68560). When the dial or the round trip
	// failed without reading it (a sandbox paused or deleted meanwhile), the
	// server drained it after the handler, reached its end, started its
	// background read of the connection there, and then read the
	// connection for the next request beside it: "invalid concurrent
	// Body.Read call". Closed here, the end is reached (or the body
	// abandoned) while the handler runs, and the server stops that
	// background read before it reads on. A hijacked (upgraded)
	// connection's body belongs to the hijacker.
	if !upgraded.Load() {
		_ = r.Body.Close()
	}
	return nil
}

// sandboxAddr is the sandbox's IP address on its network, where the
// router dials it directly (Docker): a declared port's, else its envd's.
// A provider whose sandboxes are reached by name (E2B) has none.
func (s *Service) sandboxAddr(ctx context.Context, rec *store.Record) (string, bool) {
	for _, ep := range rec.Endpoints {
		if _, err := netip.ParseAddr(ep.Host); err == nil {
			return ep.Host, true
		}
	}
	base, _, err := s.envdOf(ctx, rec)
	if err != nil {
		return "", false
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", false
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil {
		return "", false
	}
	return u.Hostname(), true
}

// envdOf is where the sandbox's envd listens and the token it expects.
func (s *Service) envdOf(ctx context.Context, rec *store.Record) (string, string, error) {
	l, ok := s.prov.(compute.EnvdLocator)
	if !ok {
		return "", "", httpx.NewError(http.StatusNotFound, "port_not_exposed",
			fmt.Sprintf("port %d of sandbox %s serves nothing: the %s provider runs no envd", compute.EnvdPort, rec.ID, s.prov.Name()))
	}
	base, token, err := l.Envd(ctx, rec.Ref())
	if compute.IsNotFound(err) {
		return "", "", httpx.NewError(http.StatusNotFound, "port_not_exposed",
			fmt.Sprintf("port %d of sandbox %s serves nothing: %v", compute.EnvdPort, rec.ID, err))
	}
	return base, token, err
}
