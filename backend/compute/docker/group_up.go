package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/strslice"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute/docker/subnets"
)

// svcRun tracks one service during Up.
type svcRun struct {
	name    string
	cfg     compute.GroupService
	id      string
	state   container.InspectResponse
	have    bool // state is current
	starter bool // a goroutine is creating it
	// probe is the port that proves a forked service up (forkProbe), 0
	// for none; listening is set once it accepted a connection.
	probe     int
	probing   bool
	listening atomic.Bool
}

// forkProbe is the port Bring dials to tell that service name of u is up
// again, 0 for none: the exposed port of a service started from a fork's
// checkpoint (From) that has a health check. The parent's service passed
// that check on the very filesystem the fork starts from, and what a fork
// has to prove is only that its process is back, listening. The engine's
// own check still runs and counts too (a backend that cannot reach the
// environment's network waits for it), but its first run comes an
// interval after the start and each run is an exec, which on a loaded
// engine takes a second or more; a connection takes milliseconds.
func forkProbe(u *compute.Group, name string) int {
	s := u.Services[name]
	if s.From == "" || s.Healthcheck == nil || len(s.Healthcheck.Test) == 0 || s.Healthcheck.Test[0] == "NONE" {
		return 0
	}
	return u.Expose[name]
}

// probeFork dials ep until it accepts a connection (nothing is sent or
// read), then marks r listening and wakes Bring.
func (e *Groups) probeFork(ctx context.Context, u *compute.Group, r *svcRun, ep compute.Endpoint) {
	var d net.Dialer
	for wait := 20 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, 200*time.Millisecond) {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", net.JoinHostPort(ep.Host, strconv.Itoa(ep.Port)))
		cancel()
		if err == nil {
			_ = c.Close()
			r.listening.Store(true)
			e.events.Notify(u.ID)
			return
		}
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// Bring starts (or adopts) every service of u in dependency order and waits
// until each is running and healthy (compose healthchecks honoured; one-shot
// dependencies must have exited 0). It is idempotent: containers of the
// environment already running the right image are adopted, others removed
// and recreated. When ctx ends before that, the error is a *ServiceError
// describing what was still missing (wrapping nothing); callers inspect
// context.Cause(ctx) to tell a deadline from a cancellation.
func (e *Groups) Bring(ctx context.Context, u *compute.Group) (*compute.GroupResult, error) {
	defer e.bringBegins()() // the network pool refills between bursts
	netID, netName, err := e.envNetwork(ctx, u)
	if err != nil {
		if de := notStarted(ctx, u, "its network was still being created"); de != nil {
			return nil, de
		}
		return nil, err
	}
	oneShot := u.OneShots()
	runs := map[string]*svcRun{}
	for name, s := range u.Services {
		runs[name] = &svcRun{name: name, cfg: s, probe: forkProbe(u, name)}
	}
	res := &compute.GroupResult{Containers: map[string]string{}, Endpoints: map[string]compute.Endpoint{}}
	for name := range oneShot {
		res.OneShots = append(res.OneShots, name)
	}
	sort.Strings(res.OneShots)

	// Adopt what a previous attempt left: keep running containers of the
	// right image, remove the rest.
	existing, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(u.ID)})
	if err != nil {
		if de := notStarted(ctx, u, "the engine had not yet listed the environment's containers"); de != nil {
			return nil, de
		}
		return nil, perr(err, "listing the environment's containers")
	}
	for _, c := range existing {
		r := runs[c.Labels[compute.LabelService]]
		img := ""
		if r != nil {
			img = r.cfg.Image
		}
		if r != nil && r.id == "" && c.Image == img && (c.State == container.StateRunning || c.State == container.StatePaused ||
			(oneShot[r.name] && c.State == container.StateExited && strings.HasPrefix(c.Status, "Exited (0)"))) {
			if c.State == container.StatePaused {
				if err := e.cli.ContainerUnpause(ctx, c.ID); err != nil {
					return nil, perr(err, "resuming service %q", r.name)
				}
			}
			r.id = c.ID
			res.Adopted++
			continue
		}
		if err := removeContainer(ctx, e.cli, c.ID); err != nil {
			return nil, perr(err, "removing a stale container of the environment")
		}
	}

	names := make([]string, 0, len(runs))
	for n := range runs {
		names = append(names, n)
	}
	slices.Sort(names)
	type started struct {
		name string
		id   string
		err  error
	}
	startedCh := make(chan started, len(runs))
	pending := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	probeCtx, stopProbes := context.WithCancel(ctx)
	defer stopProbes() // before wg.Wait: a probe still dialing ends with Bring
	for {
		evCh, release := e.events.Wait(u.ID)
		err := e.observe(ctx, runs, names, oneShot)
		if err == nil {
			for _, n := range names {
				r := runs[n]
				if r.probe == 0 || r.probing || !r.have || r.state.State == nil || !r.state.State.Running {
					continue
				}
				ep, perr := networkEndpoint(r.state, netName, r.probe)
				if perr != nil {
					continue // no address yet: the next look
				}
				r.probing = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					e.probeFork(probeCtx, u, r, ep)
				}()
			}
			// Start every service whose dependencies are satisfied.
			for _, n := range names {
				r := runs[n]
				if r.id != "" || r.starter || !e.depsMet(r, runs) {
					continue
				}
				r.starter = true
				pending++
				wg.Add(1)
				go func() {
					defer wg.Done()
					id, err := e.startService(ctx, u, r.name, netID, netName)
					startedCh <- started{r.name, id, err}
				}()
			}
			ready := pending == 0
			for _, n := range names {
				if !e.serviceReady(runs[n], oneShot[n]) {
					ready = false
				}
			}
			if ready {
				e.forgetClaim(u.ID) // its containers name its network now
				release()
				break
			}
			// Wait for a start to finish, a Docker event, or the poll interval.
			poll := time.NewTimer(e.pollInterval())
			select {
			case s := <-startedCh:
				pending--
				runs[s.name].starter = false
				runs[s.name].id = s.id
				err = s.err
			case <-evCh:
			case <-poll.C:
			case <-ctx.Done():
			}
			poll.Stop()
		}
		release()
		if ctx.Err() != nil {
			return nil, e.notReady(ctx, runs, names, oneShot)
		}
		if err != nil {
			return nil, err
		}
	}
	for n, r := range runs {
		res.Containers[n] = r.id
		port, ok := u.Expose[n]
		if !ok {
			continue
		}
		ep, err := networkEndpoint(r.state, netName, port)
		if err != nil {
			return nil, &compute.ServiceError{Service: n, Msg: err.Error()}
		}
		res.Endpoints[n] = ep
	}
	return res, nil
}

// networkEndpoint is where the backend reaches a service's port: its
// address on the environment's network. Other environments and sandboxes
// sit on other bridges, which Docker keeps apart.
func networkEndpoint(st container.InspectResponse, netName string, port int) (compute.Endpoint, error) {
	if st.NetworkSettings != nil {
		if n := st.NetworkSettings.Networks[netName]; n != nil && n.IPAddress != "" {
			p := strconv.Itoa(port)
			return compute.Endpoint{URL: "http://" + n.IPAddress + ":" + p, Host: n.IPAddress, Port: port}, nil
		}
	}
	return compute.Endpoint{}, fmt.Errorf("has no address on the environment's network %s", netName)
}

// depsMet reports whether r's depends_on conditions hold.
func (e *Groups) depsMet(r *svcRun, runs map[string]*svcRun) bool {
	for dep, d := range r.cfg.DependsOn {
		dr := runs[dep]
		if dr == nil {
			continue // optional dependency not in the project
		}
		if dr.id == "" || !dr.have || dr.state.State == nil {
			return false
		}
		st := dr.state.State
		switch d {
		case compute.ConditionHealthy:
			if st.Health != nil && st.Health.Status != container.Healthy && !dr.listening.Load() {
				return false
			}
			if st.Health == nil && !st.Running {
				return false
			}
		case compute.ConditionCompleted:
			if st.Running || st.Status != container.StateExited || st.ExitCode != 0 {
				return false
			}
		default: // service_started
			if !st.Running && st.Status != container.StateExited {
				return false
			}
		}
	}
	return true
}

func (e *Groups) serviceReady(r *svcRun, oneShot bool) bool {
	if r.id == "" || !r.have || r.state.State == nil {
		return false
	}
	st := r.state.State
	if oneShot && st.Status == container.StateExited && st.ExitCode == 0 {
		return true
	}
	if !st.Running || st.Paused || st.Restarting {
		return false
	}
	return st.Health == nil || st.Health.Status == container.Healthy || st.Health.Status == container.NoHealthcheck || r.listening.Load()
}

// failed reports a service that can no longer become ready.
func (e *Groups) failed(ctx context.Context, r *svcRun, oneShot bool) error {
	st := r.state.State
	if st == nil {
		return nil
	}
	switch {
	case st.Status == container.StateExited || st.Status == container.StateDead:
		if oneShot && st.ExitCode == 0 {
			return nil
		}
		msg := fmt.Sprintf("exited with code %d before the environment was ready", st.ExitCode)
		if st.OOMKilled {
			msg += " (out of memory)"
		}
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return &compute.ServiceError{Service: r.name, Msg: msg, Logs: e.lastLogs(context.WithoutCancel(ctx), r.id, 20)}
	case st.Health != nil && st.Health.Status == container.Unhealthy:
		return &compute.ServiceError{Service: r.name, Msg: "never became healthy: " + healthSummary(st.Health),
			Logs: e.lastLogs(context.WithoutCancel(ctx), r.id, 20)}
	}
	return nil
}

func healthSummary(h *container.Health) string {
	s := fmt.Sprintf("health %q after %d consecutive failed checks", h.Status, h.FailingStreak)
	if h.Status == container.Starting {
		s = fmt.Sprintf("health still %q (%d consecutive failed checks)", h.Status, h.FailingStreak)
	}
	if n := len(h.Log); n > 0 {
		last := h.Log[n-1]
		out := strings.TrimSpace(last.Output)
		s += fmt.Sprintf("; last check: exit code %d", last.ExitCode)
		if out != "" {
			s += ", output " + strconv.Quote(truncate(out, 300))
		}
	}
	return s
}

// observe inspects every created container and reports a service that can
// no longer become ready.
func (e *Groups) observe(ctx context.Context, runs map[string]*svcRun, names []string, oneShot map[string]bool) error {
	for _, n := range names {
		r := runs[n]
		if r.id == "" {
			r.have = false
			continue
		}
		st, err := e.cli.ContainerInspect(ctx, r.id)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errdefs.IsNotFound(err) {
				return &compute.ServiceError{Service: n, Msg: "disappeared while the environment was starting (its container was removed)"}
			}
			return perr(err, "inspecting service %q", n)
		}
		r.state, r.have = st, true
		if serr := e.failed(ctx, r, oneShot[n]); serr != nil {
			return serr
		}
	}
	return nil
}

// notReady is Bring's answer once ctx is over: for a deadline (a cause that
// is context.DeadlineExceeded), a *ServiceError naming the first service that
// was not ready, with its health and last log lines; otherwise the cause.
func (e *Groups) notReady(orig context.Context, runs map[string]*svcRun, names []string, oneShot map[string]bool) error {
	cause := context.Cause(orig)
	if !errors.Is(cause, context.DeadlineExceeded) {
		return cause
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(orig), 10*time.Second)
	defer cancel()
	for _, n := range names {
		r := runs[n]
		if r.id == "" {
			continue
		}
		if st, err := e.cli.ContainerInspect(ctx, r.id); err == nil {
			r.state, r.have = st, true
		}
		if e.serviceReady(r, oneShot[n]) {
			continue
		}
		msg := "never became ready"
		if st := r.state.State; st != nil {
			switch {
			case st.Health != nil:
				msg = "never became healthy: " + healthSummary(st.Health)
			case !st.Running:
				msg = "never started (state " + st.Status + ")"
			}
		}
		return &compute.DeadlineError{Cause: cause, ServiceError: &compute.ServiceError{Service: n, Msg: msg, Logs: e.lastLogs(ctx, r.id, 20)}}
	}
	for _, n := range names {
		if r := runs[n]; r.id == "" && r.starter {
			return &compute.DeadlineError{Cause: cause, ServiceError: &compute.ServiceError{Service: n, Msg: "was still being created and started (the Docker engine is slow or overloaded)"}}
		}
	}
	for _, n := range names {
		if runs[n].id == "" {
			return &compute.DeadlineError{Cause: cause, ServiceError: &compute.ServiceError{Service: n, Msg: "was never started (its dependencies never became ready)"}}
		}
	}
	return cause
}

// notStarted words a deadline that passed before any service was started,
// naming the first service so the user knows what never came up; nil when
// ctx did not pass its deadline.
func notStarted(ctx context.Context, u *compute.Group, why string) error {
	cause := context.Cause(ctx)
	if !errors.Is(cause, context.DeadlineExceeded) || len(u.Services) == 0 {
		return nil
	}
	// Name a service that would have started first: one without dependencies.
	var names []string
	for n, svc := range u.Services {
		if len(svc.DependsOn) == 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		for n := range u.Services {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return &compute.DeadlineError{Cause: cause, ServiceError: &compute.ServiceError{Service: names[0],
		Msg: "was never started: " + why + " (the Docker engine is slow or overloaded)"}}
}

func (e *Groups) pollInterval() time.Duration {
	if e.watching.Load() {
		return 500 * time.Millisecond
	}
	return 100 * time.Millisecond
}

// LastLogs returns the last n lines a container wrote (stdout and stderr).
func (e *Groups) LastLogs(ctx context.Context, id string, n int) []string {
	return e.lastLogs(ctx, id, n)
}

func (e *Groups) lastLogs(ctx context.Context, id string, n int) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rc, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: strconv.Itoa(n)})
	if err != nil {
		return nil
	}
	defer rc.Close()
	var buf bytes.Buffer
	raw, _ := io.ReadAll(io.LimitReader(rc, 1<<20))
	if _, err := stdcopy.StdCopy(&buf, &buf, bytes.NewReader(raw)); err != nil {
		buf.Reset()
		buf.Write(raw) // a TTY container's log is not multiplexed
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			lines = append(lines, truncate(l, 300))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// createTimeout bounds one resource-creating Docker call. Such calls are not
// cancelled with the caller's context (only checked before they start), so
// when a cancelled Bring returns, every resource it asked for exists and a
// following Remove sees it: a create aborted client-side may still complete
// in the daemon and would otherwise leak.
const createTimeout = 2 * time.Minute

func uncancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
}

// startService creates and starts one service's container.
func (e *Groups) startService(ctx context.Context, u *compute.Group, name, netID, netName string) (string, error) {
	s := u.Services[name]
	cfg, host := e.containerConfig(u, name, s)
	host.NetworkMode = container.NetworkMode(netName)
	if netName != compute.GroupNetworkName(u.ID) {
		cfg.Labels[labelGroupNet] = netName // a pooled network: Remove finds it here
	}
	cname := GroupContainerName(u.ID, name)
	netCfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		netName: {NetworkID: netID, Aliases: append([]string{name}, s.Aliases...)},
	}}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if s.From != "" {
		cfg.Image = s.From // a fork's checkpoint; its main command stays the one of s.Image (withAgent)
	}
	cctx, cancel := uncancelled(ctx)
	defer cancel()
	b := &box{name: cname, cfg: cfg, host: host, net: netCfg, capAdd: s.CapAdd, capDrop: s.CapDrop, limits: e.serviceLimits(s),
		runtime: u.Runtime, storageOpt: e.storageOpt}
	if e.agent != nil {
		b.agent = func(ctx context.Context, cfg *container.Config, host *container.HostConfig) error {
			return e.withAgent(ctx, cfg, host, name, s)
		}
	}
	var id string
	for attempt := 0; ; attempt++ {
		var err error
		if id, err = b.create(cctx, e.cli); err == nil {
			break
		}
		var pe *compute.ProviderError
		if errors.As(err, &pe) {
			return "", err // the agent's, already in the service's terms
		}
		if errdefs.IsConflict(err) && attempt == 0 {
			// A container of that name survived an earlier attempt.
			_ = removeContainer(cctx, e.cli, cname)
			continue
		}
		if errdefs.IsNotFound(err) {
			return "", perr(err, "creating service %q: image %s is missing", name, cfg.Image)
		}
		return "", perr(err, "creating service %q", name)
	}
	if err := ctx.Err(); err != nil {
		return id, err
	}
	if err := e.cli.ContainerStart(cctx, id, container.StartOptions{}); err != nil {
		return id, perr(err, "starting service %q", name)
	}
	claimStarted(cctx, e.cli, id) // neighbour.go
	return id, nil
}

func (e *Groups) containerConfig(u *compute.Group, name string, s compute.GroupService) (*container.Config, *container.HostConfig) {
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	for k, v := range e.labels(u.GroupTarget, name) {
		labels[k] = v
	}
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	hostname := s.Hostname
	if hostname == "" {
		hostname = name
	}
	cfg := &container.Config{
		Image:      s.Image,
		Hostname:   hostname,
		Domainname: s.DomainName,
		User:       s.User,
		Env:        env,
		WorkingDir: s.WorkingDir,
		Labels:     labels,
		Tty:        s.Tty,
		OpenStdin:  s.StdinOpen,
		StopSignal: s.StopSignal,
	}
	if s.Command != nil {
		cfg.Cmd = strslice.StrSlice(s.Command)
	}
	if s.Entrypoint != nil {
		cfg.Entrypoint = strslice.StrSlice(s.Entrypoint)
	}
	if s.StopTimeout != nil {
		secs := int(s.StopTimeout.Seconds())
		cfg.StopTimeout = &secs
	}
	if hc := s.Healthcheck; hc != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: hc.Test, Interval: hc.Interval, Timeout: hc.Timeout,
			StartPeriod: hc.StartPeriod, Retries: hc.Retries}
	}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(compute.GroupNetworkName(u.ID)),
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Init:           s.Init,
		ReadonlyRootfs: s.ReadOnly,
		ExtraHosts:     s.ExtraHosts,
		ShmSize:        s.ShmSize,
		GroupAdd:       s.GroupAdd,
		DNS:            s.DNS,
		DNSSearch:      s.DNSSearch,
		DNSOptions:     s.DNSOptions,
	}
	if len(s.Tmpfs) > 0 {
		host.Tmpfs = map[string]string{}
		for _, t := range s.Tmpfs {
			path, opts, _ := strings.Cut(t, ":")
			host.Tmpfs[path] = opts
		}
	}
	host.Resources.MemoryReservation = s.MemReservation
	return cfg, host
}

// envNetwork returns the id and name of the network environment u runs
// on: the pooled one its containers or its claim name (group_netpool.go),
// else its own when it exists, else one taken from the pool (under the
// task's egress rules before any service joins it), else its own, made now.
func (e *Groups) envNetwork(ctx context.Context, u *compute.Group) (string, string, error) {
	own := compute.GroupNetworkName(u.ID)
	if e.netPool == nil {
		id, err := e.ensureNetwork(ctx, u.GroupTarget, u.AllowOut)
		return id, own, err
	}
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: e.envFilter(u.ID)})
	if err != nil {
		return "", "", perr(err, "listing the environment's containers")
	}
	for _, c := range cs {
		if name := c.Labels[labelGroupNet]; name != "" {
			n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
			if err == nil && n.Labels[labelNetPool] != "" && n.Labels[compute.LabelDeployment] == e.owner {
				return n.ID, name, nil
			}
		}
	}
	if n, ok := e.claimedNetwork(u.ID); ok {
		return n.id, n.name, nil
	}
	if _, err := e.cli.NetworkInspect(ctx, own, network.InspectOptions{}); err == nil || !errdefs.IsNotFound(err) {
		id, err := e.ensureNetwork(ctx, u.GroupTarget, u.AllowOut)
		return id, own, err
	}
	if n, ok := e.takeNetwork(u.ID); ok {
		// Made under rules that let nothing out; a task allowing more
		// gets its own before any service joins.
		if len(u.AllowOut) > 0 && e.filter != nil {
			if err := e.filter(ctx, n.id, u.AllowOut); err != nil {
				e.removePooled(n)
				e.forgetClaim(u.ID)
				return "", "", &compute.ProviderError{Op: "filtering the environment's network", Err: err}
			}
		}
		return n.id, n.name, nil
	}
	id, err := e.ensureNetwork(ctx, u.GroupTarget, u.AllowOut)
	return id, own, err
}

// ensureNetwork returns the environment's network, creating it with a
// subnet from the pool when missing, under the egress rules (the baseline
// and the task's allowOut) when the engine filters.
func (e *Groups) ensureNetwork(ctx context.Context, t compute.GroupTarget, allowOut []string) (string, error) {
	id, err := e.createNetwork(ctx, t)
	if err == nil && e.filter != nil {
		if ferr := e.filter(ctx, id, allowOut); ferr != nil {
			return "", &compute.ProviderError{Op: "filtering the environment's network", Err: ferr}
		}
	}
	return id, err
}

func (e *Groups) createNetwork(ctx context.Context, t compute.GroupTarget) (string, error) {
	name := compute.GroupNetworkName(t.ID)
	if n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		if n.Labels[compute.LabelGroup] != t.ID {
			return "", &compute.ProviderError{Op: "creating the environment's network", Err: fmt.Errorf("a network named %s exists but belongs to something else", name)}
		}
		return n.ID, nil
	} else if !errdefs.IsNotFound(err) {
		return "", perr(err, "inspecting the environment's network")
	}
	return e.createSubnetNetwork(ctx, name, e.labels(t, ""))
}

// createSubnetNetwork creates bridge network name with a /26 of the pool;
// a network of that name created meanwhile by another caller is used.
func (e *Groups) createSubnetNetwork(ctx context.Context, name string, labels map[string]string) (string, error) {
	var lastErr error
	for attempt := 0; attempt < 8; attempt++ {
		subnet, err := e.reserveSubnet(ctx)
		if err != nil {
			return "", err
		}
		if err := ctx.Err(); err != nil {
			e.releaseSubnet(subnet)
			return "", err
		}
		cctx, cancel := uncancelled(ctx)
		resp, err := e.cli.NetworkCreate(cctx, name, network.CreateOptions{
			Driver: "bridge",
			Labels: labels,
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet.String(), Gateway: subnet.Addr().Next().String()}}},
		})
		cancel()
		e.releaseSubnet(subnet)
		if err == nil {
			return resp.ID, nil
		}
		lastErr = err
		if errdefs.IsConflict(err) || strings.Contains(err.Error(), "already exists") {
			if n, ierr := e.cli.NetworkInspect(ctx, name, network.InspectOptions{}); ierr == nil {
				return n.ID, nil
			}
		}
		if !strings.Contains(err.Error(), "overlap") {
			break
		}
	}
	return "", perr(lastErr, "creating the environment's network")
}

// reserveSubnet picks a /26 of the pool that no Docker network uses and no
// concurrent creation holds.
func (e *Groups) reserveSubnet(ctx context.Context) (netip.Prefix, error) {
	used, err := subnets.Used(ctx, e.cli)
	if err != nil {
		return netip.Prefix{}, perr(err, "listing networks")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for p := range e.reserved {
		used = append(used, p)
	}
	cand, ok := subnets.Free(e.pool, 26, used)
	if !ok {
		return netip.Prefix{}, &compute.ProviderError{Op: "creating the environment's network", Err: fmt.Errorf("the subnet pool %s is exhausted", e.pool)}
	}
	e.reserved[cand] = true
	return cand, nil
}

func (e *Groups) releaseSubnet(p netip.Prefix) {
	e.mu.Lock()
	delete(e.reserved, p)
	e.mu.Unlock()
}
