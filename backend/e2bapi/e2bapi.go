// Package e2bapi serves E2B's control-plane API (../shared/e2b/openapi.yml,
// the routes an E2B SDK calls) under /e2b, so E2B_API_URL=<backend>/e2b
// points E2B's clients at this backend. It is a second edge over the same
// lifecycle service as the native API: the same records, admission queue,
// billing, leases and API keys; it translates shapes, never keeps state.
// README.md beside this file maps every E2B field to what it does here.
package e2bapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/domain/sandbox"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/httpx"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/lifecycle"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/orgmetrics"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/store"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/templates"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/volumes"
)

// Prefix is where the edge is mounted.
const Prefix = "/e2b"

// ClientID is the deprecated clientID E2B answers with every sandbox. Old
// SDKs address a sandbox as "<sandboxID>-<clientID>"; the suffix is dropped.
const ClientID = "dreadnode"

// DefaultEnvdVersion is the envdVersion reported when Config names none:
// the lowest version E2B's SDKs accept.
const DefaultEnvdVersion = "0.1.0"

// Config wires the edge.
type Config struct {
	Lifecycle *lifecycle.Service
	DB        *store.DB
	// Domain is the base domain of sandbox traffic ({port}-{sandboxID}.{Domain}),
	// answered as E2B's `domain`.
	Domain string
	// EnvdVersion is the version of the in-sandbox agent.
	EnvdVersion string
	// Events serves E2B's /events routes (events.go); nil leaves them out.
	Events *events.Service
	// Volumes serves E2B's /volumes routes (volumes.go); nil leaves them out.
	Volumes *volumes.Service
	// Metrics serves E2B's team metrics (teams.go); nil leaves them out.
	Metrics *orgmetrics.Service
	// Templates serves E2B's template, tag and snapshot routes
	// (templates.go); nil leaves them out.
	Templates *templates.Service
}

// Edge is the E2B control plane.
type Edge struct {
	cfg Config
	lc  *lifecycle.Service
	db  *store.DB
}

// New returns the edge.
func New(cfg Config) *Edge {
	if cfg.EnvdVersion == "" {
		cfg.EnvdVersion = DefaultEnvdVersion
	}
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	return &Edge{cfg: cfg, lc: cfg.Lifecycle, db: cfg.DB}
}

// RegisterPublic adds E2B's routes that need no key to r: GET /health,
// which E2B's clients and load balancers poll (200, a plain sentence).
func (e *Edge) RegisterPublic(r *mux.Router) {
	r.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Health check successful"))
	}).Methods(http.MethodGet)
	e.registerTemplateUploads(r)
}

// notFound is E2B's answer for a sandbox id it does not know (or another
// team's), with why when there is more to say.
func notFound(id, why string) error {
	return httpx.NewError(http.StatusNotFound, "not_found", fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it%s", id, why))
}

// Register adds E2B's routes to r (a router under Prefix whose requests are
// authenticated).
func (e *Edge) Register(r *mux.Router) {
	h := func(f httpx.Handler) http.Handler { return f }
	r.Handle("/sandboxes", h(e.handleCreate)).Methods(http.MethodPost)
	r.Handle("/sandboxes", h(e.handleListV1)).Methods(http.MethodGet)
	r.Handle("/v2/sandboxes", h(e.handleListV2)).Methods(http.MethodGet)
	r.Handle("/sandboxes/metrics", h(e.handleMetricsMany)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{sandboxID}", h(e.handleGet)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{sandboxID}", h(e.handleDelete)).Methods(http.MethodDelete)
	r.Handle("/sandboxes/{sandboxID}/pause", h(e.handlePause)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{sandboxID}/resume", h(e.handleResume)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{sandboxID}/connect", h(e.handleConnect)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{sandboxID}/timeout", h(e.handleTimeout)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{sandboxID}/refreshes", h(e.handleRefresh)).Methods(http.MethodPost)
	r.Handle("/sandboxes/{sandboxID}/logs", h(e.handleLogsV1)).Methods(http.MethodGet)
	r.Handle("/v2/sandboxes/{sandboxID}/logs", h(e.handleLogsV2)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{sandboxID}/metrics", h(e.handleMetrics)).Methods(http.MethodGet)
	r.Handle("/sandboxes/{sandboxID}/fork", h(e.handleFork)).Methods(http.MethodPost)
	e.registerEvents(r)
	e.registerVolumes(r)
	e.registerTeams(r)
	e.registerTemplates(r)
}

// pathID is the path's sandbox id without an old SDK's "-<clientID>".
func pathID(r *http.Request) string {
	id, _, _ := strings.Cut(mux.Vars(r)["sandboxID"], "-")
	return id
}

// load reads the path's sandbox while it lives: E2B knows no ended
// sandboxes, so an ended one is 404 like an unknown id or another org's
// (the native API keeps its record: GET /sandboxes/{id}).
func (e *Edge) load(ctx context.Context, r *http.Request) (*store.Record, error) {
	id := pathID(r)
	rec, err := e.db.GetOrgRecord(ctx, httpx.Org(r), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sandbox.AddressedAsSandbox(rec.Kind)) {
		return nil, notFound(id, "")
	}
	if err != nil {
		return nil, err
	}
	if !rec.Phase.Live() {
		return nil, notFound(id, ": it is "+string(rec.PublicState())+"; its record stays readable at GET /sandboxes/"+id+" of the native API")
	}
	return rec, nil
}
