// Package config is the backend's environment, read in one place: every
// variable a backend process reads is a field of Backend (or of Agent, for
// the in-sandbox agent's binary), typed and with its default in the struct
// tag, parsed by github.com/caarlos0/env. Packages take the values from
// here; the README's configuration table lists the same variables (a test
// checks that they agree). Checks that need more than the type (ranges,
// combinations) stay with the package that owns the value: app.ConfigFromEnv
// for the backend's.
package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Backend is every variable of dreadnode-backend.
type Backend struct {
	Listen            string        `env:"DREADNODE_LISTEN" envDefault:"127.0.0.1:8080"`
	DataDir           string        `env:"DREADNODE_DATA_DIR" envDefault:".dreadnode"`
	DatabaseURL       string        `env:"DREADNODE_DATABASE_URL"` // default: DataDir/dreadnode.db
	Provider          string        `env:"DREADNODE_PROVIDER" envDefault:"docker"`
	BootstrapOrg      string        `env:"DREADNODE_BOOTSTRAP_ORG"`
	BootstrapKey      string        `env:"DREADNODE_BOOTSTRAP_API_KEY"`
	BootstrapCredits  float64       `env:"DREADNODE_BOOTSTRAP_CREDITS" envDefault:"1000"`
	AdminKey          string        `env:"DREADNODE_ADMIN_API_KEY"`
	MetricsListen     string        `env:"DREADNODE_METRICS_LISTEN"`
	MinTimeoutSec     int           `env:"DREADNODE_MIN_TIMEOUT_SEC" envDefault:"60"`
	ReconcileInterval time.Duration `env:"DREADNODE_RECONCILE_INTERVAL" envDefault:"1s"`
	WarmPoolSize      int           `env:"DREADNODE_WARM_POOL_SIZE" envDefault:"0"`
	TaskNetworkPool   int           `env:"DREADNODE_TASK_NETWORK_POOL" envDefault:"0"`
	CapacitySandboxes int           `env:"DREADNODE_CAPACITY_SANDBOXES" envDefault:"0"`
	CapacityCPU       int           `env:"DREADNODE_CAPACITY_CPU" envDefault:"0"`
	CapacityMemoryMB  int           `env:"DREADNODE_CAPACITY_MEMORY_MB" envDefault:"0"`
	MaxQueue          int           `env:"DREADNODE_MAX_QUEUE" envDefault:"1000"`
	LeaseTTL          time.Duration `env:"DREADNODE_LEASE_TTL" envDefault:"10s"`
	ReadBarrier       string        `env:"DREADNODE_READ_BARRIER"` // on (default) or off
	MaxBodyBytes      int           `env:"DREADNODE_MAX_BODY_BYTES" envDefault:"4294967296"`
	EventRetention    time.Duration `env:"DREADNODE_EVENT_RETENTION" envDefault:"168h"`
	TemplateProviders string        `env:"DREADNODE_TEMPLATE_PROVIDERS"` // gpu=e2b,local=docker
	AgentBinary       string        `env:"DREADNODE_AGENT_BINARY"`

	Catalog  Catalog
	Edge     E2BEdge
	Webhooks Webhooks
	Rates    RateLimits
	Billing  Billing
	Docker   Docker
	E2B      E2B
}

// Catalog is where the task catalog is read.
type Catalog struct {
	TasksDir string `env:"DREADNODE_TASKS_DIR" envDefault:"tasks"` // a :-separated list is accepted
}

// E2BEdge configures E2B's control plane served under /e2b.
type E2BEdge struct {
	SandboxDomain string `env:"DREADNODE_SANDBOX_DOMAIN" envDefault:"localhost"` // where sandbox traffic is routed
}

// Webhooks configures webhook deliveries.
type Webhooks struct {
	AllowPrivate string        `env:"DREADNODE_WEBHOOK_ALLOW_PRIVATE"` // true or false (default)
	BackoffMax   time.Duration `env:"DREADNODE_WEBHOOK_BACKOFF_MAX" envDefault:"1h"`
	GiveUp       time.Duration `env:"DREADNODE_WEBHOOK_GIVE_UP" envDefault:"24h"`
	ClaimHold    time.Duration `env:"DREADNODE_WEBHOOK_CLAIM_HOLD" envDefault:"30s"`
	MaxPerOrg    int           `env:"DREADNODE_WEBHOOK_MAX_PER_ORG" envDefault:"100"`
}

// RateLimits are the per-class rate limits: tokens per second (a number or
// "off") and the burst. Unset values take app's per-class defaults, so they
// are kept as text here and parsed there.
type RateLimits struct {
	Create            string `env:"DREADNODE_RATE_CREATE"`
	CreateBurst       string `env:"DREADNODE_RATE_CREATE_BURST"`
	Write             string `env:"DREADNODE_RATE_WRITE"`
	WriteBurst        string `env:"DREADNODE_RATE_WRITE_BURST"`
	Read              string `env:"DREADNODE_RATE_READ"`
	ReadBurst         string `env:"DREADNODE_RATE_READ_BURST"`
	Exec              string `env:"DREADNODE_RATE_EXEC"`
	ExecBurst         string `env:"DREADNODE_RATE_EXEC_BURST"`
	AuthFailures      string `env:"DREADNODE_RATE_AUTH_FAILURES"`
	AuthFailuresBurst string `env:"DREADNODE_RATE_AUTH_FAILURES_BURST"`
}

// Class returns the rate and burst texts of a class (create, write, read,
// exec, auth_failures) and their variables' names.
func (r RateLimits) Class(class string) (rate, burst, name string) {
	name = "DREADNODE_RATE_" + strings.ToUpper(class)
	switch class {
	case "create":
		return r.Create, r.CreateBurst, name
	case "write":
		return r.Write, r.WriteBurst, name
	case "read":
		return r.Read, r.ReadBurst, name
	case "exec":
		return r.Exec, r.ExecBurst, name
	case "auth_failures":
		return r.AuthFailures, r.AuthFailuresBurst, name
	}
	return "", "", name
}

// Billing configures credits.
type Billing struct {
	CreditRates    string        `env:"DREADNODE_CREDIT_RATES"` // billing.ParseRates
	SettleInterval time.Duration `env:"DREADNODE_SETTLE_INTERVAL" envDefault:"10s"`
}

// Docker configures the Docker provider.
type Docker struct {
	Host          string `env:"DOCKER_HOST"`
	Network       string `env:"DOCKER_NETWORK"`
	NetworkPool   string `env:"DOCKER_NETWORK_POOL" envDefault:"10.214.0.0/16"`
	Image         string `env:"DOCKER_RUNTIME_IMAGE"`
	Runtime       string `env:"DOCKER_SANDBOX_RUNTIME"`
	DiskLimitMB   int    `env:"DOCKER_DISK_LIMIT_MB" envDefault:"10240"`
	Egress        string `env:"DREADNODE_EGRESS"` // on (default) or off
	EgressPrivate string `env:"DREADNODE_EGRESS_ALLOW_PRIVATE"`
}

// E2B configures the E2B provider (values trimmed of spaces).
type E2B struct {
	APIKey        string `env:"E2B_API_KEY"`
	Domain        string `env:"E2B_DOMAIN"`
	APIURL        string `env:"E2B_API_URL"`
	WebhookURL    string `env:"E2B_WEBHOOK_URL"`
	WebhookSecret string `env:"E2B_WEBHOOK_SECRET"`
}

// Agent is every variable of the in-sandbox agent (dn-agent).
type Agent struct {
	Listen    string `env:"DN_AGENT_LISTEN"`     // default :49983
	MainUser  string `env:"DN_AGENT_MAIN_USER"`  // user of the main process
	Token     string `env:"DN_AGENT_TOKEN"`      // the access token itself, or
	TokenFile string `env:"DN_AGENT_TOKEN_FILE"` // a file holding it, or
	// TokenSHA256 is the hex SHA-256 of the token (the Docker provider's
	// way: what inspect shows does not give the token back).
	TokenSHA256 string `env:"DN_AGENT_TOKEN_SHA256"`
	ReadyFile   string `env:"DN_AGENT_READY_FILE"` // written once listening
	// "1": loopback listeners are re-exposed on the sandbox's addresses
	ExposeLoopback string `env:"DN_AGENT_EXPOSE_LOOPBACK"`
	// the user of requests that name none (agent.EnvDefaultUser)
	DefaultUser string `env:"DN_AGENT_DEFAULT_USER"`
	// a template's start and ready commands, run at every start (JSON)
	Start string `env:"DN_AGENT_START"`
	// the directory processes start in when a request names none
	DefaultWorkdir string `env:"DN_AGENT_DEFAULT_WORKDIR"`
}

// Load reads the backend's variables.
func Load() (Backend, error) { return Parse[Backend]() }

// Parse fills a T (Backend, one of its parts, or Agent) from the
// environment. An error names the variable and says what it must be.
func Parse[T any]() (T, error) {
	var v T
	err := env.ParseWithOptions(&v, env.Options{FuncMap: map[reflect.Type]env.ParserFunc{
		reflect.TypeFor[time.Duration](): func(s string) (any, error) {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%q is not a positive duration such as 1s or 500ms", s)
			}
			return d, nil
		},
		reflect.TypeFor[int](): func(s string) (any, error) {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not an integer", s)
			}
			return n, nil
		},
		reflect.TypeFor[float64](): func(s string) (any, error) {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%q is not a non-negative number", s)
			}
			return n, nil
		},
	}})
	if err != nil {
		return v, named[T](err)
	}
	if e, ok := any(&v).(interface{ trim() }); ok {
		e.trim()
	}
	return v, nil
}

func (b *Backend) trim() { b.E2B.trim() }

func (e *E2B) trim() {
	for _, s := range []*string{&e.APIKey, &e.Domain, &e.APIURL, &e.WebhookURL, &e.WebhookSecret} {
		*s = strings.TrimSpace(*s)
	}
}

// named turns the library's error (field names) into one naming the first
// variable that failed: "DREADNODE_LEASE_TTL: "ten" is not a positive …".
func named[T any](err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) || len(agg.Errors) == 0 {
		return err
	}
	var pe env.ParseError
	if !errors.As(agg.Errors[0], &pe) {
		return agg.Errors[0]
	}
	if name := varOf(reflect.TypeFor[T](), pe.Name); name != "" {
		return fmt.Errorf("%s: %w", name, pe.Err)
	}
	return fmt.Errorf("%s: %w", pe.Name, pe.Err)
}

// varOf is the variable of the field called field in t or its parts.
func varOf(t reflect.Type, field string) string {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == field {
			if v, ok := f.Tag.Lookup("env"); ok {
				return v
			}
		}
		if f.Type.Kind() == reflect.Struct {
			if v := varOf(f.Type, field); v != "" {
				return v
			}
		}
	}
	return ""
}

// Vars lists every variable of t (Backend or Agent) in field order, for
// the documentation test.
func Vars(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if v, ok := f.Tag.Lookup("env"); ok {
			out = append(out, v)
		} else if f.Type.Kind() == reflect.Struct {
			out = append(out, Vars(f.Type)...)
		}
	}
	return out
}
