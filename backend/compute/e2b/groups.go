// Groups runs groups (task environments) on E2B: it implements
// compute.GroupProvider on top of a compute.Provider (this package's).
//
// E2B templates are prebuilt, so nothing is built: building is instant and a
// task runs on E2B only when its manifest names an E2B template for every
// service (task.yaml e2b_templates). Bringing an environment up creates one
// sandbox per service (concurrently: sandboxes share no private network, so
// depends_on has nothing to order) and it is ready once every sandbox runs.
// An exposed service answers at E2B's public URL of the port,
// https://<port>-<sandboxID>.<domain>; its service_urls entry is
// {"url": that URL, "host": "<port>-<sandboxID>.<domain>", "port": 443}: the
// port is the one a client connects to (E2B's TLS proxy), not the service's
// port inside the sandbox, which is part of the host name.
//
// Each sandbox carries the provider record id "<environment id>/<service>"
// (metadata dev.dreadnode.record), which makes creation idempotent per
// service and lets Snapshot, Remove and the sweep find an environment's
// sandboxes through List, plus metadata naming the environment, service,
// task and ledger record. The provider must use a scope of its own (Scope:
// "<deployment>-tasks") so that the sandbox reconciler's provider, scoped to
// the deployment, never lists nor sweeps task sandboxes, and this engine
// never sees the reconciler's.

package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// LabelGroupRecord is the metadata key naming the group's ledger record
// (dev.dreadnode.record holds the per-service provider record id).
const LabelGroupRecord = "dev.dreadnode.tasks.record"

// TaskScope is the E2B provider scope of the task sandboxes of a deployment.
func TaskScope(deployment string) string { return deployment + "-tasks" }

// groupCreateTimeout bounds one sandbox creation; it is not cut short by the
// caller's context (only checked before it starts), so that once Bring
// returns every sandbox it asked for exists and a following Remove sees it.
const groupCreateTimeout = 2 * time.Minute

// GroupOptions configure Groups.
type GroupOptions struct {
	// Provider creates the sandboxes; required. Its scope must be reserved
	// to task environments (see Scope).
	Provider compute.Provider
	// ServiceURL is the public URL of a sandbox port; default the
	// provider's ServiceURL method (E2B: https://<port>-<id>.<domain>).
	ServiceURL func(sandboxID string, port int) string
	Logger     *slog.Logger
}

// Groups implements compute.GroupProvider on E2B. It is safe for
// concurrent use.
type Groups struct {
	p          compute.Provider
	serviceURL func(string, int) string
	log        *slog.Logger
}

var (
	_ compute.GroupProvider   = (*Groups)(nil)
	_ compute.GroupKeepAliver = (*Groups)(nil)
)

// NewGroups returns Groups on opts.Provider.
func NewGroups(opts GroupOptions) (*Groups, error) {
	if opts.Provider == nil {
		return nil, errors.New("e2b groups: Provider is required")
	}
	e := &Groups{p: opts.Provider, serviceURL: opts.ServiceURL, log: opts.Logger}
	if e.serviceURL == nil {
		su, ok := opts.Provider.(interface{ ServiceURL(string, int) string })
		if !ok {
			return nil, errors.New("e2b groups: GroupOptions.ServiceURL is required for a provider without a ServiceURL method")
		}
		e.serviceURL = su.ServiceURL
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e, nil
}

// NewTaskGroups builds the E2B provider of cfg scoped to the task sandboxes
// of deployment (TaskScope) and returns Groups on it. Template ids of task
// manifests are E2B's own, so cfg.Templates (our ids of sandbox templates)
// does not apply.
func NewTaskGroups(cfg Config, deployment string, log *slog.Logger) (*Groups, error) {
	cfg.Scope = TaskScope(deployment)
	cfg.Templates = map[string]compute.Template{}
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return NewGroups(GroupOptions{Provider: p, Logger: log})
}

// Name is the ledger record's provider of the groups' records.
func (e *Groups) Name() string { return "e2b" }

// recordID is the provider record id of service's sandbox in envID.
func recordID(envID, service string) string { return envID + "/" + service }

// parseRecord splits a provider record id made by recordID.
func parseRecord(id string) (envID, service string, ok bool) {
	envID, service, ok = strings.Cut(id, "/")
	return envID, service, ok && envID != "" && service != ""
}

func gperr(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	var pe *compute.ProviderError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &compute.ProviderError{Provider: "e2b", Op: fmt.Sprintf(format, args...), Err: err}
}

// BuildsImages implements compute.GroupProvider: E2B starts prebuilt
// templates, so there is nothing to build.
func (e *Groups) BuildsImages() bool { return false }

// Missing implements compute.GroupProvider: nothing is ever missing.
func (e *Groups) Missing(context.Context, map[string]*compute.Image) ([]*compute.Image, error) {
	return nil, nil
}

// Build implements compute.GroupProvider: nothing to build.
func (e *Groups) Build(context.Context, map[string]*compute.Image) (int, error) { return 0, nil }

// Builds implements compute.GroupProvider.
func (e *Groups) Builds() int64 { return 0 }

// Ping implements compute.GroupProvider.
func (e *Groups) Ping(ctx context.Context) error { return e.p.Ping(ctx) }

// Negotiate implements compute.GroupProvider (nothing to negotiate).
func (e *Groups) Negotiate(context.Context) {}

// Watch implements compute.GroupProvider: E2B pushes no events; the sweep polls.
func (e *Groups) Watch(context.Context) {}

// Close implements compute.GroupProvider.
func (e *Groups) Close() error {
	if c, ok := e.p.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// sandboxes lists the sandboxes of environment envID ("" for all), by
// service.
func (e *Groups) sandboxes(ctx context.Context, envID string) (map[string][]compute.Instance, error) {
	insts, err := e.p.List(ctx)
	if err != nil {
		return nil, gperr(err, "listing the environment's sandboxes")
	}
	out := map[string][]compute.Instance{}
	for _, in := range insts {
		env, svc, ok := parseRecord(in.RecordID)
		if !ok || (envID != "" && env != envID) {
			continue
		}
		out[svc] = append(out[svc], in)
	}
	return out, nil
}

// Bring implements compute.GroupProvider: one sandbox per service from the
// manifest's e2b_templates, adopting those an earlier attempt made (resumed
// when paused). A service without a template fails the environment.
func (e *Groups) Bring(ctx context.Context, u *compute.Group) (*compute.GroupResult, error) {
	names := make([]string, 0, len(u.Services))
	for n := range u.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	var missing []string
	for _, n := range names {
		if u.Services[n].Template == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, &compute.BuildError{Service: missing[0], Msg: fmt.Sprintf(
			"has no E2B template: this backend runs task environments on E2B, which needs task.yaml's e2b_templates to name a template for every service (missing: %s)",
			strings.Join(missing, ", "))}
	}
	existing, err := e.sandboxes(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	res := &compute.GroupResult{Containers: map[string]string{}, Endpoints: map[string]compute.Endpoint{}}
	// Sandboxes of services the project no longer has, or duplicates.
	var stale []compute.Instance
	for svc, ins := range existing {
		if _, ok := u.Services[svc]; !ok {
			stale = append(stale, ins...)
		} else if len(ins) > 1 {
			stale = append(stale, ins[1:]...)
		}
	}
	for _, in := range stale {
		if err := e.p.Delete(ctx, in.Ref); err != nil {
			return nil, gperr(err, "removing a stale sandbox of the environment")
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make([]error, len(names))
	)
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, adopted, err := e.bringService(ctx, u, n, existing[n])
			errs[i] = err
			if err == nil {
				mu.Lock()
				res.Containers[n] = id
				if adopted {
					res.Adopted++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			if cerr := context.Cause(ctx); cerr != nil {
				return nil, cerr
			}
			return nil, err
		}
	}
	for n, id := range res.Containers {
		if port, ok := u.Expose[n]; ok {
			res.Endpoints[n] = e.endpoint(id, port)
		}
	}
	return res, nil
}

// bringService adopts or creates service n's sandbox and returns its id.
func (e *Groups) bringService(ctx context.Context, u *compute.Group, n string, have []compute.Instance) (string, bool, error) {
	if len(have) > 0 {
		in := have[0]
		if in.Status == compute.StatusPaused {
			if _, err := e.p.Resume(ctx, in.Ref); err != nil {
				return "", false, gperr(err, "resuming service %q", n)
			}
		}
		return in.Ref.ID, true, nil
	}
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	s := u.Services[n]
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	spec := compute.Spec{
		RecordID: recordID(u.ID, n),
		OrgID:    u.OrgID,
		Kind:     "task",
		Template: s.Template,
		EnvVars:  env,
		Metadata: map[string]string{
			compute.LabelGroup:   u.ID,
			compute.LabelService: n,
			compute.LabelTask:    u.TaskRef,
			LabelGroupRecord:     u.RecordID,
		},
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupCreateTimeout)
	defer cancel()
	in, err := e.p.Create(cctx, spec)
	if err != nil {
		if compute.KindOf(err) == compute.KindImageMissing {
			var pe *compute.Error
			errors.As(err, &pe)
			return "", false, &compute.BuildError{Service: n, Msg: "e2b_templates names template " + strconv.Quote(spec.Template) + ": " + pe.Msg}
		}
		return "", false, gperr(err, "creating service %q from E2B template %q", n, spec.Template)
	}
	if in.Status == compute.StatusPaused { // adopted by the provider after a lost answer
		if _, err := e.p.Resume(cctx, in.Ref); err != nil {
			return "", false, gperr(err, "resuming service %q", n)
		}
	}
	e.log.Info("task environment sandbox created", "environment", u.ID, "service", n, "sandbox", in.Ref.ID, "template", spec.Template)
	return in.Ref.ID, false, nil
}

// endpoint is where port of a sandbox answers: E2B's public URL of it.
func (e *Groups) endpoint(sandboxID string, port int) compute.Endpoint {
	raw := e.serviceURL(sandboxID, port)
	ep := compute.Endpoint{URL: raw}
	if u, err := url.Parse(raw); err == nil {
		ep.Host = u.Hostname()
		if p, err := strconv.Atoi(u.Port()); err == nil {
			ep.Port = p
		} else if u.Scheme == "http" {
			ep.Port = 80
		} else {
			ep.Port = 443
		}
	}
	return ep
}

// KeepAlive implements compute.GroupKeepAliver: E2B keeps every sandbox of the
// environment running at least d from now (the provider adds its grace).
func (e *Groups) KeepAlive(ctx context.Context, envID string, d time.Duration) error {
	return e.eachIn(ctx, envID, compute.StatusRunning, func(svc string, in compute.Instance) error {
		if err := e.p.SetTimeout(ctx, in.Ref, d); err != nil && !compute.IsNotFound(err) {
			return gperr(err, "setting the time to live of service %q", svc)
		}
		return nil
	})
}

// eachIn calls f, service by service in name order, for each sandbox of
// environment envID in status st, until f fails.
func (e *Groups) eachIn(ctx context.Context, envID string, st compute.Status, f func(svc string, in compute.Instance) error) error {
	sbs, err := e.sandboxes(ctx, envID)
	if err != nil {
		return err
	}
	for _, svc := range groupSortedKeys(sbs) {
		for _, in := range sbs[svc] {
			if in.Status != st {
				continue
			}
			if err := f(svc, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// Remove implements compute.GroupProvider.
func (e *Groups) Remove(ctx context.Context, envID string) error {
	_, err := e.RemoveCount(ctx, envID)
	return err
}

// RemoveCount implements compute.GroupProvider: it deletes every sandbox of the
// environment.
func (e *Groups) RemoveCount(ctx context.Context, envID string) (int, error) {
	sbs, err := e.sandboxes(ctx, envID)
	if err != nil {
		return 0, err
	}
	var (
		n    int
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for svc, ins := range sbs {
		for _, in := range ins {
			n++
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := e.p.Delete(ctx, in.Ref); err != nil && !compute.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, gperr(err, "removing the sandbox of service %q", svc))
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

// Pause implements compute.GroupProvider: all running sandboxes of the environment
// are paused, or none (those already paused are resumed on a failure).
func (e *Groups) Pause(ctx context.Context, envID string) error {
	var done []compute.Ref
	return e.eachIn(ctx, envID, compute.StatusRunning, func(svc string, in compute.Instance) error {
		err := e.p.Pause(ctx, in.Ref)
		switch {
		case err == nil:
			done = append(done, in.Ref)
		case compute.KindOf(err) == compute.KindConflict:
			// Paused meanwhile (E2B's 409): what was asked for.
		default:
			for _, ref := range done { // all or nothing
				_, _ = e.p.Resume(context.WithoutCancel(ctx), ref)
			}
			return gperr(err, "pausing service %q", svc)
		}
		return nil
	})
}

// Unpause implements compute.GroupProvider: every paused sandbox of the environment
// is resumed.
func (e *Groups) Unpause(ctx context.Context, envID string) error {
	return e.eachIn(ctx, envID, compute.StatusPaused, func(svc string, in compute.Instance) error {
		if _, err := e.p.Resume(ctx, in.Ref); err != nil {
			return gperr(err, "resuming service %q", svc)
		}
		return nil
	})
}

// Exec implements compute.GroupProvider through envd in service's sandbox. The
// output is stdout followed by stderr (envd streams them apart); a command
// exceeding timeout is killed and reported with TimedOut and exit code 124.
func (e *Groups) Exec(ctx context.Context, envID, service string, argv []string, timeout time.Duration, maxOutput int) (*compute.GroupExecResult, error) {
	in, err := e.running(ctx, envID, service)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	out, err := e.p.Exec(ctx, in.Ref, compute.ExecRequest{Cmd: argv, Timeout: timeout})
	res := &compute.GroupExecResult{Duration: time.Since(start), ExitCode: out.ExitCode}
	combined := append(append([]byte(nil), out.Stdout...), out.Stderr...)
	if maxOutput > 0 && len(combined) > maxOutput {
		combined, res.Truncated = combined[:maxOutput], true
	}
	res.Output = combined
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case compute.KindOf(err) == compute.KindTimeout:
		res.TimedOut, res.ExitCode = true, 124
		return res, nil
	case compute.IsNotFound(err), compute.KindOf(err) == compute.KindConflict:
		return nil, fmt.Errorf("%w: service %q: %v", compute.ErrNotRunning, service, err)
	}
	return nil, gperr(err, "running a command in service %q", service)
}

// running returns the running sandbox of service.
func (e *Groups) running(ctx context.Context, envID, service string) (compute.Instance, error) {
	sbs, err := e.sandboxes(ctx, envID)
	if err != nil {
		return compute.Instance{}, err
	}
	ins := sbs[service]
	if len(ins) == 0 {
		return compute.Instance{}, fmt.Errorf("%w: service %q has no sandbox", compute.ErrNotRunning, service)
	}
	if ins[0].Status != compute.StatusRunning {
		return compute.Instance{}, fmt.Errorf("%w: service %q is %s", compute.ErrNotRunning, service, ins[0].Status)
	}
	return ins[0], nil
}

// ExecStream implements compute.GroupProvider with envd's process stream: the
// events as they happen; a command exceeding timeout is killed and ends
// with exit code 124, as on Docker.
func (e *Groups) ExecStream(ctx context.Context, envID, service string, argv []string, timeout time.Duration, emit compute.Emit) (*compute.GroupExecResult, error) {
	ps, ok := e.p.(compute.Processes)
	if !ok {
		return nil, fmt.Errorf("the %s provider does not stream commands: %w", e.p.Name(), errors.ErrUnsupported)
	}
	in, err := e.running(ctx, envID, service)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res := &compute.GroupExecResult{}
	err = ps.ExecStream(ctx, in.Ref, compute.ExecRequest{Cmd: argv, Timeout: timeout}, nil, func(ev compute.ProcessEvent) error {
		if ev.Type == compute.EventExit {
			res.ExitCode = ev.ExitCode
		}
		return emit(ev)
	})
	res.Duration = time.Since(start)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case compute.KindOf(err) == compute.KindTimeout:
		res.TimedOut, res.ExitCode = true, 124
		return res, emit(compute.ProcessEvent{Type: compute.EventExit, ExitCode: 124})
	case compute.IsNotFound(err), compute.KindOf(err) == compute.KindConflict:
		return nil, fmt.Errorf("%w: service %q: %v", compute.ErrNotRunning, service, err)
	}
	return nil, gperr(err, "running a command in service %q", service)
}

// Snapshot implements compute.GroupProvider: the sandboxes of this scope by
// environment (E2B has no networks).
func (e *Groups) Snapshot(ctx context.Context) (*compute.GroupSnapshot, error) {
	insts, err := e.p.List(ctx)
	if err != nil {
		return nil, gperr(err, "listing sandboxes")
	}
	s := &compute.GroupSnapshot{Containers: map[string][]compute.GroupMember{}, Networks: map[string][]string{}}
	for _, in := range insts {
		env, svc, ok := parseRecord(in.RecordID)
		if !ok {
			continue
		}
		s.Containers[env] = append(s.Containers[env], compute.GroupMember{ID: in.Ref.ID, Name: in.Ref.ID, GroupID: env,
			Service: svc, State: string(in.Status), Status: "E2B sandbox " + string(in.Status)})
	}
	return s, nil
}

// LastLogs implements compute.GroupProvider with the sandbox's E2B logs.
func (e *Groups) LastLogs(ctx context.Context, id string, n int) []string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := e.p.Logs(ctx, compute.Ref{ID: id})
	if err != nil {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func groupSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
