// Package compose runs a task's compose project on the Docker engine with the
// Docker SDK: it builds the task's images (cached by content hash), gives each
// environment its own network, starts the services in dependency order,
// waits for them to be healthy, and pauses, executes in and removes them.
// Everything it creates carries labels naming the environment, its ledger
// record, its org and the owning backend, so a restarted backend adopts or
// removes it.
package compose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Labels this package sets besides the compute.Label* keys.
const (
	LabelEnv     = "dev.dreadnode.environment"  // the task environment id
	LabelService = "dev.dreadnode.service"      // the compose service name
	LabelOwner   = "dev.dreadnode.tasks.owner"  // the backend (database) owning the environment
	LabelTask    = "dev.dreadnode.task"         // the task's ref, org/name@version
	LabelHash    = "dev.dreadnode.content-hash" // on images: hash of the build inputs
)

// DefaultSubnetPool is where environment networks get their subnets from.
const DefaultSubnetPool = "10.213.0.0/16"

// Options configure an Engine.
type Options struct {
	// Client is the Docker client; nil connects from the environment
	// (DOCKER_HOST...) or to Host, with API version negotiation.
	Client *client.Client
	Host   string
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
}

// Engine is safe for concurrent use.
type Engine struct {
	cli       *client.Client
	ownClient bool
	owner     string
	log       *slog.Logger
	pool      netip.Prefix
	buildTO   time.Duration
	limits    hardening.Limits // defaults of a service's limits
	filter    func(ctx context.Context, networkID string, allowOut []string) error

	ctx    context.Context // builds outlive the environment that started them
	cancel context.CancelFunc

	mu       sync.Mutex
	builds   map[string]*buildCall
	reserved map[netip.Prefix]bool

	buildCount atomic.Int64
	events     notify.Hub
	watching   atomic.Bool
}

// New returns an Engine.
func New(opts Options) (*Engine, error) {
	if opts.Owner == "" {
		return nil, errors.New("compose: Owner is required")
	}
	e := &Engine{cli: opts.Client, owner: opts.Owner, log: opts.Logger, buildTO: opts.BuildTimeout, filter: opts.FilterNetwork,
		builds: map[string]*buildCall{}, reserved: map[netip.Prefix]bool{}}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	d, l := hardening.DefaultServiceLimits, opts.ServiceLimits
	e.limits = hardening.Limits{MemoryBytes: cmp.Or(l.MemoryBytes, d.MemoryBytes), NanoCPUs: cmp.Or(l.NanoCPUs, d.NanoCPUs), Pids: cmp.Or(l.Pids, d.Pids)}
	if e.buildTO <= 0 {
		e.buildTO = 10 * time.Minute
	}
	pool := opts.SubnetPool
	if pool == "" {
		pool = DefaultSubnetPool
	}
	p, err := netip.ParsePrefix(pool)
	if err != nil || !p.Addr().Is4() || p.Bits() > 26 {
		return nil, fmt.Errorf("compose: subnet pool %q must be an IPv4 prefix of /26 or larger", pool)
	}
	e.pool = p.Masked()
	if e.cli == nil {
		copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
		if opts.Host != "" {
			copts = append(copts, client.WithHost(opts.Host))
		}
		c, err := client.NewClientWithOpts(copts...)
		if err != nil {
			return nil, fmt.Errorf("compose: connecting to Docker: %w", err)
		}
		e.cli, e.ownClient = c, true
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.Negotiate(context.Background())
	return e, nil
}

// Negotiate settles the API version with the daemon before concurrent use
// (the SDK's lazy negotiation races with its event stream goroutine). It is
// a no-op once done or when the daemon does not answer.
func (e *Engine) Negotiate(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e.cli.NegotiateAPIVersion(ctx)
}

// Close stops running builds and closes the client if the Engine opened it.
func (e *Engine) Close() error {
	e.cancel()
	if e.ownClient {
		return e.cli.Close()
	}
	return nil
}

// Client is the Docker client in use.
func (e *Engine) Client() *client.Client { return e.cli }

// Owner is the owner label value.
func (e *Engine) Owner() string { return e.owner }

// Builds is the number of image builds this Engine ran (cache hits excluded).
func (e *Engine) Builds() int64 { return e.buildCount.Load() }

// Ping checks the Docker engine answers.
func (e *Engine) Ping(ctx context.Context) error {
	_, err := e.cli.Ping(ctx)
	return err
}

// ContainerName is the name of service's container in environment envID.
func ContainerName(envID, service string) string { return "dn-" + envID + "-" + service }

// NetworkName is the name of environment envID's private network.
func NetworkName(envID string) string { return "dn-" + envID }

// Target names what an environment's resources are labelled with.
type Target struct {
	EnvID    string
	RecordID string
	OrgID    string
	TaskRef  string
}

func (e *Engine) labels(t Target, service string) map[string]string {
	l := map[string]string{
		compute.LabelManaged: "true",
		compute.LabelRecord:  t.RecordID,
		compute.LabelOrg:     t.OrgID,
		compute.LabelKind:    "task",
		LabelEnv:             t.EnvID,
		LabelOwner:           e.owner,
		LabelTask:            t.TaskRef,
	}
	if service != "" {
		l[LabelService] = service
	}
	return l
}

func (e *Engine) envFilter(envID string) filters.Args {
	f := filters.NewArgs(filters.Arg("label", LabelOwner+"="+e.owner))
	if envID != "" {
		f.Add("label", LabelEnv+"="+envID)
	}
	return f
}

// ProviderError is a Docker failure, worded for the environment's error.
type ProviderError struct {
	Op  string // what was being done, e.g. `starting service "web"`
	Err error
	// Provider names the runtime that failed; "" means docker.
	Provider string
}

func (e *ProviderError) Error() string {
	name := e.Provider
	if name == "" {
		name = "docker"
	}
	return "provider error (" + name + "): " + e.Op + ": " + cleanDockerErr(e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

func perr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var pe *ProviderError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &ProviderError{Op: fmt.Sprintf(format, args...), Err: err}
}

func cleanDockerErr(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "Error response from daemon: ")
	return s
}

// ContainerState is one container of a Snapshot.
type ContainerState struct {
	ID      string
	Name    string
	EnvID   string
	Service string
	State   string // created, running, paused, restarting, removing, exited, dead
	Status  string // human text, e.g. "Exited (1) 3 seconds ago"
	Image   string
}

// Snapshot is every container and network this Engine's owner has, by
// environment id.
type Snapshot struct {
	Containers map[string][]ContainerState
	Networks   map[string][]string // network ids
}

// Snapshot lists the owner's containers and networks.
func (e *Engine) Snapshot(ctx context.Context) (*Snapshot, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter("")})
	if err != nil {
		return nil, perr(err, "listing containers")
	}
	nets, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: e.envFilter("")})
	if err != nil {
		return nil, perr(err, "listing networks")
	}
	s := &Snapshot{Containers: map[string][]ContainerState{}, Networks: map[string][]string{}}
	for _, c := range cs {
		env := c.Labels[LabelEnv]
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		s.Containers[env] = append(s.Containers[env], ContainerState{ID: c.ID, Name: name, EnvID: env,
			Service: c.Labels[LabelService], State: string(c.State), Status: c.Status, Image: c.Image})
	}
	for _, n := range nets {
		env := n.Labels[LabelEnv]
		s.Networks[env] = append(s.Networks[env], n.ID)
	}
	return s, nil
}

// Remove deletes every container and network of environment envID. Missing
// resources are not an error; it is safe to call repeatedly.
func (e *Engine) Remove(ctx context.Context, envID string) error {
	_, err := e.RemoveCount(ctx, envID)
	return err
}

// RemoveCount is Remove, also returning how many containers and networks
// it found to remove.
func (e *Engine) RemoveCount(ctx context.Context, envID string) (int, error) {
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
			err := e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if err != nil && !errdefs.IsNotFound(err) && !strings.Contains(err.Error(), "is already in progress") {
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
	return len(cs) + n, err
}

// RemoveAll deletes every container and network of this Engine's owner,
// whatever their environment (test teardown of a throw-away database).
func (e *Engine) RemoveAll(ctx context.Context) error {
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

func (e *Engine) removeNetworks(ctx context.Context, envID string) (int, error) {
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
func (e *Engine) Pause(ctx context.Context, envID string) error {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(envID)})
	if err != nil {
		return perr(err, "listing the environment's containers")
	}
	var done []string
	for _, c := range cs {
		if c.State != container.StateRunning {
			continue
		}
		if err := e.cli.ContainerPause(ctx, c.ID); err != nil {
			for _, id := range done { // all or nothing
				_ = e.cli.ContainerUnpause(context.WithoutCancel(ctx), id)
			}
			return perr(err, "pausing service %q", c.Labels[LabelService])
		}
		done = append(done, c.ID)
	}
	return nil
}

// Unpause resumes every paused container of the environment.
func (e *Engine) Unpause(ctx context.Context, envID string) error {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(envID)})
	if err != nil {
		return perr(err, "listing the environment's containers")
	}
	for _, c := range cs {
		if c.State != container.StatePaused {
			continue
		}
		if err := e.cli.ContainerUnpause(ctx, c.ID); err != nil {
			return perr(err, "resuming service %q", c.Labels[LabelService])
		}
	}
	return nil
}

// Watch follows the Docker event stream for the owner's containers and wakes
// whoever waits on the environment concerned (Bring waits on them). It returns when
// ctx is done, reconnecting after errors.
func (e *Engine) Watch(ctx context.Context) {
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
				if env := m.Actor.Attributes[LabelEnv]; env != "" {
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
