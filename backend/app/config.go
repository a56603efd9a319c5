// Package app wires the backend together (database, provider, reconciler,
// HTTP routes) from its configuration; the binary and the tests both use it.
package app

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/multi"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
)

// Config is the backend's configuration; see DESIGN.md for the variables.
type Config struct {
	Listen            string
	DatabaseURL       string
	DataDir           string
	TasksDir          string
	Provider          string
	BootstrapOrg      string
	BootstrapKey      string
	BootstrapCredits  float64
	AdminKey          string
	MinTimeoutSec     int
	ReconcileInterval time.Duration
	// ObserveEvery is how often the reconciler compares every instance with
	// its record (default 5 s); tests lengthen it to show that a provider's
	// event, not a poll, applied a change.
	ObserveEvery  time.Duration
	WarmPoolSize  int
	DockerHost    string
	DockerNetwork string
	DockerImage   string
	// DockerRuntime (DOCKER_SANDBOX_RUNTIME) is the engine runtime of the
	// base template's sandboxes, e.g. runsc; "" is the engine's default.
	DockerRuntime string
	// DockerDiskLimitMB (DOCKER_DISK_LIMIT_MB) caps each container's
	// writable layer where the storage driver supports it; 0: no cap.
	DockerDiskLimitMB int
	// DockerEgress is the host firewall of Docker sandboxes
	// (DREADNODE_EGRESS, DREADNODE_EGRESS_ALLOW_PRIVATE).
	DockerEgress docker.EgressConfig
	// AgentBinary (DREADNODE_AGENT_BINARY) is the sandbox agent's static
	// Linux build, injected into every Docker sandbox; "" injects nothing.
	AgentBinary string
	// TemplateProviders routes templates to another provider than Provider
	// (DREADNODE_TEMPLATE_PROVIDERS="gpu=e2b,local=docker").
	TemplateProviders map[string]string
	// E2B, when set, replaces the E2B_* variables (embedding and tests).
	E2B *e2b.Config
	// Capacity of the provider (DREADNODE_CAPACITY_*; zero fields: the
	// provider's default) and the per-org queue bound (DREADNODE_MAX_QUEUE).
	Capacity admission.Capacity
	MaxQueue int
	// LeaseTTL (DREADNODE_LEASE_TTL) is how long a replica holds a record
	// without renewing: the most a dead replica's records wait for another.
	LeaseTTL time.Duration
	// ReplicaID names this process in the records' leases; empty generates
	// host-pid-random (tests set it to tell replicas apart in logs).
	ReplicaID string
	// NoReadBarrier (DREADNODE_READ_BARRIER=off; PostgreSQL only) serves
	// cached reads without waiting for the read barrier: faster, but a read
	// may miss another replica's write acknowledged less than a
	// notification's delivery ago (see DESIGN.md, coherence across replicas).
	NoReadBarrier bool
	// Limits are the rate limits (DREADNODE_RATE_*, ratelimits.go); the
	// zero value, as in tests that build a Config, limits nothing.
	Limits api.RateLimits
	// MetricsListen (DREADNODE_METRICS_LISTEN), when set, is an address
	// serving GET /metrics without a key (a private network or loopback
	// for the scraper); on the API listener /metrics needs the operator key.
	MetricsListen string
	// MaxBodyBytes (DREADNODE_MAX_BODY_BYTES, default 4 GiB) bounds every
	// request body: file uploads, archives, stdin, proxied requests (JSON
	// bodies have their own, smaller bound). 0 in a Config built in code:
	// no bound.
	MaxBodyBytes int64
	// EventRetention (DREADNODE_EVENT_RETENTION, default 7 days) is how
	// long lifecycle events are kept.
	EventRetention time.Duration
	// Webhooks configures webhook deliveries: DREADNODE_WEBHOOK_ALLOW_PRIVATE,
	// DREADNODE_WEBHOOK_BACKOFF_MAX (default 1h), DREADNODE_WEBHOOK_GIVE_UP
	// (default 24h), DREADNODE_WEBHOOK_CLAIM_HOLD (default 30s).
	Webhooks events.DeliveryConfig
	// SandboxDomain (DREADNODE_SANDBOX_DOMAIN, default localhost) is the
	// base domain of host-routed sandbox traffic, {port}-{sandboxID}.{domain},
	// and E2B's `domain` in /e2b answers; it may carry a port
	// (localhost:8080), which E2B's SDKs then put in the URLs they build.
	SandboxDomain string
}

// minLeaseTTL keeps renewals (every third of the TTL) from hammering the
// database and leaves room for their round trips.
const minLeaseTTL = 500 * time.Millisecond

// DefaultBootstrapCredits is the balance of a bootstrapped org when
// DREADNODE_BOOTSTRAP_CREDITS is unset.
const DefaultBootstrapCredits = 1000

// DefaultMaxBodyBytes bounds request bodies when DREADNODE_MAX_BODY_BYTES
// is unset: generous for archives and uploads, finite.
const DefaultMaxBodyBytes = 4 << 30

// ConfigFromEnv reads the DREADNODE_* and provider variables.
func ConfigFromEnv() (Config, error) {
	c := Config{
		Listen:        env("DREADNODE_LISTEN", "127.0.0.1:8080"),
		DataDir:       env("DREADNODE_DATA_DIR", ".dreadnode"),
		TasksDir:      env("DREADNODE_TASKS_DIR", "tasks"),
		Provider:      env("DREADNODE_PROVIDER", "docker"),
		BootstrapOrg:  os.Getenv("DREADNODE_BOOTSTRAP_ORG"),
		BootstrapKey:  os.Getenv("DREADNODE_BOOTSTRAP_API_KEY"),
		AdminKey:      os.Getenv("DREADNODE_ADMIN_API_KEY"),
		MetricsListen: os.Getenv("DREADNODE_METRICS_LISTEN"),
		SandboxDomain: env("DREADNODE_SANDBOX_DOMAIN", "localhost"),
		DockerHost:    os.Getenv("DOCKER_HOST"),
		DockerNetwork: os.Getenv("DOCKER_NETWORK"),
		DockerImage:   os.Getenv("DOCKER_RUNTIME_IMAGE"),
		DockerRuntime: os.Getenv("DOCKER_SANDBOX_RUNTIME"),
		AgentBinary:   os.Getenv("DREADNODE_AGENT_BINARY"),
	}
	c.DatabaseURL = env("DREADNODE_DATABASE_URL", filepath.Join(c.DataDir, "dreadnode.db"))
	var err error
	if c.DockerEgress, err = docker.EgressConfigFromEnv(os.Getenv); err != nil {
		return c, err
	}
	if c.BootstrapCredits, err = envFloat("DREADNODE_BOOTSTRAP_CREDITS", DefaultBootstrapCredits); err != nil {
		return c, err
	}
	if c.MinTimeoutSec, err = envInt("DREADNODE_MIN_TIMEOUT_SEC", 60); err != nil {
		return c, err
	}
	if c.MinTimeoutSec < 1 || c.MinTimeoutSec > 60 {
		return c, fmt.Errorf("DREADNODE_MIN_TIMEOUT_SEC: must be between 1 and 60, got %d", c.MinTimeoutSec)
	}
	if c.WarmPoolSize, err = envInt("DREADNODE_WARM_POOL_SIZE", 0); err != nil {
		return c, err
	}
	if c.DockerDiskLimitMB, err = envInt("DOCKER_DISK_LIMIT_MB", docker.DefaultDiskLimitMB); err != nil {
		return c, err
	}
	if c.DockerDiskLimitMB < 0 {
		return c, fmt.Errorf("DOCKER_DISK_LIMIT_MB: must be 0 (no cap) or more, got %d", c.DockerDiskLimitMB)
	}
	if c.ReconcileInterval, err = envDuration("DREADNODE_RECONCILE_INTERVAL", time.Second); err != nil {
		return c, err
	}
	if c.LeaseTTL, err = envDuration("DREADNODE_LEASE_TTL", reconciler.DefaultLeaseTTL); err != nil {
		return c, err
	}
	if c.LeaseTTL < minLeaseTTL {
		return c, fmt.Errorf("DREADNODE_LEASE_TTL: must be at least %s (leases are renewed every third of it), got %s", minLeaseTTL, c.LeaseTTL)
	}
	if c.EventRetention, err = envDuration("DREADNODE_EVENT_RETENTION", events.DefaultRetention); err != nil {
		return c, err
	}
	if c.EventRetention < time.Minute {
		return c, fmt.Errorf("DREADNODE_EVENT_RETENTION: must be at least 1m, got %s", c.EventRetention)
	}
	if c.Webhooks, err = webhookConfig(); err != nil {
		return c, err
	}
	if c.Capacity, err = capacityConfig(); err != nil {
		return c, err
	}
	if c.MaxQueue, err = envInt("DREADNODE_MAX_QUEUE", admission.DefaultMaxQueue); err != nil {
		return c, err
	}
	if c.MaxQueue < 1 {
		return c, fmt.Errorf("DREADNODE_MAX_QUEUE: must be 1 or more, got %d", c.MaxQueue)
	}
	switch v := os.Getenv("DREADNODE_READ_BARRIER"); v {
	case "", "on":
	case "off":
		c.NoReadBarrier = true
	default:
		return c, fmt.Errorf("DREADNODE_READ_BARRIER: must be on (the default) or off, got %q", v)
	}
	maxBody, err := envInt("DREADNODE_MAX_BODY_BYTES", DefaultMaxBodyBytes)
	if err != nil {
		return c, err
	}
	if maxBody < 1 {
		return c, fmt.Errorf("DREADNODE_MAX_BODY_BYTES: must be 1 or more, got %d", maxBody)
	}
	c.MaxBodyBytes = int64(maxBody)
	if c.Limits, err = rateLimitsFromEnv(); err != nil {
		return c, err
	}
	if c.TemplateProviders, err = multi.ParseRoutes(os.Getenv("DREADNODE_TEMPLATE_PROVIDERS")); err != nil {
		return c, err
	}
	if c.Provider != "docker" && c.Provider != "e2b" {
		return c, fmt.Errorf("DREADNODE_PROVIDER: must be docker or e2b, got %q", c.Provider)
	}
	if c.BootstrapKey != "" && c.BootstrapOrg == "" {
		return c, fmt.Errorf("DREADNODE_BOOTSTRAP_API_KEY is set but DREADNODE_BOOTSTRAP_ORG is not; set both")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c, fmt.Errorf("DREADNODE_LISTEN: %q is not host:port: %v", c.Listen, err)
	}
	if _, _, err := net.SplitHostPort(c.MetricsListen); c.MetricsListen != "" && err != nil {
		return c, fmt.Errorf("DREADNODE_METRICS_LISTEN: %q is not host:port: %v", c.MetricsListen, err)
	}
	if strings.ContainsAny(c.SandboxDomain, "/ \t@?#") || strings.HasPrefix(c.SandboxDomain, ".") {
		return c, fmt.Errorf("DREADNODE_SANDBOX_DOMAIN: want a domain, optionally with a port (sandboxes.example.com, localhost:8080), without scheme or path; got %q", c.SandboxDomain)
	}
	return c, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", name, v)
	}
	return n, nil
}

func envFloat(name string, def float64) (float64, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative number", name, v)
	}
	return n, nil
}

func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration such as 1s or 500ms", name, v)
	}
	return d, nil
}

// webhookConfig reads the DREADNODE_WEBHOOK_* variables.
func webhookConfig() (events.DeliveryConfig, error) {
	var c events.DeliveryConfig
	switch v := os.Getenv("DREADNODE_WEBHOOK_ALLOW_PRIVATE"); v {
	case "", "false":
	case "true":
		c.AllowPrivate = true
	default:
		return c, fmt.Errorf("DREADNODE_WEBHOOK_ALLOW_PRIVATE: must be true or false, got %q", v)
	}
	var err error
	if c.BackoffMax, err = envDuration("DREADNODE_WEBHOOK_BACKOFF_MAX", events.DefaultBackoffMax); err != nil {
		return c, err
	}
	if c.GiveUp, err = envDuration("DREADNODE_WEBHOOK_GIVE_UP", events.DefaultGiveUp); err != nil {
		return c, err
	}
	if c.ClaimHold, err = envDuration("DREADNODE_WEBHOOK_CLAIM_HOLD", events.DefaultClaimHold); err != nil {
		return c, err
	}
	if c.ClaimHold < 3*time.Second {
		return c, fmt.Errorf("DREADNODE_WEBHOOK_CLAIM_HOLD must be at least 3s (an attempt gets a third of it), got %s", c.ClaimHold)
	}
	if c.BackoffMax < time.Second || c.GiveUp < time.Minute {
		return c, fmt.Errorf("DREADNODE_WEBHOOK_BACKOFF_MAX must be at least 1s and DREADNODE_WEBHOOK_GIVE_UP at least 1m (got %s, %s)", c.BackoffMax, c.GiveUp)
	}
	return c, nil
}
