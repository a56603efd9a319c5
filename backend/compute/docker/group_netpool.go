package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/dreadnode/terraform-provider-dreadnode/backend/compute"
	"github.com/dreadnode/terraform-provider-dreadnode/backend/ids"
)

// A pool of ready environment networks. The engine creates networks one at
// a time (measured on the shared 2-core host under load: five concurrent
// creates finished 13, 17, 23, 29 and 32 s after they were asked for), so
// ten environments forked at once each waited for every network created
// before its own: the last fork's network came ~35 s after the fork. A
// network made ahead of time, under the strictest egress rules (nothing
// beyond its bridge), takes that off an environment's critical path.
//
// A pooled network cannot take its environment's name or labels once
// claimed (the engine renames and relabels no network), so:
//   - it is named dn-pool-<random> and labelled with the deployment (every
//     cleanup by deployment label removes it) and with the Groups instance
//     that made it (labelNetPool), whose liveness a lock file tells
//     (holdPoolInstance), never with an environment;
//   - each service container of the environment that claimed it names it
//     in labelGroupNet, and the claim is kept in memory until a container
//     does, so Remove finds and removes it with the environment;
//   - Close removes the instance's unclaimed networks, and the next pool of
//     the deployment removes those of a killed instance that no container
//     uses.
const (
	labelNetPool  = "dev.dreadnode.netpool"       // on a pooled network: the instance that made it
	labelGroupNet = "dev.dreadnode.group-network" // on a service container: the pooled network it runs on
	poolNetPrefix = "dn-pool-"
)

type pooledNet struct{ id, name string }

// netPool holds up to size ready networks; it starts filling at its first
// take, so a backend that never runs an environment makes none.
type netPool struct {
	size     int
	instance string
	release  func() // the instance's liveness lock

	mu      sync.Mutex
	ready   []pooledNet
	claimed map[string]pooledNet // environment id → network, until a container names it
	filling bool
	swept   bool
	closed  bool
	wg      sync.WaitGroup
	// bringing counts the Brings in flight; idle is broadcast when it
	// falls to 0 (and by a timer: see waitIdle).
	bringing int
	idle     *sync.Cond
}

// refillDefer bounds how long a refill waits for the environments being
// brought up: the engine makes networks and starts containers one at a
// time, so a network made during a burst of forks delays their starts
// (measured: ten forks' containers took 13–50 s to start while the pool
// refilled). Past it the pool refills anyway, so a steady stream of
// environments does not keep it empty.
const refillDefer = 30 * time.Second

func newNetPool(size int) *netPool {
	if size <= 0 {
		return nil
	}
	inst := ids.New()
	p := &netPool{size: size, instance: inst, release: holdPoolInstance(inst), claimed: map[string]pooledNet{}}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// bringBegins counts a Bring in flight; call the function it returns when
// the Bring returns.
func (e *Groups) bringBegins() func() {
	p := e.netPool
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	p.bringing++
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		if p.bringing--; p.bringing == 0 {
			p.idle.Broadcast()
		}
		p.mu.Unlock()
	}
}

// waitIdle waits, with p.mu held, until no Bring is in flight, the pool is
// closed or refillDefer has passed.
func (p *netPool) waitIdle() {
	if p.bringing == 0 {
		return
	}
	expired := false
	t := time.AfterFunc(refillDefer, func() {
		p.mu.Lock()
		expired = true
		p.idle.Broadcast()
		p.mu.Unlock()
	})
	defer t.Stop()
	for p.bringing > 0 && !p.closed && !expired {
		p.idle.Wait()
	}
}

func poolLockPath(instance string) string {
	return filepath.Join(os.TempDir(), "dreadnode-netpool-"+filepath.Base(instance)+".lock")
}

// holdPoolInstance takes an exclusive lock on the instance's file for the
// process's lifetime (the kernel drops it when the process dies).
func holdPoolInstance(instance string) func() {
	f, err := os.OpenFile(poolLockPath(instance), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		_ = os.Remove(poolLockPath(instance))
		f.Close()
	}
}

// poolInstanceGone reports whether the instance that made a pooled network
// no longer runs on this host: its lock file exists and nobody holds it.
// An instance of another host (or of a container with its own /tmp)
// leaves no file here and is never judged gone: its networks are its own
// Close's, or the deployment's cleanup's, to remove.
func poolInstanceGone(instance string) bool {
	f, err := os.OpenFile(poolLockPath(instance), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false
	}
	_ = os.Remove(poolLockPath(instance))
	return true
}

// takeNetwork claims a ready network for environment envID (false when the
// pool is off or empty) and starts refilling the pool.
func (e *Groups) takeNetwork(envID string) (pooledNet, bool) {
	p := e.netPool
	if p == nil {
		return pooledNet{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return pooledNet{}, false
	}
	var n pooledNet
	ok := len(p.ready) > 0
	if ok {
		n, p.ready = p.ready[0], p.ready[1:]
		p.claimed[envID] = n
	}
	if !p.filling {
		p.filling = true
		p.wg.Add(1)
		go e.fillPool()
	}
	return n, ok
}

// claimedNetwork is the pooled network environment envID claimed in this
// process and that no container names yet.
func (e *Groups) claimedNetwork(envID string) (pooledNet, bool) {
	if e.netPool == nil {
		return pooledNet{}, false
	}
	e.netPool.mu.Lock()
	defer e.netPool.mu.Unlock()
	n, ok := e.netPool.claimed[envID]
	return n, ok
}

// forgetClaim drops environment envID's claim (its network was removed).
func (e *Groups) forgetClaim(envID string) {
	if e.netPool == nil {
		return
	}
	e.netPool.mu.Lock()
	delete(e.netPool.claimed, envID)
	e.netPool.mu.Unlock()
}

// fillPool makes networks, one at a time (the engine serialises them
// anyway, and environments being created need it too), until the pool is
// full or closed.
func (e *Groups) fillPool() {
	p := e.netPool
	defer p.wg.Done()
	p.mu.Lock()
	sweep := !p.swept
	p.swept = true
	p.mu.Unlock()
	if sweep {
		e.sweepPool()
	}
	for {
		p.mu.Lock()
		p.waitIdle()
		if p.closed || len(p.ready) >= p.size {
			p.filling = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		n, err := e.makePoolNetwork()
		p.mu.Lock()
		if err == nil && !p.closed {
			p.ready = append(p.ready, n)
			p.mu.Unlock()
			continue
		}
		closed := p.closed
		p.filling = false
		p.mu.Unlock()
		if err != nil {
			if !closed {
				e.log.Warn("making a ready network for task environments failed; environments make their own until the next try", "error", err)
			}
			return
		}
		e.removePooled(n) // made while closing
		return
	}
}

// makePoolNetwork creates one network under the strictest egress rules
// (nothing beyond its bridge; a claim for a task that allows more sets its
// rules again). The create is not cancelled by Close (see createTimeout):
// fillPool removes what it made after Close.
func (e *Groups) makePoolNetwork() (pooledNet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	name := poolNetPrefix + ids.New()
	labels := map[string]string{compute.LabelManaged: "true", compute.LabelDeployment: e.owner, labelNetPool: e.netPool.instance}
	id, err := e.createSubnetNetwork(ctx, name, labels)
	if err != nil {
		return pooledNet{}, err
	}
	n := pooledNet{id: id, name: name}
	if e.filter != nil {
		if err := e.filter(ctx, id, nil); err != nil {
			e.removePooled(n)
			return pooledNet{}, err
		}
	}
	return n, nil
}

// removePooled removes a pooled network, waiting out endpoints a container
// removed a moment ago may still hold (best effort).
func (e *Groups) removePooled(n pooledNet) {
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	for attempt := 0; attempt < 20; attempt++ {
		err := e.cli.NetworkRemove(ctx, n.id)
		if err == nil || errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "active endpoints") {
			return
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return
		}
	}
}

// sweepPool removes the deployment's pooled networks that no container
// uses and whose instance is gone (a backend killed with its pool full, or
// after a claim before its first container).
func (e *Groups) sweepPool() {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	nets, err := e.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", compute.LabelDeployment+"="+e.owner), filters.Arg("label", labelNetPool))})
	if err != nil {
		return
	}
	for _, n := range nets {
		inst := n.Labels[labelNetPool]
		if inst == e.netPool.instance || !poolInstanceGone(inst) {
			continue
		}
		full, err := e.cli.NetworkInspect(ctx, n.ID, network.InspectOptions{})
		if err != nil || len(full.Containers) > 0 {
			continue
		}
		e.removePooled(pooledNet{id: n.ID, name: n.Name})
	}
}

// closePool stops filling and removes the ready networks and the claimed
// ones no container uses yet.
func (e *Groups) closePool() {
	p := e.netPool
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.idle.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	p.mu.Lock()
	left := p.ready
	p.ready = nil
	for _, n := range p.claimed {
		left = append(left, n)
	}
	p.claimed = map[string]pooledNet{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range left {
		wg.Go(func() {
			// A claimed network whose environment runs stays with it
			// (a backend's restart leaves environments running).
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if full, err := e.cli.NetworkInspect(ctx, n.id, network.InspectOptions{}); err == nil && len(full.Containers) > 0 {
				return
			}
			e.removePooled(n)
		})
	}
	wg.Wait()
	p.release()
}
