// Package api assembles the backend's HTTP server: authentication, the
// shared middleware (panic recovery, metrics, logging), health routes and
// the routes of every domain package.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
)

// Registrar adds routes to a router.
type Registrar func(r *mux.Router)

// Config wires the server.
type Config struct {
	DB       *store.DB
	Provider compute.Provider
	Logger   *slog.Logger
	// Routes are registered behind the API-key middleware.
	Routes []Registrar
	// Public routes authenticate themselves (e.g. the traffic router).
	Public []Registrar
	// Hosts are public routes matched by the request's Host (the
	// host-based traffic router), registered before every path route so
	// that a sandbox's own /healthz or /metrics reaches the sandbox.
	Hosts []Registrar
	// AdminKey enables Admin routes, authenticated by that key alone.
	AdminKey string
	Admin    []Registrar
	// Registry receives the HTTP metrics; nil uses a new one.
	Registry *prometheus.Registry
	// OpenAPI is the JSON document served at /openapi.json.
	OpenAPI []byte
	// Checks are more dependencies /readyz reports, by name.
	Checks map[string]func(context.Context) error
	// Details are what /readyz says beside its checks, by name, without
	// failing them (e.g. how sandboxes' disk use is limited on this host).
	Details map[string]func(context.Context) string
	// Limits are the rate limits (zero: none).
	Limits RateLimits
	// MaxBodyBytes bounds every request body (uploads, archives, stdin,
	// proxied requests): 413 above it; 0 is no bound.
	MaxBodyBytes int64
	// Edges are other API surfaces under a path prefix, behind the same
	// API-key middleware as Routes.
	Edges []Edge
	// Contract, when set, wraps every matched route to check its request
	// against the API document (the route is known: mux.CurrentRoute).
	Contract func(http.Handler) http.Handler
}

// Edge is an API surface under Prefix (e.g. E2B's control plane under
// /e2b) served over the same services and keys. Wrap is outermost, around
// the key check too, so every answer under Prefix (a refused key and an
// unknown route included) follows the edge's conventions.
type Edge struct {
	Prefix string
	Wrap   func(http.Handler) http.Handler
	Routes Registrar
	// Public registers the edge's routes that need no key (E2B's
	// GET /health), under Prefix and Wrap.
	Public Registrar
}

type server struct {
	cfg      Config
	limits   *limiter
	refusals refusalLog
	reqs     *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// watchKey is DB.WatchKey, made once (not per request): the streams
	// a key opens end when it is revoked (httpx.KeyContext).
	watchKey func(ctx context.Context, hash string, revoked func()) func()
}

// NewHandler returns the backend's http.Handler.
func NewHandler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s := &server{cfg: cfg, limits: newLimiter(cfg.Limits), refusals: newRefusalLog(cfg.Logger),
		reqs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dreadnode_http_requests_total",
			Help: "HTTP requests by route and status."}, []string{"method", "route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dreadnode_http_request_duration_seconds",
			Help: "HTTP request latency by route.", Buckets: []float64{.0005, .001, .0025, .005, .01, .05, .1, .5, 1, 5, 30}},
			[]string{"method", "route"}),
	}
	if cfg.DB != nil {
		s.watchKey = cfg.DB.WatchKey
	}
	cfg.Registry.MustRegister(s.reqs, s.latency)

	root := mux.NewRouter()
	root.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteErr(w, httpx.NewError(http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path+"; see /openapi.json"))
	})
	root.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteErr(w, httpx.NewError(http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path+"; see /openapi.json"))
	})
	root.Use(s.recoverer, s.instrument, s.limitBody)
	if cfg.Contract != nil {
		root.Use(cfg.Contract)
	}
	for _, reg := range cfg.Hosts {
		reg(root)
	}
	root.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}).Methods(http.MethodGet)
	root.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet)
	// Metrics name orgs and their use: the operator's only (or on a
	// listener of their own, DREADNODE_METRICS_LISTEN; see MetricsHandler).
	root.Handle("/metrics", s.operatorOnly(MetricsHandler(cfg.Registry),
		"/metrics needs the operator key (DREADNODE_ADMIN_API_KEY) in X-API-Key or Authorization: Bearer, or serve them on DREADNODE_METRICS_LISTEN")).Methods(http.MethodGet)
	root.HandleFunc("/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(cfg.OpenAPI)
	}).Methods(http.MethodGet)
	for _, reg := range cfg.Public {
		reg(root)
	}
	for _, e := range cfg.Edges {
		if e.Public != nil {
			pub := root.PathPrefix(e.Prefix).Subrouter()
			pub.Use(e.Wrap)
			e.Public(pub)
		}
		sub := root.PathPrefix(e.Prefix).Subrouter()
		sub.Use(e.Wrap, s.auth)
		e.Routes(sub)
		// Unmatched paths skip the middleware: wrap their answers too.
		sub.NotFoundHandler = e.Wrap(root.NotFoundHandler)
		sub.MethodNotAllowedHandler = e.Wrap(root.MethodNotAllowedHandler)
	}
	admin := root.PathPrefix("/admin").Subrouter()
	admin.Use(s.adminAuth)
	for _, reg := range cfg.Admin {
		reg(admin)
	}
	authed := root.NewRoute().Subrouter()
	authed.Use(s.auth)
	for _, reg := range cfg.Routes {
		reg(authed)
	}
	// Unknown paths still answer 401 to unauthenticated callers, 404 otherwise.
	authed.NotFoundHandler = root.NotFoundHandler
	return root
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "provider": "ok"}
	status := http.StatusOK
	if err := s.cfg.DB.Ping(ctx); err != nil {
		checks["database"], status = err.Error(), http.StatusServiceUnavailable
	}
	if err := s.cfg.Provider.Ping(ctx); err != nil {
		checks["provider"], status = s.cfg.Provider.Name()+": "+err.Error(), http.StatusServiceUnavailable
	}
	for name, check := range s.cfg.Checks {
		checks[name] = "ok"
		if err := check(ctx); err != nil {
			checks[name], status = err.Error(), http.StatusServiceUnavailable
		}
	}
	if status != http.StatusOK {
		var failed []string
		for name, c := range checks {
			if c != "ok" {
				failed = append(failed, name+": "+c)
			}
		}
		sort.Strings(failed)
		httpx.LogServerError(r, status, "not ready: "+strings.Join(failed, "; "), nil)
	}
	body := map[string]any{"status": map[bool]string{true: "ready", false: "not_ready"}[status == 200],
		"checks": checks, "provider": s.cfg.Provider.Name()}
	if len(s.cfg.Details) > 0 {
		details := map[string]string{}
		for name, detail := range s.cfg.Details {
			details[name] = detail(ctx)
		}
		body["details"] = details
	}
	httpx.WriteJSON(w, status, body)
}

// apiKey reads X-API-Key or Authorization: Bearer.
func apiKey(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

func (s *server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKey(r)
		if key == "" {
			httpx.WriteErr(w, httpx.NewError(http.StatusUnauthorized, "unauthenticated", "send your API key in the X-API-Key header (or Authorization: Bearer <key>)"))
			return
		}
		addr, now := clientAddr(r), time.Now()
		lim, blocked := s.limits.authBlocked(addr, now)
		if blocked {
			// Over its limit of refused keys. The address may be shared (a
			// NAT, a proxy, the host every sandbox's traffic leaves from),
			// so a valid key is still served; a key that cannot be one
			// (no key has its prefix) is refused without a lookup.
			if _, cached := s.cfg.DB.CachedAuth(key); !cached && !s.cfg.DB.MayBeKey(r.Context(), key) {
				s.refusals.log(addr, key, "too many refused keys from this address")
				tooMany(w, lim, now, tooManyRefused)
				return
			}
		}
		k, err := s.cfg.DB.Authenticate(r.Context(), key)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrKeyRevoked) || errors.Is(err, store.ErrKeyExpired) {
			s.limits.authFailed(addr, now)
			why := err.Error()
			if errors.Is(err, store.ErrNotFound) {
				why = "unknown key"
			}
			if blocked {
				s.refusals.log(addr, key, why+"; too many refused keys from this address")
				tooMany(w, lim, now, tooManyRefused)
				return
			}
			s.refusals.log(addr, key, why)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			httpx.WriteErr(w, httpx.NewError(http.StatusUnauthorized, "invalid_api_key", "the API key is not valid; check DREADNODE_API_KEY"))
			return
		case errors.Is(err, store.ErrKeyRevoked):
			httpx.WriteErr(w, httpx.NewError(http.StatusUnauthorized, "api_key_revoked", "the API key was revoked; use another key of your org (dn keys create makes one)"))
			return
		case errors.Is(err, store.ErrKeyExpired):
			httpx.WriteErr(w, httpx.NewError(http.StatusUnauthorized, "api_key_expired", "the API key has expired; use another key of your org (dn keys create makes one)"))
			return
		case err != nil:
			s.cfg.Logger.Error("looking up an API key failed", "err", err)
			httpx.WriteErr(w, err)
			return
		}
		if k.Scope == store.ScopeRead && !readOnly(r.Method) {
			httpx.WriteErr(w, httpx.NewError(http.StatusForbidden, "read_only_key",
				"this API key has scope \"read\": it may only read (GET); "+r.Method+" needs a key with scope \"full\""))
			return
		}
		if !s.limits.allow(w, r, k.ID) {
			return
		}
		ctx := httpx.WithKey(httpx.WithOrg(r.Context(), k.OrgID), httpx.Key{ID: k.ID, Scope: k.Scope, ExpiresAt: k.ExpiresAt,
			Hash: k.Hash, Watch: s.watchKey})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// tooManyRefused is the 429 detail for an address over its limit of
// refused keys.
const tooManyRefused = "too many requests with invalid API keys from this address; wait for Retry-After, then check DREADNODE_API_KEY"

// readOnly reports whether a request of this method only reads. Writes
// are every other method (create, pause, delete, exec, file writes), so a
// route added later is a write unless it is a GET.
func readOnly(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

func (s *server) adminAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminKey == "" {
			httpx.WriteErr(w, httpx.NewError(http.StatusNotFound, "not_found", "admin routes are disabled; set DREADNODE_ADMIN_API_KEY to enable them"))
			return
		}
		s.operatorOnly(next, "admin routes need the operator's admin key (DREADNODE_ADMIN_API_KEY) in X-API-Key").ServeHTTP(w, r)
	})
}

// operatorOnly serves next to the holder of the operator key alone (401
// with detail otherwise). Wrong keys count against the address's limit of
// refused keys, so the operator key cannot be guessed at speed either.
func (s *server) operatorOnly(next http.Handler, detail string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr, now := clientAddr(r), time.Now()
		key := apiKey(r)
		// The comparison costs nothing: the operator key works even from
		// an address over its limit of refused keys (it may be shared).
		if s.cfg.AdminKey == "" || !ids.Matches(key, ids.HashSecret(s.cfg.AdminKey)) {
			if lim, blocked := s.limits.authBlocked(addr, now); blocked {
				tooMany(w, lim, now, "too many requests with invalid keys from this address; wait for Retry-After")
				return
			}
			if key != "" {
				s.limits.authFailed(addr, now)
				s.refusals.log(addr, key, "not the operator key")
			}
			httpx.WriteErr(w, httpx.NewError(http.StatusUnauthorized, "invalid_admin_key", detail))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// MetricsHandler serves the Prometheus text format of reg and the process
// collectors, unauthenticated: NewHandler puts it behind the operator key;
// the binary also serves it alone on DREADNODE_METRICS_LISTEN.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{reg, prometheus.DefaultGatherer}, promhttp.HandlerOpts{})
}

// statusWriter remembers the status for metrics and logs.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming responses (the traffic router) through.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if cur := mux.CurrentRoute(r); cur != nil {
			if t, err := cur.GetPathTemplate(); err == nil {
				route = t
			} else if n := cur.GetName(); n != "" { // a route matched by Host (the traffic router)
				route = n
			}
		}
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		if sw.code >= 500 && r.Context().Err() != nil {
			sw.code = httpx.StatusClientClosedRequest // the client left first: not our failure
		}
		s.reqs.WithLabelValues(r.Method, route, strconv.Itoa(sw.code)).Inc()
		s.latency.WithLabelValues(r.Method, route).Observe(time.Since(start).Seconds())
	})
}

func (s *server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // a recovered panic value, compared as net/http does; it is never wrapped
					panic(v)
				}
				s.cfg.Logger.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				httpx.WriteErr(w, errors.New("panic"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
