// Package e2b implements compute.Provider on E2B (https://e2b.dev), speaking
// E2B's published API: the control plane described by openapi.yml (sandboxes,
// pause/connect, timeouts, logs, metrics) and, inside each sandbox, envd
// (envd.yaml for files, process.proto over connect-go for commands).
//
// The specs live at ../shared/e2b beside the repository; the control plane's
// request and response types are generated from a copy of openapi.yml
// (apitypes/e2btypes). The in-process fake in e2bfake checks every request
// this package sends and every response it answers against the specs.
//
// E2B only knows two states, running and paused. The reconciler owns the
// rest (starting, failed, deleted): a sandbox E2B no longer knows is reported
// as compute.KindNotFound.
package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-resty/resty/v2"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
)

// Defaults used when the matching Config field is zero.
const (
	DefaultDomain         = "e2b.app"
	DefaultTimeout        = time.Hour // sandbox TTL when a Spec carries none
	DefaultRequestTimeout = 2 * time.Minute
	DefaultListPageSize   = 100 // the maximum openapi.yml allows
	// EnvdPort is the port envd listens on inside every sandbox.
	EnvdPort = 49983
)

// RetryConfig bounds how often and for how long a transient failure (429,
// 502, 503, 504, a refused or dropped connection) is retried. Both bounds
// apply: retrying stops at MaxAttempts attempts or when the next wait would
// end more than MaxElapsed after the first attempt, whichever comes first.
type RetryConfig struct {
	MaxAttempts int           // attempts in total, the first included; default 5
	MaxElapsed  time.Duration // default 30s
	BaseDelay   time.Duration // first backoff; doubles per attempt; default 250ms
	MaxDelay    time.Duration // cap of one backoff; default 5s
}

func (r RetryConfig) withDefaults() RetryConfig {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 5
	}
	if r.MaxElapsed <= 0 {
		r.MaxElapsed = 30 * time.Second
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 250 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 5 * time.Second
	}
	if r.MaxDelay < r.BaseDelay {
		r.MaxDelay = r.BaseDelay
	}
	return r
}

// Config configures the E2B provider.
type Config struct {
	// APIKey authenticates every control-plane call (E2B_API_KEY). Required.
	APIKey string
	// Domain is E2B's base domain (E2B_DOMAIN); default e2b.app.
	Domain string
	// APIURL is the control plane (E2B_API_URL); default https://api.<Domain>.
	APIURL string
	// HTTPClient carries every request (control plane and envd); it is copied,
	// never modified. Default: a client without an overall timeout (requests
	// are bounded by RequestTimeout and the caller's context instead).
	HTTPClient *http.Client
	// Retry bounds retries of transient failures.
	Retry RetryConfig
	// RequestTimeout bounds one HTTP attempt; default 2 minutes.
	RequestTimeout time.Duration
	// Templates maps our template ids to E2B templates: the key is our id, the
	// value's ID is E2B's templateID, CPUCount/MemoryMB what the E2B template
	// was built with and Ports the service ports it exposes. Default:
	// {"base": {ID: "base", CPUCount: 2, MemoryMB: 512}}. A Spec.Template not
	// in the map is passed to E2B unchanged (task manifests name E2B template
	// ids directly).
	Templates map[string]compute.Template
	// DefaultTimeout is the sandbox TTL sent when a Spec has no Timeout and
	// the timeout used by Resume when the Ref does not remember one.
	// Default 1h. (E2B's own default is 15 seconds.)
	DefaultTimeout time.Duration
	// TTLGrace is added to every TTL sent to E2B (create, set timeout). The
	// backend's reconciler acts on a record's own end time (delete, or pause
	// with autoPause); E2B's TTL is only the backstop for a backend that is
	// down, and the grace keeps E2B from killing a sandbox just before the
	// reconciler ends it (which would read as "the instance disappeared"
	// instead of a timeout). Default 30s; negative means none.
	TTLGrace time.Duration
	// User is the sandbox user commands run as and relative file paths
	// resolve against; empty means the template's default user.
	User string
	// EnvdURL returns the base URL of envd in a sandbox. Default
	// https://49983-<sandboxID>.<Domain>. Tests point it at a fake.
	EnvdURL func(sandboxID string) string
	// ServiceURL returns the URL of a sandbox port. Default
	// https://<port>-<sandboxID>.<Domain>.
	ServiceURL func(sandboxID string, port int) string
	// ListPageSize is the page size List asks for (1..100); default 100.
	ListPageSize int
	// MaxExecOutput caps how many bytes of stdout and of stderr Exec keeps;
	// default 16 MiB each. Output beyond the cap is dropped.
	MaxExecOutput int
	// Scope names the deployment owning the sandboxes (the backend passes its
	// database's deployment id). Every sandbox carries it as metadata
	// compute.LabelDeployment, and List and Create's adoption only see
	// sandboxes of their own scope, so backends sharing one E2B team never
	// sweep each other's sandboxes. Default "default".
	Scope string
	// WebhookURL (E2B_WEBHOOK_URL) is the backend's public URL of E2B's
	// lifecycle callback, e.g. https://sandboxes.example.com/callbacks/e2b/lifecycle.
	// Set, the backend registers it with E2B and applies E2B's killed and
	// paused events at once (webhook.go); empty, it learns of them by polling.
	WebhookURL string
	// WebhookSecret (E2B_WEBHOOK_SECRET) is what the webhook's signature
	// secret is derived from; default the API key.
	WebhookSecret string
}

// ConfigFrom is the provider's configuration from the E2B_* variables
// (read once by the backend's configuration, package config).
func ConfigFrom(e config.E2B) Config {
	return Config{APIKey: e.APIKey, Domain: e.Domain, APIURL: e.APIURL, WebhookURL: e.WebhookURL, WebhookSecret: e.WebhookSecret}
}

func serviceURL(domain, sandboxID string, port int) string {
	return fmt.Sprintf("https://%d-%s.%s", port, sandboxID, domain)
}

// Provider is the E2B implementation of compute.Provider. It is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	hc     *http.Client
	api    *resty.Client // control plane: base URL + X-API-Key
	envd   *resty.Client // envd: no API key (it must never reach a sandbox)
	apiURL string
	hooks  *hooks // nil without a WebhookURL
	mains  *mains // the main commands this process follows (main.go)
}

var (
	_ compute.Provider = (*Provider)(nil)
	_ compute.Watcher  = (*Provider)(nil)
)

// New validates cfg and returns a Provider. It does not contact E2B; Ping does.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.APIKey) == "" {
		return nil, errors.New("e2b: no API key: set E2B_API_KEY (the key from https://e2b.dev/dashboard?tab=keys) to use the E2B provider")
	}
	cfg.APIKey = strings.TrimSpace(cfg.APIKey)
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api." + cfg.Domain
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("e2b: E2B_API_URL %q is not an http(s) URL", cfg.APIURL)
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	if err := checkWebhookURL(cfg.WebhookURL); err != nil {
		return nil, err
	}
	cfg.Retry = cfg.Retry.withDefaults()
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = DefaultTimeout
	}
	if cfg.ListPageSize <= 0 || cfg.ListPageSize > 100 {
		cfg.ListPageSize = DefaultListPageSize
	}
	if cfg.MaxExecOutput <= 0 {
		cfg.MaxExecOutput = compute.MaxExecOutputBytes
	}
	switch {
	case cfg.TTLGrace == 0:
		cfg.TTLGrace = 30 * time.Second
	case cfg.TTLGrace < 0:
		cfg.TTLGrace = 0
	}
	if cfg.Scope == "" {
		cfg.Scope = "default"
	}
	if cfg.Templates == nil {
		cfg.Templates = map[string]compute.Template{"base": {ID: "base", CPUCount: 2, MemoryMB: 512}}
	} else {
		cfg.Templates = maps.Clone(cfg.Templates)
	}
	if cfg.EnvdURL == nil {
		domain := cfg.Domain
		cfg.EnvdURL = func(id string) string { return fmt.Sprintf("https://%d-%s.%s", EnvdPort, id, domain) }
	}
	if cfg.ServiceURL == nil {
		domain := cfg.Domain
		cfg.ServiceURL = func(id string, port int) string { return serviceURL(domain, id, port) }
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	if hc.Transport == nil {
		hc.Transport = http.DefaultTransport
	}
	p := &Provider{cfg: cfg, hc: hc, apiURL: cfg.APIURL, hooks: newHooks(cfg), mains: newMains()}
	p.api = newResty(hc).SetBaseURL(cfg.APIURL).SetHeader("X-API-Key", cfg.APIKey)
	// envd is the sandbox's own process: a body it sends is read whole
	// (a buffered file read, an error) only up to compute.MaxFileBytes.
	p.envd = newResty(hc).SetResponseBodyLimit(compute.MaxFileBytes)
	return p, nil
}

func newResty(hc *http.Client) *resty.Client {
	c := *hc // resty sets fields on the client it is given
	return resty.NewWithClient(&c).
		SetLogger(discardLogger{}).
		SetHeader("User-Agent", "dreadnode-backend (e2b provider)")
}

type discardLogger struct{}

func (discardLogger) Errorf(string, ...any) {}
func (discardLogger) Warnf(string, ...any)  {}
func (discardLogger) Debugf(string, ...any) {}

// Name implements compute.Provider.
func (p *Provider) Name() string { return "e2b" }

// ServiceURL is the URL of port on sandbox sandboxID.
func (p *Provider) ServiceURL(sandboxID string, port int) string {
	return p.cfg.ServiceURL(sandboxID, port)
}

// Ping makes one cheap authenticated call (GET /v2/sandboxes?limit=1) without
// retrying, so /readyz reports promptly whether E2B answers and accepts the key.
func (p *Provider) Ping(ctx context.Context) error {
	_, err := p.do(ctx, &call{
		op:     "ping",
		method: http.MethodGet,
		path:   "/v2/sandboxes",
		query:  url.Values{"limit": {"1"}},
		ok:     []int{http.StatusOK},
		once:   true,
	})
	return err
}

// Templates lists the configured templates under our ids.
func (p *Provider) Templates(ctx context.Context) ([]compute.Template, error) {
	ids := slices.Sorted(maps.Keys(p.cfg.Templates))
	out := make([]compute.Template, 0, len(ids))
	for _, id := range ids {
		t := p.cfg.Templates[id]
		t.ID = id
		t.Ports = slices.Clone(t.Ports)
		out = append(out, t)
	}
	return out, nil
}

// resolveTemplate maps our template id to E2B's, with what we know of it.
func (p *Provider) resolveTemplate(id string) (e2bID string, t compute.Template, known bool) {
	if t, ok := p.cfg.Templates[id]; ok {
		e2bID = t.ID
		if e2bID == "" {
			e2bID = id
		}
		return e2bID, t, true
	}
	return id, compute.Template{ID: id}, false
}

// templateByE2BID finds our template for an E2B templateID (for Ports).
func (p *Provider) templateByE2BID(e2bID, alias string) (compute.Template, bool) {
	for id, t := range p.cfg.Templates {
		tid := t.ID
		if tid == "" {
			tid = id
		}
		if tid == e2bID || (alias != "" && tid == alias) {
			return t, true
		}
	}
	return compute.Template{}, false
}

func (p *Provider) endpoints(sandboxID string, ports []int) map[int]compute.Endpoint {
	if len(ports) == 0 {
		return nil
	}
	eps := make(map[int]compute.Endpoint, len(ports))
	for _, port := range ports {
		raw := p.cfg.ServiceURL(sandboxID, port)
		ep := compute.Endpoint{URL: raw}
		if u, err := url.Parse(raw); err == nil {
			ep.Host = u.Hostname()
			if n, err := strconv.Atoi(u.Port()); err == nil {
				ep.Port = n
			} else if u.Scheme == "http" {
				ep.Port = 80
			} else {
				ep.Port = 443
			}
		}
		eps[port] = ep
	}
	return eps
}

// seconds converts a duration to whole seconds, rounding up, within int32.
func seconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	if s > 1<<31-1 {
		s = 1<<31 - 1
	}
	if s < 0 {
		s = 0
	}
	return s
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
