// Package docker implements compute.Provider on a local Docker Engine.
//
// Every sandbox is one container named dn-<RecordID>, labelled with the
// compute.Label* keys so the reconciler can adopt or sweep it after a crash.
// No port is published on the host: a template port's Endpoint is the
// container's address on its network, which the backend (on the host, or in
// a container on the host's network) dials directly: no host port bypasses
// the traffic router's token check.
//
// Networking: containers join the bridge network Config.Network (created on
// first use, labelled managed, inter-container traffic off, so no sandbox
// reaches another even on one bridge). A sandbox created with
// Network.AllowInternetAccess == false instead joins ONLY the internal network
// "<network>-isolated" (Internal: true, inter-container traffic disabled), and
// its default route is deleted right after start by a helper container
// sharing its network namespace (Docker 20.10 still installs one on internal
// networks; iptables drops the traffic, but a sandbox must not even see a
// route out). No exec into a sandbox is ever privileged. Such a sandbox has
// no Endpoints (nothing outside an internal network is meant to reach it):
// it is reachable through Exec, ReadFile and WriteFile only.
//
// Scope: several deployments (a developer's backend, test backends) may share
// one daemon, and each sweeps the orphans it finds. Every container therefore
// also carries compute.LabelDeployment=<Config.Scope>, and List, Watch and
// the warm pool only see containers of their own scope.
package docker

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/egress"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/templatebuild"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// Defaults of Config, matching DESIGN.md's backend process contract.
const (
	DefaultNetwork   = "dreadnode"
	DefaultBaseImage = "dreadnode/base:latest"
	BaseTemplate     = "base"
)

// Config configures the Docker provider. Zero values take the defaults.
type Config struct {
	// Host is the daemon address (DOCKER_HOST); "" uses the SDK default
	// (environment, then the local socket).
	Host string
	// Network is the bridge network sandboxes join (DOCKER_NETWORK).
	// Default: "dreadnode-<Scope>" (one per deployment, removed by Close
	// when no container uses it), or "dreadnode" without a Scope.
	Network string
	// BaseImage is the image of the "base" template (DOCKER_RUNTIME_IMAGE).
	BaseImage string
	// Templates maps a template id to its defaults. Default: "base" with
	// 1 CPU, 512 MB and port 8080.
	Templates map[string]compute.Template
	// Images maps a template id to its image. The "base" template defaults
	// to BaseImage; any other template without an entry uses its id as the
	// image reference.
	Images map[string]string
	// Runtime is the engine runtime of the default "base" template
	// (DOCKER_SANDBOX_RUNTIME, e.g. runsc for gVisor); "" is the engine's
	// default. Templates given in Templates name their own.
	Runtime string
	// NetworkPool is the IPv4 prefix the provider's own networks (Network
	// and its -isolated twin) take their subnets from, a /NetworkBits each
	// (DOCKER_NETWORK_POOL, default DefaultNetworkPool; subnet.go says why).
	// An existing network keeps the subnet it has.
	NetworkPool string
	// DiskLimitMB caps each container's writable layer (DOCKER_DISK_LIMIT_MB,
	// default DefaultDiskLimitMB; negative: no cap) where the storage driver
	// supports it; where it does not, a watchdog stops containers past it
	// (see disk.go, diskwatch.go).
	DiskLimitMB int
	// DiskWatchEvery is how often that watchdog measures writable layers
	// (default DefaultDiskWatchEvery).
	DiskWatchEvery time.Duration
	// Logger receives what the provider does on its own (the disk
	// watchdog's stops); nil discards it.
	Logger *slog.Logger
	// WarmPoolSize > 0 keeps that many started containers per template ready
	// to be claimed by Create (see pool.go).
	WarmPoolSize int
	// AgentBinary is the path of the sandbox agent's static Linux build
	// (DREADNODE_AGENT_BINARY); when set, it is injected into every
	// container (see agent.go). "" leaves containers as their image makes them.
	AgentBinary string
	// AgentTokenSeed is the deployment's secret the agents' tokens are
	// derived from (agenttoken.go; the backend passes its database's), so
	// that every backend of the deployment reaches every agent; "" is a
	// random one of this process.
	AgentTokenSeed string
	// Scope names the deployment owning the containers (the backend passes
	// its database's deployment id). List, Watch and the pool see only their
	// own scope, so backends sharing one engine never sweep each other's
	// containers. Default: Network.
	Scope string
	// Egress configures the host firewall rules (egress.go).
	Egress EgressConfig

	egressRunner egress.Runner // tests: nil runs nft
	// networkBits is the size of the provider's networks (tests: smaller
	// ones, so that a test binary's many networks fit a pool; 0: NetworkBits).
	networkBits int
	// egressNameservers are the resolvers sandbox bridges reach on port
	// 53 (tests: a resolver of their own; nil: the host's, hostResolvers).
	egressNameservers []netip.Addr
}

// networkOf names the sandbox network of a deployment: its own, so that
// deployments sharing an engine never share a bridge (or its name).
func networkOf(scope string) string {
	if scope == "" {
		return DefaultNetwork
	}
	return DefaultNetwork + "-" + scope
}

// Provider is the Docker implementation of compute.Provider and
// compute.Watcher. It is safe for concurrent use.
type Provider struct {
	cli *client.Client
	cfg Config

	commits commitPauses // containers paused for a commit (commit_marker.go)

	tmplMu    sync.RWMutex
	templates map[string]compute.Template
	images    map[string]string

	netMu   sync.Mutex
	netIDs  map[string]string // network name -> id, filled on first use
	netPool netip.Prefix      // Config.NetworkPool, parsed
	ownNet  bool              // the network name is derived from Scope: Close removes it when unused
	// releaseDeployment drops the lock that tells other backends this
	// deployment runs (liveness.go).
	releaseDeployment func()

	cpuMu      sync.Mutex
	cpuSamples map[string]cpuSample     // last CPU reading per instance (Metrics)
	disk       sampler[uint64]          // writable-layer sizes, sampled off the request path (Metrics)
	metrics    sampler[compute.Metrics] // latest engine readings per instance (Metrics)
	volBytes   volBytesCache            // the org volumes' disk use, measured at most once a minute (volumes.go)

	diskMu     sync.Mutex
	diskKnown  *bool  // whether the engine caps writable layers; nil until asked
	diskDriver string // the engine's storage driver, read with diskKnown
	diskStop   chan struct{}
	diskRounds atomic.Int64 // rounds of the disk watchdog done (tests wait for them)
	egress     egressState  // the host firewall (egress.go)

	agent     *agentHost   // nil unless Config.AgentBinary is set
	envds     envdCache    // where each container's agent listens (envd.go)
	agentKey  tokenKey     // derives each container's agent token (agenttoken.go)
	agentHTTP *http.Client // to the agents in the sandboxes (exec.go)
	pool      *pool        // nil unless Config.WarmPoolSize > 0
	closeOnce sync.Once

	tbOnce sync.Once
	tb     *templatebuild.Builder // template builds (templatebuild.go)
}

var (
	_ compute.Provider = (*Provider)(nil)
	_ compute.Watcher  = (*Provider)(nil)
)

// New returns a provider for cfg. It only asks the daemon for its API version
// (an unreachable daemon is not an error here; Ping reports it), and starts
// filling the warm pool in the background.
func New(cfg Config) (*Provider, error) {
	ownNet := cfg.Network == "" && cfg.Scope != ""
	if cfg.Network == "" {
		cfg.Network = networkOf(cfg.Scope)
	}
	if cfg.Scope == "" {
		cfg.Scope = cfg.Network
	}
	if cfg.BaseImage == "" {
		cfg.BaseImage = DefaultBaseImage
	}
	if cfg.DiskLimitMB == 0 {
		cfg.DiskLimitMB = DefaultDiskLimitMB
	}
	if cfg.DiskWatchEvery <= 0 {
		cfg.DiskWatchEvery = DefaultDiskWatchEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Templates) == 0 {
		cfg.Templates = map[string]compute.Template{
			BaseTemplate: {ID: BaseTemplate, CPUCount: 1, MemoryMB: 512, Ports: []int{8080}, Runtime: cfg.Runtime},
		}
	}
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	if cfg.NetworkPool == "" {
		cfg.NetworkPool = DefaultNetworkPool
	}
	netPool, err := parseNetworkPool(cfg.NetworkPool, cmp.Or(cfg.networkBits, NetworkBits))
	if err != nil {
		return nil, compute.Errorf(compute.KindInvalid, "new", err, "NetworkPool: %v", err)
	}
	bin, err := loadAgent(cfg.AgentBinary)
	if err != nil {
		return nil, compute.Errorf(compute.KindInvalid, "new", err, "%v", err)
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, compute.Errorf(compute.KindInvalid, "new", err, "invalid Docker configuration: %v", err)
	}
	// Negotiate the API version now: the SDK's lazy negotiation on first use
	// races with concurrent first calls (it writes the version some request
	// paths read unlocked). If the daemon is down, negotiation stays lazy.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	cli.NegotiateAPIVersion(ctx)
	cancel()
	p := &Provider{
		cli:        cli,
		cfg:        cfg,
		templates:  map[string]compute.Template{},
		images:     map[string]string{},
		netIDs:     map[string]string{},
		netPool:    netPool,
		ownNet:     ownNet,
		cpuSamples: map[string]cpuSample{},
		agentHTTP:  newAgentHTTP(),
		diskStop:   make(chan struct{}),
		agentKey:   newTokenKey(cfg.AgentTokenSeed),
	}
	if bin != nil {
		p.agent = &agentHost{agentBinary: bin, cli: cli, scope: cfg.Scope}
	}
	for id, t := range cfg.Templates {
		t.ID = id
		p.templates[id] = t
	}
	maps.Copy(p.images, cfg.Images)
	if _, ok := p.images[BaseTemplate]; !ok {
		p.images[BaseTemplate] = cfg.BaseImage
	}
	p.initEgress()
	p.releaseDeployment = holdDeployment(cfg.Scope)
	if cfg.WarmPoolSize > 0 {
		p.pool = startPool(p, cfg.WarmPoolSize)
	}
	if cfg.DiskLimitMB > 0 {
		go p.watchDisk(p.diskStop)
	}
	return p, nil
}

// Close stops refilling the warm pool, removes its unclaimed containers and
// releases the client. Claimed containers (sandboxes) are left alone.
func (p *Provider) Close() error {
	var err error
	p.closeOnce.Do(func() {
		close(p.diskStop)
		if p.pool != nil {
			p.pool.close()
		}
		if p.ownNet {
			p.removeNetworks()
		}
		p.releaseDeployment()
		if p.egress.dns != nil {
			p.egress.dns.Close()
		}
		err = p.cli.Close()
	})
	return err
}

// CheckRuntimes returns a *hardening.RuntimeError for the first template
// asking for a runtime the engine does not offer (the backend checks at
// start-up, so a misconfigured runtime is said at once, not at each create).
func (p *Provider) CheckRuntimes(ctx context.Context) error {
	ts, _ := p.Templates(ctx)
	for _, t := range ts {
		if err := hardening.CheckRuntime(ctx, p.cli, "template "+t.ID+": runtime", t.Runtime); err != nil {
			return err
		}
	}
	return nil
}

// Name implements compute.Provider.
func (p *Provider) Name() string { return "docker" }

// Ping implements compute.Provider.
func (p *Provider) Ping(ctx context.Context) error {
	if _, err := p.cli.Ping(ctx); err != nil {
		return classify("ping", err)
	}
	return p.egressReady()
}

// Templates implements compute.Provider, sorted by id.
func (p *Provider) Templates(ctx context.Context) ([]compute.Template, error) {
	p.tmplMu.RLock()
	defer p.tmplMu.RUnlock()
	out := make([]compute.Template, 0, len(p.templates))
	for _, id := range slices.Sorted(maps.Keys(p.templates)) {
		t := p.templates[id]
		t.Ports = slices.Clone(t.Ports)
		out = append(out, t)
	}
	return out, nil
}

// RegisterTemplate adds or replaces a template at run time (e.g. an image the
// task service built). Templates registered after New get no warm pool.
func (p *Provider) RegisterTemplate(t compute.Template, image string) {
	p.tmplMu.Lock()
	defer p.tmplMu.Unlock()
	t.Ports = slices.Clone(t.Ports)
	p.templates[t.ID] = t
	p.images[t.ID] = image
}

// template resolves a template id ("" means base) to its defaults and image.
func (p *Provider) template(id string) (compute.Template, string, bool) {
	if id == "" {
		id = BaseTemplate
	}
	p.tmplMu.RLock()
	defer p.tmplMu.RUnlock()
	t, ok := p.templates[id]
	if !ok {
		return compute.Template{}, "", false
	}
	image := p.images[id]
	if image == "" {
		image = id
	}
	return t, image, true
}

// Docker-side naming and labels private to this provider.
const (
	namePrefix    = "dn-"
	poolPrefix    = "dn-pool-"
	metaPrefix    = "dev.dreadnode.meta."
	labelTemplate = "dev.dreadnode.template"
	labelScope    = compute.LabelDeployment // Config.Scope of the deployment that owns the container
	// labelSourceImage, on an image made by Commit, names the image whose
	// entrypoint, command and user its containers run (see sourceImage).
	labelSourceImage = "dev.dreadnode.source-image"
	labelNetwork     = "dev.dreadnode.network" // "isolated" when internet access is cut
	labelPool        = "dev.dreadnode.pool"    // template of a warm-pool container
	labelPoolBy      = "dev.dreadnode.pool-by" // the process whose pool made it (pool.owner)
	isolatedValue    = "isolated"
	isolatedSuffix   = "-isolated"           // the internal network's name after Config.Network
	labelPorts       = "dev.dreadnode.ports" // the template ports the router may reach, e.g. "8080,3000"
)

func containerName(recordID string) string { return namePrefix + recordID }
