// Groups (this file and group_*.go) implements compute.GroupProvider on the
// Docker engine, for task environments: it builds the task's images (cached
// by content hash), gives each group its own network, starts the services
// in dependency order, waits for them to be healthy, and pauses, executes in
// and removes them. Everything it creates carries labels naming the group,
// its ledger record, its org and the owning backend, so a restarted backend
// adopts or removes it.
package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/notify"
)

// LabelHash is on built images: the hash of the build inputs.
const LabelHash = "dev.dreadnode.content-hash"

// DefaultSubnetPool is where group networks get their subnets from.
const DefaultSubnetPool = "10.213.0.0/16"

// GroupConfig configures Groups.
type GroupConfig struct {
	// Owner scopes every resource: only resources labelled with it are ever
	// adopted or garbage-collected, so several backends (or tests) can share
	// one Docker engine.
	Owner  string
	Logger *slog.Logger
	// SubnetPool is an IPv4 prefix carved into /26 networks, one per
	// environment (default DefaultSubnetPool). Explicit subnets keep many
	// environments from exhausting Docker's default address pools.
	SubnetPool string
	// BuildTimeout bounds one image build (default 10 minutes).
	BuildTimeout time.Duration
	// ServiceLimits apply to each limit a service's compose file leaves
	// unset (a zero field: hardening.DefaultServiceLimits's).
	ServiceLimits hardening.Limits
	// FilterNetwork, when set, puts an environment network under the
	// host's egress rules before any service joins it: its services reach
	// each other and, beyond the network, only allowOut (the task's
	// network.allowOut). Its error fails the environment rather than run it
	// unfiltered.
	FilterNetwork func(ctx context.Context, networkID string, allowOut []string) error
	// BuildNetwork returns the network a task's Dockerfile build runs its
	// steps on. Nil: the sandboxes', under the egress baseline (return
	// "none" for no network at all).
	BuildNetwork func(ctx context.Context) (string, error)
	// NetworkPool is how many environment networks are kept made ahead
	// of time, under egress rules that let nothing beyond their bridge
	// (group_netpool.go); 0 makes each environment's network as it
	// starts. The pool fills after the first environment asks for one.
	NetworkPool int
}

// Groups is the Docker compute.GroupProvider. It is safe for concurrent use.
type Groups struct {
	cli       *client.Client // the provider's: Groups never open one of their own
	owner     string
	log       *slog.Logger
	pool      netip.Prefix
	buildTO   time.Duration
	limits    hardening.Limits // defaults of a service's limits
	filter    func(ctx context.Context, networkID string, allowOut []string) error
	buildNet  func(ctx context.Context) (string, error) // nil: builds get no network
	agent     *agentHost                                // the provider's: nil without Config.AgentBinary
	agentHTTP *http.Client                              // to the services' agents
	agentKey  tokenKey                                  // derives each service's agent token (agenttoken.go)
	// storageOpt caps a service's writable layer (disk.go), as the
	// provider caps a sandbox's.
	storageOpt func(context.Context) map[string]string

	ctx    context.Context // builds outlive the environment that started them
	cancel context.CancelFunc

	mu       sync.Mutex
	builds   map[string]*buildCall
	reserved map[netip.Prefix]bool
	netPool  *netPool // nil: no pool (GroupConfig.NetworkPool)

	buildCount atomic.Int64
	events     notify.Hub
	watching   atomic.Bool
}

var _ compute.GroupProvider = (*Groups)(nil)

// Groups returns the groups of opts.Owner on this provider: its Docker
// client (closing the groups leaves it open), its agent and agent token key
// (one deployment, one key), its writable-layer cap. A caller without a
// provider makes one (New) and closes it after the groups.
func (p *Provider) Groups(opts GroupConfig) (*Groups, error) {
	if opts.Owner == "" {
		return nil, errors.New("docker groups: Owner is required")
	}
	if opts.BuildNetwork == nil {
		// Build steps get the sandboxes' network: its egress baseline (no
		// host, link-local or private range; none with DREADNODE_EGRESS=off,
		// as for sandboxes) and no reach to any sandbox.
		opts.BuildNetwork = func(ctx context.Context) (string, error) {
			return p.ensureNetwork(ctx, p.networkName(false), false)
		}
	}
	e := &Groups{cli: p.cli, owner: opts.Owner, agentKey: p.agentKey, log: opts.Logger, buildTO: opts.BuildTimeout, filter: opts.FilterNetwork,
		buildNet: opts.BuildNetwork, agent: p.agent, agentHTTP: p.agentHTTP, builds: map[string]*buildCall{}, reserved: map[netip.Prefix]bool{},
		// services' writable layers capped as sandboxes' are (and watched where they cannot be)
		storageOpt: p.storageOpt}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	d, l := hardening.DefaultServiceLimits, opts.ServiceLimits
	e.limits = hardening.Limits{MemoryBytes: cmp.Or(l.MemoryBytes, d.MemoryBytes), NanoCPUs: cmp.Or(l.NanoCPUs, d.NanoCPUs), Pids: cmp.Or(l.Pids, d.Pids)}
	if e.buildTO <= 0 {
		e.buildTO = 10 * time.Minute
	}
	pool := cmp.Or(opts.SubnetPool, DefaultSubnetPool)
	prefix, err := netip.ParsePrefix(pool)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 26 {
		return nil, fmt.Errorf("docker groups: subnet pool %q must be an IPv4 prefix of /26 or larger", pool)
	}
	e.pool = prefix.Masked()
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.netPool = newNetPool(opts.NetworkPool)
	e.Negotiate(context.Background())
	return e, nil
}

// Negotiate settles the API version with the daemon before concurrent use
// (the SDK's lazy negotiation races with its event stream goroutine). It is
// a no-op once done or when the daemon does not answer.
func (e *Groups) Negotiate(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.cli.NegotiateAPIVersion(ctx)
}

// Close stops running builds; the client is the provider's, which closes it.
func (e *Groups) Close() error {
	e.cancel()
	e.closePool()
	return nil
}

// Client is the Docker client in use.
func (e *Groups) Client() *client.Client { return e.cli }

// Owner is the owner label value.
func (e *Groups) Owner() string { return e.owner }

// Builds is the number of image builds these Groups ran (cache hits excluded).
func (e *Groups) Builds() int64 { return e.buildCount.Load() }

// Ping checks the Docker engine answers.
func (e *Groups) Ping(ctx context.Context) error {
	_, err := e.cli.Ping(ctx)
	return err
}

// GroupContainerName is the name of service's container in group id.
func GroupContainerName(id, service string) string { return "dn-" + id + "-" + service }

func (e *Groups) labels(t compute.GroupTarget, service string) map[string]string {
	l := map[string]string{
		compute.LabelManaged:    "true",
		compute.LabelRecord:     t.RecordID,
		compute.LabelOrg:        t.OrgID,
		compute.LabelKind:       "task",
		compute.LabelGroup:      t.ID,
		compute.LabelGroupOwner: e.owner,
		compute.LabelTask:       t.TaskRef,
		// The owner is the deployment (tasks.New): the label every
		// container and network of a deployment carries (README).
		compute.LabelDeployment: e.owner,
	}
	if service != "" {
		l[compute.LabelService] = service
	}
	return l
}

func (e *Groups) envFilter(envID string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", compute.LabelGroupOwner+"="+e.owner))
	if envID != "" {
		f.Add("label", compute.LabelGroup+"="+envID)
	}
	return f
}

func perr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var pe *compute.ProviderError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &compute.ProviderError{Op: fmt.Sprintf(format, args...), Err: err}
}

// Snapshot lists the owner's containers and networks.
func (e *Groups) Snapshot(ctx context.Context) (*compute.GroupSnapshot, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter("")})
	if err != nil {
		return nil, perr(err, "listing containers")
	}
	nets, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: e.envFilter("")})
	if err != nil {
		return nil, perr(err, "listing networks")
	}
	s := &compute.GroupSnapshot{Containers: map[string][]compute.GroupMember{}, Networks: map[string][]string{}}
	for _, c := range cs {
		env := c.Labels[compute.LabelGroup]
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		s.Containers[env] = append(s.Containers[env], compute.GroupMember{ID: c.ID, Name: name, GroupID: env,
			Service: c.Labels[compute.LabelService], State: string(c.State), Status: c.Status, Image: c.Image})
	}
	for _, n := range nets {
		env := n.Labels[compute.LabelGroup]
		s.Networks[env] = append(s.Networks[env], n.ID)
	}
	return s, nil
}

// Remove deletes every container and network of environment envID. Missing
// resources are not an error; it is safe to call repeatedly.
func (e *Groups) Remove(ctx context.Context, envID string) error {
	_, err := e.RemoveCount(ctx, envID)
	return err
}

// RemoveCount is Remove, also returning how many containers and networks
// it found to remove.
func (e *Groups) RemoveCount(ctx context.Context, envID string) (int, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(envID)})
	if err != nil {
		return 0, perr(err, "listing the environment's containers")
	}
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.State == container.StatePaused {
				_ = e.cli.ContainerUnpause(ctx, c.ID)
			}
			if err := removeContainer(ctx, e.cli, c.ID); err != nil && !removing(err) {
				mu.Lock()
				errs = append(errs, perr(err, "removing container %s", strings.TrimPrefix(firstName(c.Names), "/")))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return len(cs), errors.Join(errs...)
	}
	n, err := e.removeNetworks(ctx, envID)
	if err != nil {
		return len(cs) + n, err
	}
	// A pooled network the environment ran on (group_netpool.go): named by
	// its containers, or only claimed when none was made yet.
	pooled := map[string]bool{}
	for _, c := range cs {
		if name := c.Labels[labelGroupNet]; strings.HasPrefix(name, poolNetPrefix) {
			pooled[name] = true
		}
	}
	if c, ok := e.claimedNetwork(envID); ok {
		pooled[c.name] = true
	}
	for name := range pooled {
		net, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
		if errdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return len(cs) + n, perr(err, "inspecting network %s", name)
		}
		if net.Labels[labelNetPool] == "" || net.Labels[compute.LabelDeployment] != e.owner {
			continue // not one of the deployment's pooled networks: never ours to remove
		}
		e.removePooled(pooledNet{id: net.ID, name: name})
		n++
	}
	e.forgetClaim(envID)
	return len(cs) + n, nil
}

// RemoveAll deletes every container and network of this owner,
// whatever their environment (test teardown of a throw-away database).
func (e *Groups) RemoveAll(ctx context.Context) error {
	snap, err := e.Snapshot(ctx)
	if err != nil {
		return err
	}
	envs := map[string]bool{}
	for env := range snap.Containers {
		envs[env] = true
	}
	for env := range snap.Networks {
		envs[env] = true
	}
	var errs []error
	for env := range envs {
		if _, err := e.RemoveCount(ctx, env); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *Groups) removeNetworks(ctx context.Context, envID string) (int, error) {
	nets, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: e.envFilter(envID)})
	if err != nil {
		return 0, perr(err, "listing the environment's networks")
	}
	for _, n := range nets {
		var err error
		// A container removed a moment ago may still hold an endpoint.
		for attempt := 0; attempt < 20; attempt++ {
			err = e.cli.NetworkRemove(ctx, n.ID)
			if err == nil || errdefs.IsNotFound(err) {
				err = nil
				break
			}
			if !strings.Contains(err.Error(), "active endpoints") {
				break
			}
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return 0, ctx.Err()
			}
		}
		if err != nil {
			return 0, perr(err, "removing network %s", n.Name)
		}
	}
	return len(nets), nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Pause pauses every running container of the environment.
func (e *Groups) Pause(ctx context.Context, envID string) error {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(envID)})
	if err != nil {
		return perr(err, "listing the environment's containers")
	}
	var done []string
	for _, c := range cs {
		if c.State != container.StateRunning {
			continue
		}
		if err := pauseContainer(ctx, e.cli, c.ID); err != nil {
			for _, id := range done { // all or nothing
				_ = e.cli.ContainerUnpause(context.WithoutCancel(ctx), id)
			}
			return perr(err, "pausing service %q", c.Labels[compute.LabelService])
		}
		done = append(done, c.ID)
	}
	return nil
}

// Unpause resumes every paused container of the environment.
func (e *Groups) Unpause(ctx context.Context, envID string) error {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(envID)})
	if err != nil {
		return perr(err, "listing the environment's containers")
	}
	for _, c := range cs {
		if c.State != container.StatePaused {
			continue
		}
		if err := e.cli.ContainerUnpause(ctx, c.ID); err != nil {
			return perr(err, "resuming service %q", c.Labels[compute.LabelService])
		}
	}
	return nil
}

// Watch follows the Docker event stream for the owner's containers and wakes
// whoever waits on the environment concerned (Bring waits on them). It returns when
// ctx is done, reconnecting after errors.
func (e *Groups) Watch(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		f := e.envFilter("")
		f.Add("type", string(events.ContainerEventType))
		msgs, errs := e.cli.Events(ctx, events.ListOptions{Filters: f})
		e.watching.Store(true)
	loop:
		for {
			select {
			case <-ctx.Done():
				break loop
			case m := <-msgs:
				backoff = 100 * time.Millisecond
				if env := m.Actor.Attributes[compute.LabelGroup]; env != "" {
					e.events.Notify(env)
				}
			case err := <-errs:
				if ctx.Err() == nil {
					e.log.Warn("docker event stream ended; reconnecting", "error", err)
				}
				break loop
			}
		}
		e.watching.Store(false)
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// CleanupGroups removes every container and network of owner's groups on
// the daemon at host ("" the environment's), without a database: for tests
// that throw their backend and database away (a live backend cleans up
// after itself).
func CleanupGroups(ctx context.Context, host, owner string) error {
	// A provider touching nothing else: no firewall, no disk watchdog, and
	// a network of its own name (never created here) so that Close removes
	// no deployment's network.
	p, err := New(Config{Host: host, Scope: owner, Network: networkOf(owner), Egress: EgressConfig{Off: true}, DiskLimitMB: -1})
	if err != nil {
		return err
	}
	defer p.Close()
	g, err := p.Groups(GroupConfig{Owner: owner})
	if err != nil {
		return err
	}
	defer g.Close()
	return g.RemoveAll(ctx)
}
