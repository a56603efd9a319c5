// Package app wires the backend together (database, provider, reconciler,
// HTTP routes) from its configuration; the binary and the tests both use it.
package app

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/api"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/e2b"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/multi"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/config"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
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
	ObserveEvery time.Duration
	// ImageGrace and ImageSweepEvery are the orphan image sweep's
	// (reconciler.Config; defaults 10 minutes and a minute); tests shorten
	// them to see an orphaned image go.
	ImageGrace      time.Duration
	ImageSweepEvery time.Duration
	WarmPoolSize    int
	// TaskNetworkPool (DREADNODE_TASK_NETWORK_POOL) is how many task
	// environment networks Docker keeps made ahead (docker.GroupConfig.NetworkPool).
	TaskNetworkPool int
	DockerHost      string
	DockerNetwork   string
	DockerImage     string
	// DockerNetworkPool (DOCKER_NETWORK_POOL) is the IPv4 range the
	// sandboxes' bridges take their subnets from, a /22 each.
	DockerNetworkPool string
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
	// E2B is the E2B provider's configuration (E2B_*); nil is its zero
	// value (embedding and tests set it).
	E2B *e2b.Config
	// CreditRates (DREADNODE_CREDIT_RATES) prices the ledger; nil is
	// billing.DefaultRates. SettleInterval (DREADNODE_SETTLE_INTERVAL) is the
	// settle loop's period; 0 is billing's default.
	CreditRates    *billing.Rates
	SettleInterval time.Duration
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
	// (default 24h), DREADNODE_WEBHOOK_CLAIM_HOLD (default 30s),
	// DREADNODE_WEBHOOK_MAX_PER_ORG (default 100).
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

// ConfigFromEnv reads the DREADNODE_* and provider variables (config.Backend
// has them all, typed, with their defaults) and checks what their types do
// not: ranges and combinations.
func ConfigFromEnv() (Config, error) {
	e, err := config.Load()
	if err != nil {
		return Config{}, err
	}
	c := Config{
		Listen:            e.Listen,
		DataDir:           e.DataDir,
		DatabaseURL:       e.DatabaseURL,
		TasksDir:          e.Catalog.TasksDir,
		Provider:          e.Provider,
		BootstrapOrg:      e.BootstrapOrg,
		BootstrapKey:      e.BootstrapKey,
		BootstrapCredits:  e.BootstrapCredits,
		AdminKey:          e.AdminKey,
		MetricsListen:     e.MetricsListen,
		MinTimeoutSec:     e.MinTimeoutSec,
		WarmPoolSize:      e.WarmPoolSize,
		TaskNetworkPool:   e.TaskNetworkPool,
		ReconcileInterval: e.ReconcileInterval,
		LeaseTTL:          e.LeaseTTL,
		EventRetention:    e.EventRetention,
		MaxQueue:          e.MaxQueue,
		DockerHost:        e.Docker.Host,
		DockerNetwork:     e.Docker.Network,
		DockerImage:       e.Docker.Image,
		DockerNetworkPool: e.Docker.NetworkPool,
		DockerRuntime:     e.Docker.Runtime,
		DockerDiskLimitMB: e.Docker.DiskLimitMB,
		AgentBinary:       e.AgentBinary,
		SandboxDomain:     e.Edge.SandboxDomain,
		MaxBodyBytes:      int64(e.MaxBodyBytes),
	}
	ec := e2b.ConfigFrom(e.E2B)
	c.E2B = &ec
	c.SettleInterval = e.Billing.SettleInterval
	rates, err := billing.ParseRates(e.Billing.CreditRates)
	if err != nil {
		return c, err
	}
	c.CreditRates = &rates
	if c.DatabaseURL == "" {
		c.DatabaseURL = filepath.Join(c.DataDir, "dreadnode.db")
	}
	if c.DockerEgress, err = docker.EgressConfigFrom(e.Docker.Egress, e.Docker.EgressPrivate); err != nil {
		return c, err
	}
	if c.MinTimeoutSec < 1 || c.MinTimeoutSec > 60 {
		return c, fmt.Errorf("DREADNODE_MIN_TIMEOUT_SEC: must be between 1 and 60, got %d", c.MinTimeoutSec)
	}
	if err := checkNetworkPool(c.DockerNetworkPool); err != nil {
		return c, fmt.Errorf("DOCKER_NETWORK_POOL: %w", err)
	}
	if c.DockerDiskLimitMB < 0 {
		return c, fmt.Errorf("DOCKER_DISK_LIMIT_MB: must be 0 (no cap) or more, got %d", c.DockerDiskLimitMB)
	}
	if c.LeaseTTL < minLeaseTTL {
		return c, fmt.Errorf("DREADNODE_LEASE_TTL: must be at least %s (leases are renewed every third of it), got %s", minLeaseTTL, c.LeaseTTL)
	}
	if c.EventRetention < time.Minute {
		return c, fmt.Errorf("DREADNODE_EVENT_RETENTION: must be at least 1m, got %s", c.EventRetention)
	}
	if c.Webhooks, err = webhookConfig(e.Webhooks); err != nil {
		return c, err
	}
	if c.Capacity, err = capacityConfig(e); err != nil {
		return c, err
	}
	if c.MaxQueue < 1 {
		return c, fmt.Errorf("DREADNODE_MAX_QUEUE: must be 1 or more, got %d", c.MaxQueue)
	}
	switch v := e.ReadBarrier; v {
	case "", "on":
	case "off":
		c.NoReadBarrier = true
	default:
		return c, fmt.Errorf("DREADNODE_READ_BARRIER: must be on (the default) or off, got %q", v)
	}
	if c.MaxBodyBytes < 1 {
		return c, fmt.Errorf("DREADNODE_MAX_BODY_BYTES: must be 1 or more, got %d", c.MaxBodyBytes)
	}
	if c.Limits, err = rateLimitsFrom(e.Rates); err != nil {
		return c, err
	}
	if c.TemplateProviders, err = multi.ParseRoutes(e.TemplateProviders); err != nil {
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

// parseInt and parseFloat read a value kept as text in config (unset: def).
func parseInt(name, v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", name, v)
	}
	return n, nil
}

func parseFloat(name, v string, def float64) (float64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a non-negative number", name, v)
	}
	return n, nil
}

// webhookConfig checks the DREADNODE_WEBHOOK_* variables.
func webhookConfig(e config.Webhooks) (events.DeliveryConfig, error) {
	c := events.DeliveryConfig{BackoffMax: e.BackoffMax, GiveUp: e.GiveUp, ClaimHold: e.ClaimHold, MaxPerOrg: e.MaxPerOrg}
	switch v := e.AllowPrivate; v {
	case "", "false":
	case "true":
		c.AllowPrivate = true
	default:
		return c, fmt.Errorf("DREADNODE_WEBHOOK_ALLOW_PRIVATE: must be true or false, got %q", v)
	}
	if c.ClaimHold < 3*time.Second {
		return c, fmt.Errorf("DREADNODE_WEBHOOK_CLAIM_HOLD must be at least 3s (an attempt gets a third of it), got %s", c.ClaimHold)
	}
	if c.MaxPerOrg < 1 {
		return c, fmt.Errorf("DREADNODE_WEBHOOK_MAX_PER_ORG must be at least 1 (webhooks an organization may have), got %d", c.MaxPerOrg)
	}
	if c.BackoffMax < time.Second || c.GiveUp < time.Minute {
		return c, fmt.Errorf("DREADNODE_WEBHOOK_BACKOFF_MAX must be at least 1s and DREADNODE_WEBHOOK_GIVE_UP at least 1m (got %s, %s)", c.BackoffMax, c.GiveUp)
	}
	return c, nil
}

// checkNetworkPool refuses a sandbox network pool the provider could not
// use, or one that shares addresses with the task environments' pool (the
// two would take each other's subnets) or with Docker's default address
// pools (a network made without a subnet could then take the range,
// whoever makes it).
func checkNetworkPool(s string) error {
	pool, err := docker.ParseNetworkPool(s)
	if err != nil {
		return err
	}
	others := []struct{ name, prefix string }{
		{"task environments' pool", docker.DefaultSubnetPool},
		{"Docker's default address pools", "192.168.0.0/16"},
		{"loopback range", "127.0.0.0/8"},
		{"link-local range", "169.254.0.0/16"},
	}
	for i := 17; i <= 31; i++ { // Docker's other default pools, 172.17–172.31/16
		others = append(others, struct{ name, prefix string }{"Docker's default address pools", fmt.Sprintf("172.%d.0.0/16", i)})
	}
	for _, other := range others {
		if o := netip.MustParsePrefix(other.prefix); pool.Overlaps(o) {
			return fmt.Errorf("%s overlaps the %s (%s); choose a range outside it, such as %s", pool, other.name, o, docker.DefaultNetworkPool)
		}
	}
	return nil
}
