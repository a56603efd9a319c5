package docker

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/agent"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/hardening"
)

// pidsLimit caps processes per sandbox so a fork bomb cannot take the host.
const pidsLimit = 4096

// recordIDPattern keeps dn-<RecordID> a valid container name.
var recordIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,200}$`)

// Create implements compute.Provider. It is idempotent per RecordID: the
// container name dn-<RecordID> is the lock, and a name conflict adopts the
// existing container (starting it when a crash left it only created).
func (p *Provider) Create(ctx context.Context, spec compute.Spec) (compute.Instance, error) {
	const op = "create"
	if !recordIDPattern.MatchString(spec.RecordID) {
		return compute.Instance{}, compute.Errorf(compute.KindInvalid, op, nil, "record id %q is not usable as a container name", spec.RecordID)
	}
	if spec.Template == "" {
		spec.Template = BaseTemplate
	}
	tmpl, image, ok := p.template(spec.Template)
	if !ok && spec.Image != "" { // an org's own template or snapshot: the base's defaults
		tmpl, _, ok = p.template(BaseTemplate)
		tmpl.ID = spec.Template
	}
	if !ok {
		return compute.Instance{}, compute.Errorf(compute.KindInvalid, op, nil, "unknown template %q", spec.Template)
	}
	if err := p.checkOrgVolumes(ctx, spec); err != nil {
		return compute.Instance{}, err
	}
	if err := p.egressReady(); err != nil {
		return compute.Instance{}, err // never a sandbox without its egress rules
	}
	if err := hardening.CheckRuntime(ctx, p.cli, "template "+spec.Template+": runtime", tmpl.Runtime); err != nil {
		return compute.Instance{}, compute.Errorf(compute.KindInvalid, op, err, "%v", err)
	}
	cpu, mem := resources(spec, tmpl)
	if cpu <= 0 || mem <= 0 {
		return compute.Instance{}, compute.Errorf(compute.KindInvalid, op, nil, "cpuCount and memoryMB must be positive")
	}
	if spec.Image != "" {
		image = spec.Image // a snapshot or a fork's checkpoint of a container of this template
	}
	if p.pool != nil && poolCompatible(spec) {
		if inst, ok := p.pool.claim(ctx, spec, tmpl, cpu, mem); ok {
			return inst, nil
		}
	}

	isolated := spec.Network.AllowInternetAccess != nil && !*spec.Network.AllowInternetAccess
	labels := map[string]string{
		compute.LabelManaged: "true",
		compute.LabelRecord:  spec.RecordID,
		compute.LabelOrg:     spec.OrgID,
		compute.LabelKind:    spec.Kind,
		labelTemplate:        spec.Template,
		labelScope:           p.cfg.Scope,
	}
	for k, v := range spec.Metadata {
		labels[metaPrefix+k] = v
	}
	if isolated {
		labels[labelNetwork] = isolatedValue
	}
	if err := egressLabels(spec, labels); err != nil {
		return compute.Instance{}, err
	}
	if spec.Image != "" {
		if err := p.clearInherited(ctx, spec.Image, labels); err != nil {
			return compute.Instance{}, err
		}
	}
	name := containerName(spec.RecordID)
	// Retry the races that resolve themselves within moments (10 attempts,
	// 10 ms doubling to 1 s apart): a concurrent Create holds the name but its
	// container is not visible yet, or a concurrent network creation briefly
	// left two networks of one name. Other errors end it at once.
	inst, err := backoff.Retry(ctx, func() (compute.Instance, error) {
		id, err := p.createContainer(ctx, name, image, tmpl.Ports, labels, env(spec.EnvVars), spec.Command, cpu, mem, isolated,
			volumeMounts(spec, labels), spec.ExposeLoopback)
		switch {
		case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "is already in use"):
			inst, aerr := p.adopt(ctx, name)
			if compute.IsNotFound(aerr) {
				return inst, aerr // the holder is not visible yet
			}
			return inst, backoff.Permanent(aerr)
		case err != nil && isNetworkRace(err):
			return compute.Instance{}, p.createError(op, image, err)
		case err != nil:
			return compute.Instance{}, backoff.Permanent(p.createError(op, image, err))
		}
		if err := p.sandboxEgress(ctx, labels); err != nil {
			p.removeQuietly(id)
			return compute.Instance{}, backoff.Permanent(err)
		}
		if err := p.start(ctx, op, id, isolated, labels); err != nil {
			// The network went between create and start (a created container
			// does not hold it; see pruneNetworks): start removed the
			// container, so retry from scratch.
			if !errors.Is(err, errNetworkGone) {
				return compute.Instance{}, backoff.Permanent(err)
			}
			p.forgetNetwork(p.networkName(isolated))
			return compute.Instance{}, err
		}
		inst, err := p.getChecked(ctx, op, id, labels)
		return inst, backoff.Permanent(err)
	}, backoff.WithBackOff(&backoff.ExponentialBackOff{InitialInterval: 10 * time.Millisecond, Multiplier: 2, MaxInterval: time.Second}),
		backoff.WithMaxTries(10), backoff.WithMaxElapsedTime(0))
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return compute.Instance{}, classify(op, err)
	}
	return inst, err
}

// errNetworkGone marks a start that failed because the container's network
// was removed after the container was created.
var errNetworkGone = errors.New("network removed before start")

// networkName is the network a sandbox joins.
func (p *Provider) networkName(isolated bool) string {
	if isolated {
		return p.cfg.Network + isolatedSuffix
	}
	return p.cfg.Network
}

// isNetworkRace recognises a network that was removed, or briefly duplicated
// by a concurrent creator (see ensureNetwork), after we looked it up.
func isNetworkRace(err error) bool {
	return containsAny(err.Error(), "is ambiguous") || (cerrdefs.IsNotFound(err) && containsAny(err.Error(), "network"))
}

// resources applies the template defaults to the spec's overrides.
func resources(spec compute.Spec, tmpl compute.Template) (cpu, mem int) {
	cpu, mem = tmpl.CPUCount, tmpl.MemoryMB
	if spec.CPUCount != 0 {
		cpu = spec.CPUCount
	}
	if spec.MemoryMB != 0 {
		mem = spec.MemoryMB
	}
	return cpu, mem
}

// env renders a map as sorted KEY=value pairs (sorted for stable inspects).
func env(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// createContainer creates (but does not start) one container on the default
// or the isolated network. No port is published on the host: the template's
// ports are kept in a label, and the router dials the container's address on
// its network (see endpoints).
func (p *Provider) createContainer(ctx context.Context, name, image string, ports []int, labels map[string]string,
	envs, cmd []string, cpu, mem int, isolated bool, mounts []mount.Mount, exposeLoopback bool) (string, error) {
	labels = maps.Clone(labels)
	if !isolated && len(ports) > 0 { // nothing outside an internal network reaches its containers
		labels[labelPorts] = portsLabel(ports)
	}
	cfg := &container.Config{Image: image, Labels: labels, Env: envs}
	if len(cmd) > 0 {
		cfg.Cmd = cmd // overrides the image's CMD, keeps its ENTRYPOINT
	}
	hc := &container.HostConfig{Mounts: mounts}
	b := &box{name: name, cfg: cfg, host: hc, storageOpt: p.storageOpt, // nil where the storage driver cannot cap the writable layer
		// No swap: a sandbox over its limit is OOM-killed, not slowed
		// down. Sandboxes share networks: no capability is ever added back.
		limits: hardening.Limits{NanoCPUs: int64(cpu) * 1e9, MemoryBytes: int64(mem) << 20, Pids: pidsLimit}}
	if t, _, ok := p.template(labels[labelTemplate]); ok {
		b.runtime = t.Runtime // "" is the engine's default; Create checks a named one first
	} else if base, _, ok := p.template(BaseTemplate); ok {
		b.runtime = base.Runtime // an org's own template or snapshot runs as the base does
	}
	if p.agent != nil {
		b.agent = func(ctx context.Context, cfg *container.Config, hc *container.HostConfig) error {
			return p.withAgent(ctx, cfg, hc, image, cmd, exposeLoopback)
		}
	}
	netName := p.networkName(isolated)
	netID, err := p.ensureNetwork(ctx, netName, isolated)
	if err != nil {
		return "", err
	}
	hc.NetworkMode = container.NetworkMode(netID)
	egressMAC(cfg, hc, netName)
	if err := p.sandboxDNS(hc, labels, isolated); err != nil {
		return "", err
	}
	id, err := b.create(ctx, p.cli)
	if err != nil && isNetworkRace(err) {
		p.forgetNetwork(netName) // look it up (and settle duplicates) again
	}
	return id, err
}

// withAgent copies the agent into a sandbox's container (agent.go): its
// volume mounted, the agent as the entrypoint, with the environment that
// says whether it re-exposes loopback servers.
func (p *Provider) withAgent(ctx context.Context, cfg *container.Config, hc *container.HostConfig, image string, cmd []string, exposeLoopback bool) error {
	if err := p.agent.ensureVolume(ctx, image); err != nil {
		return err // the caller's createError names a missing image
	}
	if err := p.agent.withAgent(ctx, cfg, image, cmd, p.agentKey); err != nil {
		return err
	}
	hc.Mounts = append(hc.Mounts, p.agent.mount())
	if exposeLoopback {
		// E2B's envd, for sandboxes made through /e2b: loopback servers
		// re-exposed, and "user" (in /home/user) for requests that name
		// no user, as on E2B's base. The agent's own: its processes
		// never see them.
		cfg.Env = append(cfg.Env, agent.EnvExposeLoopback+"=1", agent.EnvDefaultUser+"=user")
		// ::1, which the engine turns off with IPv6 on a network without
		// it: E2B's sandboxes have it and servers there bind it. Loopback
		// only; the sandbox's interfaces stay IPv4.
		hc.Sysctls = map[string]string{"net.ipv6.conf.lo.disable_ipv6": "0"}
	} else {
		// Said off, not left out: an image copied from a sandbox of
		// /e2b (Commit) carries its "on" in its environment.
		cfg.Env = append(cfg.Env, agent.EnvExposeLoopback+"=", agent.EnvDefaultUser+"=")
	}
	return nil
}

// volumePrefix starts the name of every volume this provider creates.
const volumePrefix = "dn-"

// createError maps a ContainerCreate failure to the user's terms.
func (p *Provider) createError(op, image string, err error) error {
	var pe *compute.Error
	if errors.As(err, &pe) { // from ensureNetwork: already classified
		return err
	}
	msg := daemonMessage(err)
	switch {
	case cerrdefs.IsNotFound(err) && containsAny(msg, "no such image"):
		hint := "build or load it on the Docker host"
		if image == p.cfg.BaseImage {
			hint = "run `make image` to build it"
		}
		return compute.Errorf(compute.KindImageMissing, op, err, "image %s is not available locally; %s", image, hint)
	case containsAny(msg, "memory", "cpu"):
		return compute.Errorf(compute.KindResourceLimit, op, err, "the Docker host refused the resources: %s", msg)
	}
	return classify(op, err)
}

// start starts a created container and, for an isolated sandbox, drops its
// default route. On failure the broken container is removed so that a retry
// starts clean, and the error says why in the user's terms.
func (p *Provider) start(ctx context.Context, op, id string, isolated bool, labels map[string]string) error {
	err := p.cli.ContainerStart(ctx, id, container.StartOptions{})
	if err == nil {
		// Its address may have had another holder: point the host at it
		// before anything dials it (neighbour.go).
		claimStarted(ctx, p.cli, id)
		err = p.serveSandboxDNS(ctx, id, labels) // at once: its first query may follow its start
	}
	if err == nil && p.agent != nil {
		err = p.waitAgent(ctx, id)
	}
	if err == nil && isolated {
		err = p.dropDefaultRoute(ctx, id)
	}
	if err == nil {
		return nil
	}
	p.removeQuietly(id)
	var pe *compute.Error
	if errors.As(err, &pe) {
		return err
	}
	if isNetworkRace(err) {
		return compute.Errorf(compute.KindNetwork, op, errors.Join(errNetworkGone, err), "the sandbox's Docker network was removed while it started: %s", daemonMessage(err))
	}
	msg := daemonMessage(err)
	switch {
	case containsAny(msg, "memory"):
		return compute.Errorf(compute.KindResourceLimit, op, err, "the sandbox could not start within its memory limit: %s", msg)
	case containsAny(msg, "executable file not found", "no such file or directory", "permission denied",
		"exec format error", "not a directory", "is a directory", "starting container process"):
		return compute.Errorf(compute.KindEntrypoint, op, err, "the main process could not start: %s", msg)
	}
	return classify(op, err)
}

// adopt returns the existing container named name, starting it when a crash
// left it created but not started.
func (p *Provider) adopt(ctx context.Context, name string) (compute.Instance, error) {
	const op = "create"
	c, err := p.cli.ContainerInspect(ctx, name)
	if err != nil {
		return compute.Instance{}, classify(op, err)
	}
	if c.State != nil && c.State.Status == "created" {
		if err := p.ensureAgent(ctx, c); err != nil {
			return compute.Instance{}, classify(op, err)
		}
		isolated := c.Config != nil && c.Config.Labels[labelNetwork] == isolatedValue
		if err := p.sandboxEgress(ctx, c.Config.Labels); err != nil {
			return compute.Instance{}, err
		}
		if err := p.start(ctx, op, c.ID, isolated, c.Config.Labels); err != nil {
			return compute.Instance{}, err
		}
	} else if c.Config != nil {
		if err := p.serveSandboxDNS(ctx, c.ID, c.Config.Labels); err != nil {
			return compute.Instance{}, err
		}
	}
	return p.get(ctx, op, c.ID)
}

// removeQuietly force-removes a container we are giving up on, with the
// named volumes made for it (a failed create leaves nothing behind); the
// error is irrelevant because the orphan sweep removes anything left behind.
func (p *Provider) removeQuietly(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = p.Delete(ctx, compute.Ref{ID: id})
}

func ptr[T any](v T) *T { return &v }
