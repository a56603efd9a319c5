package app

import (
	"strings"
	"testing"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/admission"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/billing"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/events"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/reconciler"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/tasks"
)

func TestConfigLeaseTTL(t *testing.T) {
	for _, c := range []struct {
		val  string
		want time.Duration
		err  string
	}{
		{"", 10 * time.Second, ""},
		{"3s", 3 * time.Second, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"100ms", 0, "at least 500ms"},
		{"ten", 0, "not a positive duration"},
		{"-1s", 0, "not a positive duration"},
	} {
		t.Setenv("DREADNODE_LEASE_TTL", c.val)
		cfg, err := ConfigFromEnv()
		switch {
		case c.err == "" && (err != nil || cfg.LeaseTTL != c.want):
			t.Errorf("DREADNODE_LEASE_TTL=%q: %v, %v; want %v", c.val, cfg.LeaseTTL, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), "DREADNODE_LEASE_TTL") || !strings.Contains(err.Error(), c.err)):
			t.Errorf("DREADNODE_LEASE_TTL=%q: error %v; want one naming the variable and saying %q", c.val, err, c.err)
		}
	}
}

func TestConfigRateLimits(t *testing.T) {
	cfg, err := ConfigFromEnv()
	if err != nil || cfg.Limits.Class["read"] != defaultRates["read"] || cfg.Limits.AuthFailures != defaultRates["auth_failures"] {
		t.Fatalf("defaults: %+v, %v", cfg.Limits, err)
	}
	t.Setenv("DREADNODE_RATE_READ", "5")
	t.Setenv("DREADNODE_RATE_READ_BURST", "7")
	t.Setenv("DREADNODE_RATE_CREATE", "off")
	cfg, err = ConfigFromEnv()
	if err != nil || cfg.Limits.Class["read"].PerSecond != 5 || cfg.Limits.Class["read"].Burst != 7 || cfg.Limits.Class["create"].PerSecond != 0 {
		t.Fatalf("DREADNODE_RATE_READ=5, _BURST=7, CREATE=off: %+v, %v", cfg.Limits, err)
	}
	for name, val := range map[string]string{"DREADNODE_RATE_EXEC": "fast", "DREADNODE_RATE_WRITE_BURST": "0"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, val)
			if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%s: %v, want an error naming it", name, val, err)
			}
		})
	}
}

func TestConfigEventsAndWebhooks(t *testing.T) {
	cfg, err := ConfigFromEnv()
	if err != nil || cfg.EventRetention != 7*24*time.Hour || cfg.Webhooks.AllowPrivate || cfg.Webhooks.GiveUp != 24*time.Hour || cfg.Webhooks.BackoffMax != time.Hour {
		t.Fatalf("defaults: %+v %v", cfg, err)
	}
	t.Setenv("DREADNODE_EVENT_RETENTION", "48h")
	t.Setenv("DREADNODE_WEBHOOK_ALLOW_PRIVATE", "true")
	t.Setenv("DREADNODE_WEBHOOK_GIVE_UP", "2h")
	if cfg, err = ConfigFromEnv(); err != nil || cfg.EventRetention != 48*time.Hour || !cfg.Webhooks.AllowPrivate || cfg.Webhooks.GiveUp != 2*time.Hour {
		t.Fatalf("set: %+v %v", cfg, err)
	}
	for name, val := range map[string]string{"DREADNODE_EVENT_RETENTION": "1s", "DREADNODE_WEBHOOK_ALLOW_PRIVATE": "yes", "DREADNODE_WEBHOOK_BACKOFF_MAX": "1ms"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(name, val)
			if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%s: %v", name, val, err)
			}
		})
	}
}

func TestConfigWebhookClaimHold(t *testing.T) {
	if cfg, err := ConfigFromEnv(); err != nil || cfg.Webhooks.ClaimHold != 30*time.Second {
		t.Fatalf("default: %s, %v", cfg.Webhooks.ClaimHold, err)
	}
	t.Setenv("DREADNODE_WEBHOOK_CLAIM_HOLD", "5s")
	if cfg, err := ConfigFromEnv(); err != nil || cfg.Webhooks.ClaimHold != 5*time.Second {
		t.Fatalf("5s: %s, %v", cfg.Webhooks.ClaimHold, err)
	}
	for _, v := range []string{"1s", "soon"} {
		t.Setenv("DREADNODE_WEBHOOK_CLAIM_HOLD", v)
		if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "DREADNODE_WEBHOOK_CLAIM_HOLD") {
			t.Fatalf("%s: %v", v, err)
		}
	}
}

func TestConfigMaxBodyBytes(t *testing.T) {
	if cfg, err := ConfigFromEnv(); err != nil || cfg.MaxBodyBytes != DefaultMaxBodyBytes {
		t.Fatalf("default: %d, %v", cfg.MaxBodyBytes, err)
	}
	t.Setenv("DREADNODE_MAX_BODY_BYTES", "1048576")
	if cfg, err := ConfigFromEnv(); err != nil || cfg.MaxBodyBytes != 1<<20 {
		t.Fatalf("1048576: %d, %v", cfg.MaxBodyBytes, err)
	}
	for _, v := range []string{"0", "big"} {
		t.Setenv("DREADNODE_MAX_BODY_BYTES", v)
		if _, err := ConfigFromEnv(); err == nil || !strings.Contains(err.Error(), "DREADNODE_MAX_BODY_BYTES") {
			t.Fatalf("%s: %v, want an error naming the variable", v, err)
		}
	}
}

func TestConfigSandboxDomain(t *testing.T) {
	for val, want := range map[string]string{"": "localhost", "localhost:8080": "localhost:8080", "sandboxes.example.com": "sandboxes.example.com",
		"https://sandboxes.example.com": "", "example.com/x": "", ".example.com": ""} {
		t.Setenv("DREADNODE_SANDBOX_DOMAIN", val)
		cfg, err := ConfigFromEnv()
		switch {
		case want != "" && (err != nil || cfg.SandboxDomain != want):
			t.Errorf("DREADNODE_SANDBOX_DOMAIN=%q: %q, %v; want %q", val, cfg.SandboxDomain, err, want)
		case want == "" && (err == nil || !strings.Contains(err.Error(), "DREADNODE_SANDBOX_DOMAIN")):
			t.Errorf("DREADNODE_SANDBOX_DOMAIN=%q: error %v; want one naming the variable", val, err)
		}
	}
}

// config.Backend's defaults (struct tags) are the packages' own defaults.
func TestConfigDefaultsAreThePackages(t *testing.T) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"DREADNODE_LEASE_TTL", cfg.LeaseTTL, reconciler.DefaultLeaseTTL},
		{"DREADNODE_MAX_QUEUE", cfg.MaxQueue, admission.DefaultMaxQueue},
		{"DREADNODE_EVENT_RETENTION", cfg.EventRetention, events.DefaultRetention},
		{"DREADNODE_WEBHOOK_BACKOFF_MAX", cfg.Webhooks.BackoffMax, events.DefaultBackoffMax},
		{"DREADNODE_WEBHOOK_GIVE_UP", cfg.Webhooks.GiveUp, events.DefaultGiveUp},
		{"DREADNODE_WEBHOOK_CLAIM_HOLD", cfg.Webhooks.ClaimHold, events.DefaultClaimHold},
		{"DREADNODE_MAX_BODY_BYTES", cfg.MaxBodyBytes, int64(DefaultMaxBodyBytes)},
		{"DREADNODE_BOOTSTRAP_CREDITS", cfg.BootstrapCredits, float64(DefaultBootstrapCredits)},
		{"DOCKER_DISK_LIMIT_MB", cfg.DockerDiskLimitMB, docker.DefaultDiskLimitMB},
		{"DOCKER_NETWORK_POOL", cfg.DockerNetworkPool, docker.DefaultNetworkPool},
		{"DREADNODE_SETTLE_INTERVAL", cfg.SettleInterval, billing.DefaultSettleInterval},
		{"DREADNODE_CREDIT_RATES", *cfg.CreditRates, billing.DefaultRates},
		{"DREADNODE_TASKS_DIR", cfg.TasksDir, tasks.DefaultCatalogDir},
	} {
		if c.got != c.want {
			t.Errorf("%s defaults to %v in config.Backend, %v in its package", c.name, c.got, c.want)
		}
	}
}

func TestConfigNetworkPool(t *testing.T) {
	for val, want := range map[string]string{"": docker.DefaultNetworkPool, "10.220.0.0/16": "10.220.0.0/16", "10.20.0.0/22": "10.20.0.0/22",
		"10.220.0.0/23": "", "nonsense": "", "fd00::/48": "", "10.213.4.0/22": "", "10.0.0.0/8": "", "172.20.0.0/16": "",
		"192.168.64.0/20": "", "127.0.0.0/16": "", "169.254.0.0/16": ""} {
		t.Setenv("DOCKER_NETWORK_POOL", val)
		cfg, err := ConfigFromEnv()
		switch {
		case want != "" && (err != nil || cfg.DockerNetworkPool != want):
			t.Errorf("DOCKER_NETWORK_POOL=%q: %q, %v; want %q", val, cfg.DockerNetworkPool, err, want)
		case want == "" && (err == nil || !strings.Contains(err.Error(), "DOCKER_NETWORK_POOL")):
			t.Errorf("DOCKER_NETWORK_POOL=%q: error %v; want one naming the variable", val, err)
		}
	}
}
