// Package multi serves one deployment from several providers: each template
// is routed to the provider configured for it (DREADNODE_TEMPLATE_PROVIDERS),
// the others go to the default one. Higher-level code sees a single
// compute.Provider; every instance's Ref names the provider that owns it,
// so later calls go back to the same one.
package multi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// Provider routes by template (at create) and by Ref.Provider (afterwards).
type Provider struct {
	def    compute.Provider
	byName map[string]compute.Provider
	route  map[string]string // template id -> provider name
}

// New returns a router over def and others. route maps template ids to
// provider names; every named provider must be among def and others.
func New(def compute.Provider, others []compute.Provider, route map[string]string) (*Provider, error) {
	p := &Provider{def: def, byName: map[string]compute.Provider{def.Name(): def}, route: route}
	for _, o := range others {
		p.byName[o.Name()] = o
	}
	for tmpl, name := range route {
		if _, ok := p.byName[name]; !ok {
			return nil, fmt.Errorf("DREADNODE_TEMPLATE_PROVIDERS: template %q names provider %q, which is not configured", tmpl, name)
		}
	}
	return p, nil
}

// ParseRoutes reads "template=provider,template=provider".
func ParseRoutes(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		tmpl, name, ok := strings.Cut(pair, "=")
		if !ok || tmpl == "" || (name != "docker" && name != "e2b") {
			return nil, fmt.Errorf("DREADNODE_TEMPLATE_PROVIDERS: %q must look like template=docker or template=e2b", pair)
		}
		out[strings.TrimSpace(tmpl)] = strings.TrimSpace(name)
	}
	return out, nil
}

// Name is the default provider's name.
func (p *Provider) Name() string { return p.def.Name() }

// ProviderFor names the provider that creates instances of template.
func (p *Provider) ProviderFor(template string) string {
	if name, ok := p.route[template]; ok {
		return name
	}
	return p.def.Name()
}

// CheckNetwork implements compute.NetworkChecker with the provider that
// creates template's instances.
func (p *Provider) CheckNetwork(template string, n compute.Network) (field, reason string) {
	sub, ok := p.byName[p.ProviderFor(template)]
	if !ok {
		sub = p.def
	}
	if c, ok := sub.(compute.NetworkChecker); ok {
		return c.CheckNetwork(template, n)
	}
	return "", ""
}

func (p *Provider) of(ref compute.Ref) compute.Provider {
	if sub, ok := p.byName[ref.Provider]; ok {
		return sub
	}
	return p.def
}

func stamp(inst compute.Instance, name string) compute.Instance {
	inst.Ref.Provider = name
	return inst
}

// Ping reports every provider that does not answer.
func (p *Provider) Ping(ctx context.Context) error {
	var errs []error
	for _, name := range p.names() {
		if err := p.byName[name].Ping(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (p *Provider) names() []string {
	names := make([]string, 0, len(p.byName))
	for n := range p.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Providers returns the providers, ordered by name (for wiring what is
// particular to one, e.g. E2B's lifecycle callback).
func (p *Provider) Providers() []compute.Provider {
	out := make([]compute.Provider, 0, len(p.byName))
	for _, n := range p.names() {
		out = append(out, p.byName[n])
	}
	return out
}

// Templates lists each template once, from the provider it is routed to.
func (p *Provider) Templates(ctx context.Context) ([]compute.Template, error) {
	seen := map[string]bool{}
	var out []compute.Template
	for _, name := range p.names() {
		ts, err := p.byName[name].Templates(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, t := range ts {
			if p.ProviderFor(t.ID) == name && !seen[t.ID] {
				seen[t.ID] = true
				out = append(out, t)
			}
		}
	}
	return out, nil
}

func (p *Provider) Create(ctx context.Context, spec compute.Spec) (compute.Instance, error) {
	name := p.ProviderFor(spec.Template)
	inst, err := p.byName[name].Create(ctx, spec)
	return stamp(inst, name), err
}

func (p *Provider) Get(ctx context.Context, ref compute.Ref) (compute.Instance, error) {
	sub := p.of(ref)
	inst, err := sub.Get(ctx, ref)
	return stamp(inst, sub.Name()), err
}

// List merges every provider's instances.
func (p *Provider) List(ctx context.Context) ([]compute.Instance, error) {
	var out []compute.Instance
	for _, name := range p.names() {
		insts, err := p.byName[name].List(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for _, in := range insts {
			out = append(out, stamp(in, name))
		}
	}
	return out, nil
}

func (p *Provider) Pause(ctx context.Context, ref compute.Ref) error {
	return p.of(ref).Pause(ctx, ref)
}

func (p *Provider) PauseFilesystem(ctx context.Context, ref compute.Ref) error {
	return p.of(ref).PauseFilesystem(ctx, ref)
}

func (p *Provider) Resume(ctx context.Context, ref compute.Ref) (compute.Instance, error) {
	sub := p.of(ref)
	inst, err := sub.Resume(ctx, ref)
	return stamp(inst, sub.Name()), err
}

func (p *Provider) Delete(ctx context.Context, ref compute.Ref) error {
	return p.of(ref).Delete(ctx, ref)
}

func (p *Provider) SetTimeout(ctx context.Context, ref compute.Ref, d time.Duration) error {
	return p.of(ref).SetTimeout(ctx, ref, d)
}

func (p *Provider) Exec(ctx context.Context, ref compute.Ref, req compute.ExecRequest) (compute.ExecResult, error) {
	return p.of(ref).Exec(ctx, ref, req)
}

func (p *Provider) ReadFile(ctx context.Context, ref compute.Ref, path string) ([]byte, error) {
	return p.of(ref).ReadFile(ctx, ref, path)
}

func (p *Provider) WriteFile(ctx context.Context, ref compute.Ref, path string, data []byte) error {
	return p.of(ref).WriteFile(ctx, ref, path, data)
}

func (p *Provider) Logs(ctx context.Context, ref compute.Ref) (string, error) {
	return p.of(ref).Logs(ctx, ref)
}

func (p *Provider) Metrics(ctx context.Context, ref compute.Ref) (compute.Metrics, error) {
	return p.of(ref).Metrics(ctx, ref)
}

// Watch merges the events of the providers that push them.
func (p *Provider) Watch(ctx context.Context) <-chan compute.Event {
	out := make(chan compute.Event)
	var wg sync.WaitGroup
	for _, name := range p.names() {
		w, ok := p.byName[name].(compute.Watcher)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.Watch(ctx) {
				ev.Ref.Provider = name
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

// Close closes the providers that hold resources (the warm pool).
func (p *Provider) Close() error {
	var errs []error
	for _, sub := range p.byName {
		if c, ok := sub.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// Org volumes live on the default provider (API.md §14): a sandbox of a
// template routed elsewhere cannot mount them (the lifecycle refuses it).
var _ compute.VolumeProvider = (*Provider)(nil)

func (p *Provider) volumes() (compute.VolumeProvider, error) {
	if v, ok := p.def.(compute.VolumeProvider); ok {
		return v, nil
	}
	return nil, compute.Errorf(compute.KindInvalid, "volume", nil, "the %s provider holds no volumes", p.def.Name())
}

func (p *Provider) CreateVolume(ctx context.Context, v compute.VolumeSpec) error {
	vp, err := p.volumes()
	if err != nil {
		return err
	}
	return vp.CreateVolume(ctx, v)
}

func (p *Provider) DeleteVolume(ctx context.Context, id string) error {
	vp, err := p.volumes()
	if err != nil {
		return err
	}
	return vp.DeleteVolume(ctx, id)
}

func (p *Provider) VolumeBytes(ctx context.Context) (map[string]int64, error) {
	vp, err := p.volumes()
	if err != nil {
		return nil, err
	}
	return vp.VolumeBytes(ctx)
}
