package docker

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
)

// pool keeps Config.WarmPoolSize started containers per template (those
// configured at New), named dn-pool-<random> and labelled
// dev.dreadnode.pool=<template>, so a Create skips container creation and
// start. A claim renames the container to dn-<RecordID>: the rename is the
// atomic hand-over (the daemon refuses a second container of that name), and
// afterwards the record id is derived from the name, because Docker labels
// are immutable. For the same reason a claimed container carries no org,
// kind or metadata labels: Get reports OrgID "" for it.
//
// A pool belongs to the provider's scope: unclaimed pool containers of the
// scope that exist at start are removed (leftovers of a previous process,
// or the pools of live replicas of the same deployment, which the engine
// cannot tell apart: those replicas find out at their next claim and
// refill), and at Close the pool removes its own unclaimed containers only
// (labelled with its owner), never another replica's.
//
// A removal renames the container first, by its pool name: a container
// another replica claimed meanwhile has been renamed already, so the
// removal's rename fails and the sandbox is left alone; one renamed for
// removal can no longer be claimed.
type pool struct {
	p      *Provider
	size   int
	owner  string // labelPoolBy of this pool's containers
	mu     sync.Mutex
	ready  map[string][]poolEntry // template id -> started, unclaimed containers
	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

type poolEntry struct{ id, name string }

func startPool(p *Provider, size int) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	pl := &pool{p: p, size: size, owner: randomHex(8), ready: map[string][]poolEntry{}, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	for id := range p.cfg.Templates {
		pl.ready[id] = nil
	}
	go pl.run(ctx)
	return pl
}

// poolCompatible reports whether a pool container can serve spec: env vars
// and the main command are fixed at creation, and pool containers sit on the
// default (internet) network without an allowOut/denyOut of their own.
// Resources can be changed by ContainerUpdate.
func poolCompatible(spec compute.Spec) bool {
	return spec.Image == "" && len(spec.EnvVars) == 0 && len(spec.Command) == 0 && len(spec.Volumes) == 0 &&
		!spec.ExposeLoopback && // the agent's setting, fixed when the container was made
		len(spec.Network.AllowOut) == 0 && len(spec.Network.DenyOut) == 0 && // their rules are keyed at creation
		(spec.Network.AllowInternetAccess == nil || *spec.Network.AllowInternetAccess)
}

// claim hands a pool container to spec's record; ok is false when none is
// available (or usable), and the caller creates one the normal way.
func (pl *pool) claim(ctx context.Context, spec compute.Spec, tmpl compute.Template, cpu, mem int) (compute.Instance, bool) {
	p := pl.p
	for {
		e, ok := pl.pop(tmpl.ID)
		if !ok {
			return compute.Instance{}, false
		}
		err := p.cli.ContainerRename(ctx, e.name, containerName(spec.RecordID))
		if cerrdefs.IsConflict(err) {
			// The record already has a container: Create adopts it.
			pl.push(tmpl.ID, e)
			return compute.Instance{}, false
		}
		if err != nil {
			p.removeQuietly(e.id)
			continue
		}
		if cpu != tmpl.CPUCount || mem != tmpl.MemoryMB {
			_, err := p.cli.ContainerUpdate(ctx, e.id, container.UpdateConfig{Resources: container.Resources{
				NanoCPUs: int64(cpu) * 1e9, Memory: int64(mem) << 20, MemorySwap: int64(mem) << 20,
			}})
			if err != nil {
				// Let the normal path create it, or say why the limits are refused.
				p.removeQuietly(e.id)
				return compute.Instance{}, false
			}
		}
		inst, err := p.get(ctx, "create", e.id)
		if err != nil || inst.Status != compute.StatusRunning {
			p.removeQuietly(e.id)
			continue
		}
		return inst, true
	}
}

func (pl *pool) pop(tmpl string) (poolEntry, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	es := pl.ready[tmpl]
	if len(es) == 0 {
		return poolEntry{}, false
	}
	pl.ready[tmpl] = es[1:]
	select { // wake the refiller
	case pl.kick <- struct{}{}:
	default:
	}
	return es[0], true
}

func (pl *pool) push(tmpl string, e poolEntry) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.ready[tmpl] = append(pl.ready[tmpl], e)
}

func (pl *pool) readyCount(tmpl string) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.ready[tmpl])
}

// run removes stale pool containers, then refills after every claim, retrying
// with a growing pause while creation fails (e.g. the image is missing).
func (pl *pool) run(ctx context.Context) {
	defer close(pl.done)
	pl.removeUnclaimed(ctx, false)
	pause := &backoff.ExponentialBackOff{InitialInterval: time.Second, Multiplier: 2, MaxInterval: 30 * time.Second}
	for {
		var retry <-chan time.Time
		if err := pl.fill(ctx); err != nil {
			retry = time.After(pause.NextBackOff())
		} else {
			pause.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-pl.kick:
		case <-retry:
		}
	}
}

func (pl *pool) fill(ctx context.Context) error {
	for _, tmpl := range slices.Sorted(maps.Keys(pl.p.cfg.Templates)) {
		for pl.readyCount(tmpl) < pl.size {
			e, err := pl.create(ctx, tmpl)
			if err != nil {
				return err
			}
			pl.push(tmpl, e)
		}
	}
	return nil
}

func (pl *pool) create(ctx context.Context, tmplID string) (poolEntry, error) {
	p := pl.p
	tmpl, image, _ := p.template(tmplID)
	name := poolPrefix + randomHex(8)
	labels := map[string]string{
		compute.LabelManaged: "true",
		labelTemplate:        tmplID,
		labelPool:            tmplID,
		labelPoolBy:          pl.owner,
		labelScope:           p.cfg.Scope,
	}
	id, err := p.createContainer(ctx, name, image, tmpl.Ports, labels, nil, nil, tmpl.CPUCount, tmpl.MemoryMB, false, nil, false)
	if err != nil {
		return poolEntry{}, err
	}
	if err := p.start(ctx, "pool", id, false, nil); err != nil {
		return poolEntry{}, err
	}
	return poolEntry{id: id, name: name}, nil
}

// removeUnclaimed removes the scope's pool containers still named
// dn-pool-* (claimed ones have been renamed: never touched), only this
// pool's own when own.
func (pl *pool) removeUnclaimed(ctx context.Context, own bool) {
	f := filters.NewArgs(filters.Arg("label", labelScope+"="+pl.p.cfg.Scope), filters.Arg("name", poolPrefix))
	if own {
		f.Add("label", labelPoolBy+"="+pl.owner)
	}
	cs, err := pl.p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return
	}
	for _, c := range cs {
		if len(c.Names) > 0 {
			pl.retire(ctx, c.ID, strings.TrimPrefix(c.Names[0], "/"))
		}
	}
}

// retire removes pool container id if it is still unclaimed, named name.
func (pl *pool) retire(ctx context.Context, id, name string) {
	if !strings.HasPrefix(name, poolPrefix) {
		return
	}
	// By name: fails (not found) once a claim renamed it to its record's.
	if err := pl.p.cli.ContainerRename(ctx, name, poolPrefix+"gone-"+randomHex(8)); err != nil {
		return
	}
	pl.p.removeQuietly(id)
}

// close stops the refiller and removes the unclaimed containers.
func (pl *pool) close() {
	pl.cancel()
	<-pl.done
	pl.mu.Lock()
	clear(pl.ready)
	pl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pl.removeUnclaimed(ctx, true)
}
